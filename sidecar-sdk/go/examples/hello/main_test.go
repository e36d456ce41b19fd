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
	r, err := kplugtest.Dial(t, server.SocketPath()).Reconcile(ctx, &kplugv1.ReconcileRequest{
		Implementation: "Hello", Object: []byte(`{"kind": "Greeting", "spec": {"salutation": 42}}`),
	})
	if err != nil || r.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED {
		t.Errorf("a spec that does not fit: %v, %v", r, err)
	}
}
