package kplug_test

import (
	"strings"
	"testing"

	"github.com/kplug/kplug/sidecar-sdk/go"
)

const base = `{
	"apiVersion": "myorg.org/v1alpha1",
	"kind": "DatabaseTable",
	"metadata": {"name": "users", "namespace": "shop", "generation": 2, "labels": {"app": "web"}},
	"spec": {"columns": [{"name": "id", "type": "integer"}], "replicas": 3, "ratio": 0.5}
}`

const extension = `{
	"apiVersion": "myorg.org/v1alpha1",
	"kind": "DatabaseTablePostgreSqlExtension",
	"metadata": {"name": "users-pg", "namespace": "shop"},
	"spec": {"partitionBy": "id"}
}`

func mustDecode(t *testing.T, object string, extensions ...string) *kplug.Request {
	t.Helper()
	raw := make([][]byte, len(extensions))
	for i, e := range extensions {
		raw[i] = []byte(e)
	}
	req, err := kplug.DecodeRequest("PostgreSQL", []byte(object), raw...)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestRequestAccessors(t *testing.T) {
	req := mustDecode(t, base, extension, `{"kind": "Other", "metadata": {"name": "o"}}`)
	if req.Implementation != "PostgreSQL" || req.Name() != "users" || req.Namespace() != "shop" || req.Generation() != 2 {
		t.Errorf("got %q %q %q %d", req.Implementation, req.Name(), req.Namespace(), req.Generation())
	}
	if got := req.Object.APIVersion() + " " + req.Object.Kind(); got != "myorg.org/v1alpha1 DatabaseTable" {
		t.Errorf("apiVersion and kind: %q", got)
	}
	if req.String() != "DatabaseTable shop/users" {
		t.Errorf("String() = %q", req.String())
	}
	spec := req.Spec()
	if spec["replicas"] != int64(3) || spec["ratio"] != 0.5 {
		t.Errorf("numbers: replicas %#v, ratio %#v (want int64 and float64, as Kubernetes' unstructured objects)", spec["replicas"], spec["ratio"])
	}
	if v, ok := req.Object.Get("metadata", "labels", "app"); !ok || v != "web" {
		t.Errorf("Get(metadata, labels, app) = %v, %v", v, ok)
	}
	if _, ok := req.Object.Get("metadata", "labels", "app", "deeper"); ok {
		t.Error("Get through a string found something")
	}
	if req.Object.BeingDeleted() {
		t.Error("BeingDeleted without a deletionTimestamp")
	}
	if len(req.Extensions) != 2 || req.Extension("DatabaseTablePostgreSqlExtension").Name() != "users-pg" {
		t.Fatalf("extensions: %v", req.Extensions)
	}
	if req.Extension("Missing") != nil || len(req.ExtensionsOf("Other")) != 1 || len(req.ExtensionsOf("Missing")) != 0 {
		t.Error("Extension / ExtensionsOf")
	}
	ref := req.Extensions[0].Ref()
	if ref != (kplug.ObjectRef{APIVersion: "myorg.org/v1alpha1", Kind: "DatabaseTablePostgreSqlExtension", Namespace: "shop", Name: "users-pg"}) {
		t.Errorf("Ref() = %#v", ref)
	}
	if string(req.Extensions[0].JSON()) != extension {
		t.Error("JSON() is not the bytes the operator sent")
	}
}

func TestMissingFieldsAreZeroValues(t *testing.T) {
	req := mustDecode(t, `{"metadata": {"generation": 1.5, "name": 7, "deletionTimestamp": "2024-01-01T00:00:00Z"}, "spec": [1]}`)
	if req.Name() != "" || req.Namespace() != "" || req.Generation() != 0 || req.Object.Kind() != "" {
		t.Errorf("got %q %q %d", req.Name(), req.Namespace(), req.Generation())
	}
	if req.Spec() != nil {
		t.Errorf("a spec that is not an object: %#v, want nil", req.Spec())
	}
	if !req.Object.BeingDeleted() {
		t.Error("deletionTimestamp is set")
	}
	if req.Object.Ref().String() != " " {
		t.Errorf("Ref of nothing: %q", req.Object.Ref())
	}
}

func TestDecodeSpecIntoYourOwnType(t *testing.T) {
	type column struct{ Name, Type string }
	var spec struct {
		Columns  []column `json:"columns"`
		Replicas int      `json:"replicas"`
	}
	req := mustDecode(t, base)
	if err := req.DecodeSpec(&spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Columns) != 1 || spec.Columns[0] != (column{"id", "integer"}) || spec.Replicas != 3 {
		t.Errorf("spec %+v", spec)
	}
	var wrong struct {
		Replicas string `json:"replicas"`
	}
	err := req.DecodeSpec(&wrong)
	if err == nil || !strings.HasPrefix(err.Error(), "kplug: spec of DatabaseTable shop/users does not fit *struct") {
		t.Errorf("DecodeSpec into the wrong type: %v", err)
	}
	withoutSpec := mustDecode(t, `{"kind": "X"}`)
	spec.Replicas = 9
	if err := withoutSpec.DecodeSpec(&spec); err != nil || spec.Replicas != 9 {
		t.Errorf("a missing spec leaves v alone: %v, %+v", err, spec)
	}
	var whole struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := req.Object.Decode(&whole); err != nil || whole.Metadata.Name != "users" {
		t.Errorf("Decode: %v, %+v", err, whole)
	}
}

func TestDecodeErrorsAreTheProtocolsMessages(t *testing.T) {
	for _, tc := range []struct {
		object     string
		extensions []string
		want       string
	}{
		{`{"kind": `, nil, "kplug: the base object is not valid JSON: "},
		{`{oops`, nil, "kplug: the base object is not valid JSON: invalid character 'o'"},
		{`[1, 2, 3]`, nil, "kplug: the base object is not a JSON object"},
		{`"text"`, nil, "kplug: the base object is not a JSON object"},
		{`null`, nil, "kplug: the base object is not a JSON object"},
		{`{"a": NaN}`, nil, "kplug: the base object is not valid JSON: "},
		{`{"a": Infinity}`, nil, "kplug: the base object is not valid JSON: "},
		{"{\"a\": \"\xc3\x28\"}", nil, "kplug: the base object is not valid JSON: invalid UTF-8"},
		{`{}`, []string{`{}`, `"just a string"`}, "kplug: extension #1 is not a JSON object"},
		{`{}`, []string{`{`}, "kplug: extension #0 is not valid JSON: "},
	} {
		raw := make([][]byte, len(tc.extensions))
		for i, e := range tc.extensions {
			raw[i] = []byte(e)
		}
		_, err := kplug.DecodeRequest("X", []byte(tc.object), raw...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("DecodeRequest(%q, %q) = %v, want an error starting with %q", tc.object, tc.extensions, err, tc.want)
		}
	}
}

func TestDecodeObject(t *testing.T) {
	o, err := kplug.DecodeObject([]byte(extension))
	if err != nil || o.Kind() != "DatabaseTablePostgreSqlExtension" || o.Map()["spec"].(map[string]any)["partitionBy"] != "id" {
		t.Fatalf("DecodeObject: %v, %v", o, err)
	}
	if _, err := kplug.DecodeObject([]byte(`[]`)); err == nil || err.Error() != "not a JSON object" {
		t.Errorf("DecodeObject([]) = %v", err)
	}
	if _, err := kplug.DecodeObject(nil); err == nil || !strings.HasPrefix(err.Error(), "not valid JSON") {
		t.Errorf("DecodeObject(nil) = %v", err)
	}
}
