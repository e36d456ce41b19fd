package kplug_test

// Mutate over a real socket: MUTATE advertised by implementing
// kplug.Mutator, the kinds in GetInfo and heartbeats alike, the start-up
// checks, and every answer, error and bad input.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugtest"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

var backupInfo = kplug.Info{
	Name: "backup", Version: "1.0.0",
	Offers: []kplug.Offer{{Base: widgetKind, Implementation: "Backup"}},
	Mutations: []kplug.GroupVersionKind{
		kplug.FromAPIVersionAndKind("apps/v1", "Deployment"),
		kplug.FromAPIVersionAndKind("v1", "Pod"),
	},
}

// backup adds a sidecar container to the Deployments it is sent; a
// Deployment named "broken" makes it fail, "panicky" panic, "silent"
// answer nil, and "sneaky" patch its status.
type backup struct{ echo }

func (*backup) Mutate(_ context.Context, call *kplug.MutateCall) (*kplug.Mutation, error) {
	switch call.Object.Name() {
	case "broken":
		return nil, errors.New("backup store unreachable")
	case "panicky":
		panic("mutate panicked on purpose")
	case "silent":
		return nil, nil
	case "sneaky":
		return kplug.NoMutation().Add("/status/backedUp", true), nil
	}
	base, live := "none", "none"
	if call.Base != nil {
		base = call.Base.Name()
	}
	if call.Live != nil {
		live = call.Live.Name()
	}
	return kplug.NoMutation().
		Add("/spec/template/spec/containers/-", map[string]any{"name": "backup", "image": "backup:1"}).
		WithWarning(call.Implementation + " base=" + base + " live=" + live), nil
}

func deploymentJSON(name string) []byte {
	return mustJSON(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "ns", "labels": map[string]any{"kplug.io/plugin": "tables"}},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{}}}},
	})
}

func TestMutateIsAdvertisedAndItsKindsDeclaredInGetInfoAndHeartbeats(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	kplugtest.StartPlugin(t, dir, backupInfo, &backup{}, kplug.WithHeartbeatInterval(100*time.Millisecond))
	hb := registry.WaitForHeartbeats(t, 1, 5*time.Second)[0].Request
	handshake, ok := registry.Handshake(hb.GetInstanceId())
	if !ok || handshake.Err != nil {
		t.Fatalf("handshake: %v", handshake.Err)
	}
	want := []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE, kplugv1.Capability_CAPABILITY_MUTATE}
	for name, declared := range map[string]interface {
		GetCapabilities() []kplugv1.Capability
		GetMutations() []*kplugv1.Mutation
	}{"heartbeat": hb, "GetInfo": handshake.Info} {
		if !equalCaps(declared.GetCapabilities(), want) {
			t.Errorf("%s: capabilities %v, want %v", name, declared.GetCapabilities(), want)
		}
		var kinds []string
		for _, m := range declared.GetMutations() {
			kinds = append(kinds, m.GetKind().GetGroup()+"|"+m.GetKind().GetVersion()+"|"+m.GetKind().GetKind())
		}
		if strings.Join(kinds, " ") != "apps|v1|Deployment |v1|Pod" {
			t.Errorf("%s: mutations %v", name, kinds)
		}
	}
}

func TestMutateAnswersAndErrorsAsTheProtocolSays(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	client := kplugtest.Dial(t, kplugtest.StartPlugin(t, dir, backupInfo, &backup{}).SocketPath())
	r, err := client.Mutate(ctxFor(t, 2*time.Second), &kplugv1.MutateRequest{
		Implementation: "Tables", Object: deploymentJSON("w-server"), Live: deploymentJSON("w-live"), Base: widgetJSON("w"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.GetPatch()) != `[{"op":"add","path":"/spec/template/spec/containers/-","value":{"image":"backup:1","name":"backup"}}]` ||
		len(r.GetWarnings()) != 1 || r.GetWarnings()[0] != "Tables base=w live=w-live" {
		t.Errorf("patch %s, warnings %q", r.GetPatch(), r.GetWarnings())
	}
	// Without a base or a live object (empty bytes): none, not an error.
	r, err = client.Mutate(ctxFor(t, 2*time.Second), &kplugv1.MutateRequest{Object: deploymentJSON("w-server")})
	if err != nil || r.GetWarnings()[0] != " base=none live=none" {
		t.Errorf("got %v (%v)", r, err)
	}
	for _, c := range []struct {
		in      *kplugv1.MutateRequest
		code    codes.Code
		message string
	}{
		{&kplugv1.MutateRequest{Object: deploymentJSON("broken")}, codes.Internal, "backup store unreachable"},
		{&kplugv1.MutateRequest{Object: deploymentJSON("panicky")}, codes.Internal, "the plugin's Mutate handler panicked: mutate panicked on purpose"},
		{&kplugv1.MutateRequest{Object: deploymentJSON("silent")}, codes.Internal, "the plugin's Mutate handler returned a nil answer and no error"},
		{&kplugv1.MutateRequest{Object: deploymentJSON("sneaky")}, codes.Internal,
			`plugin bug: a mutation may only change /spec and single labels and annotations, not kplug.io/ ones; add "/status/backedUp" is outside them`},
		{&kplugv1.MutateRequest{Object: []byte("[1]")}, codes.InvalidArgument, "kplug: the object is not a JSON object"},
		{&kplugv1.MutateRequest{Object: deploymentJSON("w"), Live: []byte("{")}, codes.InvalidArgument, "kplug: the live object is not valid JSON: "},
		{&kplugv1.MutateRequest{Object: deploymentJSON("w"), Base: []byte("[]")}, codes.InvalidArgument, "kplug: the base object is not a JSON object"},
	} {
		_, err := client.Mutate(ctxFor(t, 2*time.Second), c.in)
		if s := status.Convert(err); s.Code() != c.code || !strings.HasPrefix(s.Message(), c.message) {
			t.Errorf("%s: got %v %q, want %v %q", c.in.GetObject(), s.Code(), s.Message(), c.code, c.message)
		}
	}
}

func TestAPluginWithoutAMutatorIsNotAskedToMutate(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	client := kplugtest.Dial(t, kplugtest.StartPlugin(t, dir, info, &echo{}).SocketPath())
	_, err := client.Mutate(ctxFor(t, 2*time.Second), &kplugv1.MutateRequest{Object: deploymentJSON("w")})
	if s := status.Convert(err); s.Code() != codes.Unimplemented || s.Message() != "plugin postgresql does not implement Mutate" {
		t.Errorf("Mutate: %v", err)
	}
	r, err := client.GetInfo(ctxFor(t, 2*time.Second), &kplugv1.GetInfoRequest{})
	if err != nil || !equalCaps(r.GetCapabilities(), []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE}) || len(r.GetMutations()) != 0 {
		t.Errorf("GetInfo %v (%v)", r, err)
	}
}

func TestMutationsAreCheckedAtStartup(t *testing.T) {
	many := make([]kplug.GroupVersionKind, 17)
	for i := range many {
		many[i] = kplug.FromAPIVersionAndKind("example.com/v1", "Kind"+string(rune('A'+i)))
	}
	for _, c := range []struct {
		plugin    kplug.Plugin
		mutations []kplug.GroupVersionKind
		message   string
	}{
		{&echo{}, backupInfo.Mutations, "it declares mutations but does not implement kplug.Mutator (a Mutate method)"},
		{&backup{}, nil, "it implements kplug.Mutator but declares no kind to mutate (Info.Mutations)"},
		{&backup{}, many, "17 mutations are declared; at most 16 are accepted"},
		{&backup{}, []kplug.GroupVersionKind{{Group: "apps", Kind: "Deployment"}}, `mutation #0 ("apps/", "Deployment") names no version or kind`},
		{&backup{}, []kplug.GroupVersionKind{kplug.FromAPIVersionAndKind("v1", "")}, `mutation #0 ("v1", "") names no version or kind`},
	} {
		i := backupInfo
		i.Mutations = c.mutations
		_, err := kplug.NewServer(i, c.plugin)
		if !errors.Is(err, kplug.ErrInvalidDeclaration) || !strings.Contains(err.Error(), "plugin backup cannot start: "+c.message) {
			t.Errorf("got %v, want ErrInvalidDeclaration with %q", err, c.message)
		}
	}
}
