package kplug

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// Object is a Kubernetes object (the base object or an extension) as the
// operator sent it: JSON, as the API server serves it.
//
// [Object.Map] is the whole object decoded the way Kubernetes' unstructured
// objects are: JSON objects as map[string]any, arrays as []any, integers as
// int64, other numbers as float64. The accessors cover what plugins use
// most; [Object.DecodeSpec] and [Object.Decode] decode into your own types.
type Object struct {
	raw   []byte
	value map[string]any
}

// ObjectRef points at one Kubernetes object. Namespace is empty for
// cluster-scoped objects.
type ObjectRef struct {
	// APIVersion is "group/version" ("v1" for the core group).
	APIVersion string
	// Kind is the kind in CamelCase.
	Kind string
	// Namespace is empty for cluster-scoped objects.
	Namespace string
	// Name is the object's name.
	Name string
}

// String is "Kind namespace/name" (or "Kind name" when cluster-scoped).
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

func (r ObjectRef) proto() *kplugv1.ObjectRef {
	return &kplugv1.ObjectRef{ApiVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// DecodeObject decodes one Kubernetes object from JSON. It fails unless
// data is valid UTF-8 JSON whose top level is an object. Plugins get their
// objects decoded already (in [Request]); this is for tests and tools.
func DecodeObject(data []byte) (*Object, error) {
	value, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	m, ok := value.(map[string]any)
	if !ok {
		return nil, errNotAnObject
	}
	return &Object{raw: bytes.Clone(data), value: m}, nil
}

var errNotAnObject = errors.New("not a JSON object")

// decodeObject is DecodeObject with the protocol's messages ("kplug: the
// base object is not valid JSON: ...", shared by every SDK).
func decodeObject(data []byte, what string) (*Object, error) {
	o, err := DecodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("kplug: %s is %w", what, err)
	}
	return o, nil
}

// decodeJSON decodes one JSON value, refusing invalid UTF-8 and trailing
// data, with numbers as int64 (integers that fit) or float64.
func decodeJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("unexpected end of JSON input")
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("invalid data after the top-level value at offset %d", dec.InputOffset())
	}
	if err := checkSurrogates(data); err != nil {
		return nil, err
	}
	return convertNumbers(value)
}

// checkSurrogates refuses \u escapes of unpaired UTF-16 surrogates in the
// strings of valid JSON: they encode no character (encoding/json would
// turn them into U+FFFD; the Rust SDK refuses them too).
func checkSurrogates(data []byte) error {
	if !bytes.Contains(data, []byte(`\u`)) {
		return nil
	}
	hex := func(i int) (rune, bool) { // the code unit of the \uXXXX escape at data[i]
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			r, ok := hex(i)
			switch {
			case !ok:
				i++ // a two-character escape
			case r >= 0xd800 && r < 0xdc00:
				if low, ok := hex(i + 6); !ok || low < 0xdc00 || low >= 0xe000 {
					return fmt.Errorf("lone leading surrogate %s in a string at offset %d", data[i:i+6], i)
				}
				i += 11
			case r >= 0xdc00 && r < 0xe000:
				return fmt.Errorf("lone trailing surrogate %s in a string at offset %d", data[i:i+6], i)
			default:
				i += 5
			}
		}
	}
	return nil
}

// convertNumbers replaces every json.Number with an int64 (an integer that
// fits), a uint64 (an integer that fits only there) or a float64.
func convertNumbers(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s is out of range", s)
		}
		return f, nil
	case map[string]any:
		for k, e := range v {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
		return v, nil
	case []any:
		for i, e := range v {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			v[i] = c
		}
		return v, nil
	default:
		return v, nil
	}
}

// Map is the whole object. It is shared, not copied: read it, do not
// modify it.
func (o *Object) Map() map[string]any { return o.value }

// JSON is the object exactly as the operator sent it.
func (o *Object) JSON() []byte { return o.raw }

// Get returns the value at a path of keys, e.g. Get("metadata", "labels",
// "app"), and whether it is there.
func (o *Object) Get(path ...string) (any, bool) {
	var cur any = o.value
	for _, key := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func (o *Object) str(path ...string) string {
	v, _ := o.Get(path...)
	s, _ := v.(string)
	return s
}

// APIVersion is apiVersion, e.g. "myorg.org/v1alpha1".
func (o *Object) APIVersion() string { return o.str("apiVersion") }

// Kind is kind, e.g. "DatabaseTable".
func (o *Object) Kind() string { return o.str("kind") }

// Name is metadata.name.
func (o *Object) Name() string { return o.str("metadata", "name") }

// Namespace is metadata.namespace; empty for cluster-scoped objects.
func (o *Object) Namespace() string { return o.str("metadata", "namespace") }

// Generation is metadata.generation, 0 when absent.
func (o *Object) Generation() int64 {
	v, _ := o.Get("metadata", "generation")
	g, _ := v.(int64)
	return g
}

// BeingDeleted tells whether metadata.deletionTimestamp is set (always true
// in Finalize).
func (o *Object) BeingDeleted() bool {
	v, ok := o.Get("metadata", "deletionTimestamp")
	return ok && v != nil
}

// Spec is the object's spec; nil when absent or not a JSON object.
func (o *Object) Spec() map[string]any {
	spec, _ := o.value["spec"].(map[string]any)
	return spec
}

// DecodeSpec decodes the object's spec into v (a pointer to your own type),
// with encoding/json's rules. A missing spec decodes as null (v is left
// untouched).
func (o *Object) DecodeSpec(v any) error {
	var parts struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(o.raw, &parts); err != nil {
		return fmt.Errorf("kplug: spec of %s: %w", o.Ref(), err)
	}
	if parts.Spec == nil {
		parts.Spec = json.RawMessage("null")
	}
	if err := json.Unmarshal(parts.Spec, v); err != nil {
		return fmt.Errorf("kplug: spec of %s does not fit %T: %w", o.Ref(), v, err)
	}
	return nil
}

// Decode decodes the whole object into v (a pointer to your own type, e.g.
// a struct with Metadata, Spec and Status fields), with encoding/json's
// rules.
func (o *Object) Decode(v any) error {
	if err := json.Unmarshal(o.raw, v); err != nil {
		return fmt.Errorf("kplug: %s does not fit %T: %w", o.Ref(), v, err)
	}
	return nil
}

// Ref is a reference to this object, e.g. for an event's target.
func (o *Object) Ref() ObjectRef {
	return ObjectRef{APIVersion: o.APIVersion(), Kind: o.Kind(), Namespace: o.Namespace(), Name: o.Name()}
}
