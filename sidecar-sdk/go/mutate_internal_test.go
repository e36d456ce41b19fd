package kplug

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// The paths the operator refuses in a Mutate patch (operator/src/mutate,
// kplug-conformance's mutate check): the builder must refuse exactly
// those, or a plugin would find out only when its children are refused.
func TestMutationPathsAreTheOnesTheOperatorAccepts(t *testing.T) {
	for _, path := range []string{
		"/status/x", "/metadata/name", "/specx", "spec/x", "",
		"/metadata/labels", "/metadata/annotations",
		"/metadata/labels/kplug.io~1plugin", "/metadata/annotations/kplug.io~1intent-hash",
	} {
		_, err := NoMutation().Add("/spec/a", 1).Add(path, "x").MutateResponse()
		want := fmt.Sprintf("plugin bug: a mutation may only change /spec and single labels and annotations, not kplug.io/ ones; add %q is outside them", path)
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %q", path, err, want)
		}
	}
	r, err := NoMutation().
		Add("/spec/template/spec/containers/-", map[string]any{"name": "backup"}).
		Replace("/spec", map[string]any{"replicas": 2}).
		Add("/metadata/labels/backup", "yes").
		Add("/metadata/annotations/backup.example~1enabled", "true").
		// Only the kplug.io/ prefix is kplug's: another key that merely
		// contains it is the plugin's to set.
		Add("/metadata/labels/app.kplug.io~1x", "1").
		Remove("/metadata/annotations/kplug.iox").
		WithWarning("added a sidecar").
		MutateResponse()
	want := `[{"op":"add","path":"/spec/template/spec/containers/-","value":{"name":"backup"}},` +
		`{"op":"replace","path":"/spec","value":{"replicas":2}},` +
		`{"op":"add","path":"/metadata/labels/backup","value":"yes"},` +
		`{"op":"add","path":"/metadata/annotations/backup.example~1enabled","value":"true"},` +
		`{"op":"add","path":"/metadata/labels/app.kplug.io~1x","value":"1"},` +
		`{"op":"remove","path":"/metadata/annotations/kplug.iox"}]`
	if err != nil || string(r.GetPatch()) != want || len(r.GetWarnings()) != 1 || r.GetWarnings()[0] != "added a sidecar" {
		t.Errorf("got %s %q (%v)\nwant %s", r.GetPatch(), r.GetWarnings(), err, want)
	}
}

func TestAMutationKeepsItsFirstMistakeAndIsBounded(t *testing.T) {
	m := NoMutation().Remove("/metadata/labels").Add("/status/x", 1).Add("/spec/a", make(chan int))
	if err := m.Err(); err == nil || !strings.Contains(err.Error(), `remove "/metadata/labels" is outside them`) {
		t.Errorf("first mistake: %v", err)
	}
	if !m.IsEmpty() {
		t.Error("a refused operation was kept")
	}
	if _, err := NoMutation().Add("/spec/a", make(chan int)).MutateResponse(); err == nil || !strings.HasPrefix(err.Error(), `plugin bug: the value of add "/spec/a" cannot be encoded as JSON`) {
		t.Errorf("a value JSON cannot carry: %v", err)
	}
	if r, err := NoMutation().MutateResponse(); err != nil || r.Patch != nil || len(r.Warnings) != 0 {
		t.Errorf("no change: %v %v", r, err)
	}
	size := len(`[{"op":"add","path":"/spec/blob","value":""}]`) + maxPatchBytes
	if _, err := NoMutation().Add("/spec/blob", strings.Repeat("x", maxPatchBytes)).MutateResponse(); err == nil || err.Error() != fmt.Sprintf("plugin bug: the mutation's JSON Patch is %d bytes; at most %d are accepted", size, maxPatchBytes) {
		t.Errorf("huge: %v", err)
	}
	many := NoMutation()
	for i := range 20 {
		many.WithWarning(fmt.Sprintf("w%d", i))
	}
	if r, _ := many.MutateResponse(); len(r.Warnings) != maxWarnings || r.Warnings[maxWarnings-1] != "and 5 more warnings" {
		t.Errorf("warnings %q", r.Warnings)
	}
}

func TestDecodeMutateCallNamesTheObjectThatIsNotOne(t *testing.T) {
	object := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w-server","namespace":"ns"}}`)
	call, err := DecodeMutateCall(&kplugv1.MutateRequest{Implementation: "Tables", Object: object})
	if err != nil || call.Implementation != "Tables" || call.Object.Name() != "w-server" || call.Live != nil || call.Base != nil {
		t.Fatalf("got %+v (%v)", call, err)
	}
	call, err = DecodeMutateCall(&kplugv1.MutateRequest{Object: object, Live: object, Base: []byte(`{"kind":"Widget","metadata":{"name":"w"}}`)})
	if err != nil || call.Live.Name() != "w-server" || call.Base.Name() != "w" {
		t.Fatalf("got %+v (%v)", call, err)
	}
	for _, c := range []struct {
		in   *kplugv1.MutateRequest
		want string
	}{
		{&kplugv1.MutateRequest{Object: []byte(`[1]`)}, "kplug: the object is not a JSON object"},
		{&kplugv1.MutateRequest{}, "kplug: the object is not valid JSON: "},
		{&kplugv1.MutateRequest{Object: object, Live: []byte(`"x"`)}, "kplug: the live object is not a JSON object"},
		{&kplugv1.MutateRequest{Object: object, Base: []byte(`{`)}, "kplug: the base object is not valid JSON: "},
	} {
		if _, err := DecodeMutateCall(c.in); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.in, err, c.want)
		}
	}
}
