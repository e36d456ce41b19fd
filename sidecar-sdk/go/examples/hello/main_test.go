package main

import (
	"context"
	"testing"
	"time"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugtest"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// The example, served on a real socket, registered with a fake operator
// registry, and called as the operator calls it.
func TestHelloGreets(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	server := kplugtest.StartPlugin(t, dir, kplug.Info{Name: "hello", Version: "1.0.0"}, Hello{})
	registry.WaitForHeartbeats(t, 1, 5*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for spec, want := range map[string]string{
		`{}`:                        `{"greeting":"hello, world!"}`,
		`{"salutation": "bonjour"}`: `{"greeting":"bonjour, world!"}`,
	} {
		r, err := kplugtest.Dial(t, server.SocketPath()).Reconcile(ctx, &kplugv1.ReconcileRequest{
			Implementation: "Hello",
			Object:         []byte(`{"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": "world", "namespace": "default"}, "spec": ` + spec + `}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetOutcome() != kplugv1.Outcome_OUTCOME_OK || r.GetMessage() != "greeted world" || string(r.GetStatus()) != want {
			t.Errorf("spec %s: got %v", spec, r)
		}
	}
	withExtension, err := kplugtest.Dial(t, server.SocketPath()).Reconcile(ctx, &kplugv1.ReconcileRequest{
		Implementation: "Hello",
		Object:         []byte(`{"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": "world", "namespace": "default"}, "spec": {"salutation": "hi"}}`),
		Extensions:     [][]byte{[]byte(`{"apiVersion": "example.com/v1", "kind": "GreetingHelloExtension", "metadata": {"name": "world", "namespace": "default"}, "spec": {"punctuation": "?"}}`)},
	})
	if err != nil || string(withExtension.GetStatus()) != `{"greeting":"hi, world?"}` {
		t.Errorf("with a GreetingHelloExtension: %v, %v", withExtension, err)
	}
	// The extension is told which greeting used its settings.
	if statuses := withExtension.GetExtensionStatuses(); len(statuses) != 1 ||
		statuses[0].GetTarget().GetKind() != "GreetingHelloExtension" || statuses[0].GetTarget().GetName() != "world" ||
		string(statuses[0].GetStatus()) != `{"lastUsedBy":"world"}` {
		t.Errorf("the extension's status: %v", statuses)
	}
	if events := withExtension.GetEvents(); len(events) != 1 || events[0].GetReason() != "Greeted" || events[0].GetMessage() != "hi, world?" {
		t.Errorf("the Greeted event: %v", events)
	}
	bye, err := kplugtest.Dial(t, server.SocketPath()).Finalize(ctx, &kplugv1.FinalizeRequest{
		Implementation: "Hello",
		Object:         []byte(`{"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": "world", "namespace": "default"}, "spec": {}}`),
	})
	if err != nil || bye.GetOutcome() != kplugv1.Outcome_OUTCOME_OK || len(bye.GetEvents()) != 1 ||
		bye.GetEvents()[0].GetReason() != "SaidGoodbye" || bye.GetEvents()[0].GetMessage() != "goodbye, world" {
		t.Errorf("Finalize: %v, %v", bye, err)
	}
	r, err := kplugtest.Dial(t, server.SocketPath()).Reconcile(ctx, &kplugv1.ReconcileRequest{
		Implementation: "Hello", Object: []byte(`{"kind": "Greeting", "spec": {"salutation": 42}}`),
	})
	if err != nil || r.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED {
		t.Errorf("a spec that does not fit: %v, %v", r, err)
	}
}
