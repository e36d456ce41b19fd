package kplug_test

// Children: the child kinds an offer declares, the observed children a
// request carries, and the desired children an answer carries
// (docs/protocol.md, "Children").

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugtest"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

const configMap = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "users-settings"}, "data": {"a": "1"}}`

const deployment = `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "users"}, "status": {"readyReplicas": 2}}`

func TestFromAPIVersionAndKind(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind string
		want             kplug.GroupVersionKind
	}{
		{"v1", "ConfigMap", kplug.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}},
		{"apps/v1", "Deployment", kplug.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}},
		{"myorg.org/v1alpha1", "Widget", kplug.GroupVersionKind{Group: "myorg.org", Version: "v1alpha1", Kind: "Widget"}},
	} {
		got := kplug.FromAPIVersionAndKind(tc.apiVersion, tc.kind)
		if got != tc.want {
			t.Errorf("FromAPIVersionAndKind(%q, %q) = %+v, want %+v", tc.apiVersion, tc.kind, got, tc.want)
		}
		if got.APIVersion() != tc.apiVersion {
			t.Errorf("%+v: APIVersion() = %q, want %q", got, got.APIVersion(), tc.apiVersion)
		}
	}
}

func TestObservedChildren(t *testing.T) {
	req := mustDecode(t, base)
	if len(req.Children) != 0 || req.Child("ConfigMap", "users-settings") != nil {
		t.Fatalf("a request without children: %v", req.Children)
	}
	if err := req.DecodeChildren([]byte(configMap), []byte(deployment)); err != nil {
		t.Fatal(err)
	}
	if len(req.Children) != 2 || req.Children[0].Kind() != "ConfigMap" || req.Children[1].Name() != "users" {
		t.Fatalf("children %v", req.Children)
	}
	d := req.Child("Deployment", "users")
	if d == nil {
		t.Fatal("Child(Deployment, users) = nil")
	}
	if ready, _ := d.Get("status", "readyReplicas"); ready != int64(2) {
		t.Errorf("readyReplicas %v (%T)", ready, ready)
	}
	for _, missing := range [][2]string{{"Deployment", "other"}, {"ConfigMap", "users"}} {
		if c := req.Child(missing[0], missing[1]); c != nil {
			t.Errorf("Child(%s, %s) = %v, want nil", missing[0], missing[1], c.Ref())
		}
	}
}

func TestObservedChildrenThatAreNotObjectsAreRefused(t *testing.T) {
	req := mustDecode(t, base)
	for _, tc := range []struct {
		children []string
		want     string
	}{
		{[]string{`[1]`}, "kplug: child #0 is not a JSON object"},
		{[]string{configMap, `{"kind": `}, "kplug: child #1 is not valid JSON: "},
		{[]string{configMap, deployment, `NaN`}, "kplug: child #2 is not valid JSON: "},
	} {
		raw := make([][]byte, len(tc.children))
		for i, c := range tc.children {
			raw[i] = []byte(c)
		}
		err := req.DecodeChildren(raw...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.children, err, tc.want)
		}
		if len(req.Children) != 0 {
			t.Errorf("%q: a refused decode changed the children: %v", tc.children, req.Children)
		}
	}
}

// wantChildren decodes a children message (nil: none) for comparison.
func wantChildren(t *testing.T, children *kplugv1.Children) []any {
	t.Helper()
	if children == nil {
		return nil
	}
	decoded := []any{}
	for _, c := range children.GetObjects() {
		var v any
		if err := json.Unmarshal(c, &v); err != nil {
			t.Fatalf("a child is not JSON: %v: %s", err, c)
		}
		decoded = append(decoded, v)
	}
	return decoded
}

func TestDesiredChildrenArePresentOnlyWhenSet(t *testing.T) {
	type metadata struct {
		Name string `json:"name"`
	}
	type typedConfigMap struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metadata          `json:"metadata"`
		Data       map[string]string `json:"data,omitempty"`
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}}
	cmJSON := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}}
	typedJSON := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "b"}, "data": map[string]any{"k": "v"}}
	for name, tc := range map[string]struct {
		response *kplug.Response
		want     []any // nil: no children message
	}{
		"none":                {kplug.OK(), nil},
		"an empty set":        {kplug.OK().WithChildren(), []any{}},
		"one":                 {kplug.OK().WithChild(cm), []any{cmJSON}},
		"a typed struct":      {kplug.Retry(time.Second).WithChild(typedConfigMap{"v1", "ConfigMap", metadata{"b"}, map[string]string{"k": "v"}}), []any{typedJSON}},
		"raw JSON":            {kplug.OK().WithChild(json.RawMessage(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}`)), []any{cmJSON}},
		"a set, then another": {kplug.OK().WithChild(cm).WithChildren(typedConfigMap{"v1", "ConfigMap", metadata{"b"}, map[string]string{"k": "v"}}), []any{typedJSON}},
		"a set, then one":     {kplug.OK().WithChildren(cm).WithChild(cm), []any{cmJSON, cmJSON}},
	} {
		if err := tc.response.Err(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		reconcile := tc.response.ReconcileResponse()
		if got := wantChildren(t, reconcile.GetChildren()); !reflect.DeepEqual(got, tc.want) || (reconcile.Children == nil) != (tc.want == nil) {
			t.Errorf("%s: Reconcile children %#v, want %#v", name, got, tc.want)
		}
		finalize := tc.response.FinalizeResponse()
		if got := wantChildren(t, finalize.GetChildren()); !reflect.DeepEqual(got, tc.want) || (finalize.Children == nil) != (tc.want == nil) {
			t.Errorf("%s: Finalize children %#v, want %#v", name, got, tc.want)
		}
	}
	// Compact bytes, as every SDK sends JSON.
	sent := kplug.OK().WithChild(map[string]any{"kind": "ConfigMap", "data": map[string]any{"é": "<x>"}}).ReconcileResponse()
	if got := string(sent.GetChildren().GetObjects()[0]); got != `{"data":{"é":"<x>"},"kind":"ConfigMap"}` {
		t.Errorf("child bytes %s", got)
	}
}

func TestAChildThatIsNotAnObjectFailsTheAnswer(t *testing.T) {
	for name, child := range map[string]any{
		"an array": []any{1},
		"a string": "ConfigMap",
		"nil":      nil,
		"bytes":    []byte(`{"kind": "ConfigMap"}`), // encoding/json's base64 string
	} {
		r := kplug.OK().WithMessage("done").WithStatus(map[string]any{"a": 1}).WithChild(child)
		if r.Err() == nil || !strings.Contains(r.Err().Error(), "a child must be a JSON object") {
			t.Errorf("%s: Err() = %v", name, r.Err())
		}
		wire := r.ReconcileResponse()
		if wire.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED || !strings.HasPrefix(wire.GetMessage(), "plugin bug: a child must be a JSON object") {
			t.Errorf("%s: %v %q", name, wire.GetOutcome(), wire.GetMessage())
		}
		if wire.Children != nil || wire.Status != nil {
			t.Errorf("%s: a FAILED answer carries children %v or status %s", name, wire.GetChildren(), wire.GetStatus())
		}
	}
	unencodable := kplug.OK().WithChildren(map[string]any{"kind": "ConfigMap"}, map[string]any{"f": func() {}})
	if err := unencodable.Err(); err == nil || !strings.Contains(err.Error(), "a child cannot be encoded as JSON") {
		t.Errorf("a child that cannot be encoded: %v", err)
	}
}

func TestAHooksAnswerCarriesNoChildren(t *testing.T) {
	for name, r := range map[string]*kplug.Response{
		"one child":    kplug.OK().WithChild(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}}),
		"an empty set": kplug.OK().WithChildren(),
	} {
		wire := r.HookResponse()
		want := "plugin bug: a hook's response sets children; only Reconcile and Finalize answers carry children"
		if wire.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED || wire.GetMessage() != want {
			t.Errorf("%s: %v %q", name, wire.GetOutcome(), wire.GetMessage())
		}
	}
}

var parentInfo = kplug.Info{
	Name: "parent", Version: "1.0.0",
	Offers: []kplug.Offer{{
		Base: kplug.GroupKind{Group: "example.com", Kind: "Widget"}, Implementation: "Parent",
		Children: []kplug.GroupVersionKind{kplug.FromAPIVersionAndKind("v1", "ConfigMap"), kplug.FromAPIVersionAndKind("apps/v1", "Deployment")},
	}},
}

// parent desires one ConfigMap per base object and echoes the children
// it observed.
type parent struct{}

func (*parent) Reconcile(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	observed := []any{}
	for _, c := range req.Children {
		observed = append(observed, c.Kind()+"/"+c.Name())
	}
	return kplug.OK().WithStatus(map[string]any{"observed": observed}).WithChild(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": req.Name() + "-settings"},
	}), nil
}

func (*parent) Finalize(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	if req.Child("Deployment", req.Name()) != nil {
		return kplug.Retry(time.Second).WithMessage("draining").WithChildren(), nil
	}
	return kplug.OK(), nil
}

func TestAPluginWithChildKindsOverItsSocket(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	server := kplugtest.StartPlugin(t, dir, parentInfo, &parent{}, kplug.WithHeartbeatInterval(100*time.Millisecond))
	hb := registry.WaitForHeartbeats(t, 1, 5*time.Second)[0].Request
	handshake, ok := registry.Handshake(server.InstanceID())
	if !ok || handshake.Err != nil {
		t.Fatalf("handshake: %v, %v", ok, handshake.Err)
	}
	want := []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE, kplugv1.Capability_CAPABILITY_FINALIZE, kplugv1.Capability_CAPABILITY_CHILDREN}
	if !equalCaps(handshake.Info.GetCapabilities(), want) || !equalCaps(hb.GetCapabilities(), want) {
		t.Errorf("capabilities: GetInfo %v, heartbeat %v, want %v", handshake.Info.GetCapabilities(), hb.GetCapabilities(), want)
	}
	wantOffer := &kplugv1.Offer{
		Base: &kplugv1.GroupKind{Group: "example.com", Kind: "Widget"}, Implementation: "Parent",
		Children: []*kplugv1.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Group: "apps", Version: "v1", Kind: "Deployment"}},
	}
	if !proto.Equal(handshake.Info.GetOffers()[0], wantOffer) || !proto.Equal(hb.GetOffers()[0], wantOffer) {
		t.Errorf("offers: GetInfo %v, heartbeat %v", handshake.Info.GetOffers(), hb.GetOffers())
	}
	if len(hb.GetMutations()) != 0 || len(handshake.Info.GetMutations()) != 0 {
		t.Errorf("mutations declared: %v, %v", hb.GetMutations(), handshake.Info.GetMutations())
	}

	client := kplugtest.Dial(t, server.SocketPath())
	ctx := ctxFor(t, 5*time.Second)
	object := widgetJSON("w")
	r, err := client.Reconcile(ctx, &kplugv1.ReconcileRequest{Implementation: "Parent", Object: object, Children: [][]byte{[]byte(configMap), []byte(deployment)}})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetOutcome() != kplugv1.Outcome_OUTCOME_OK || string(r.GetStatus()) != `{"observed":["ConfigMap/users-settings","Deployment/users"]}` {
		t.Errorf("Reconcile: %v %q %s", r.GetOutcome(), r.GetMessage(), r.GetStatus())
	}
	if got := wantChildren(t, r.GetChildren()); len(got) != 1 || got[0].(map[string]any)["metadata"].(map[string]any)["name"] != "w-settings" {
		t.Errorf("desired children %v", got)
	}
	// An observed child that is not an object: the handler is not called.
	r, err = client.Reconcile(ctx, &kplugv1.ReconcileRequest{Implementation: "Parent", Object: object, Children: [][]byte{[]byte(configMap), []byte(`"x"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED || r.GetMessage() != "kplug: child #1 is not a JSON object" || r.Children != nil {
		t.Errorf("Reconcile with a bad child: %v %q %v", r.GetOutcome(), r.GetMessage(), r.GetChildren())
	}
	// Finalize is sent the children that still exist and may keep some.
	w := `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"}}`
	f, err := client.Finalize(ctx, &kplugv1.FinalizeRequest{Implementation: "Parent", Object: object, Children: [][]byte{[]byte(w)}})
	if err != nil {
		t.Fatal(err)
	}
	if f.GetOutcome() != kplugv1.Outcome_OUTCOME_RETRY || f.Children == nil || len(f.GetChildren().GetObjects()) != 0 {
		t.Errorf("Finalize: %v %q %v", f.GetOutcome(), f.GetMessage(), f.GetChildren())
	}
	// Mutate is not implemented by the SDK yet, and never advertised.
	_, err = client.Mutate(ctx, &kplugv1.MutateRequest{Object: object})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Mutate: %v, want UNIMPLEMENTED", err)
	}
}

func TestAPluginWithoutChildKindsDoesNotAdvertiseChildren(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	server := kplugtest.StartPlugin(t, dir, info, &finalizing{})
	r, err := kplugtest.Dial(t, server.SocketPath()).GetInfo(ctxFor(t, 2*time.Second), &kplugv1.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE, kplugv1.Capability_CAPABILITY_FINALIZE}
	if !equalCaps(r.GetCapabilities(), want) || len(r.GetOffers()[0].GetChildren()) != 0 {
		t.Errorf("capabilities %v, offer %v", r.GetCapabilities(), r.GetOffers()[0])
	}
}
