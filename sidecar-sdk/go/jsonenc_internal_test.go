package kplug

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestMarshalIsCompactUTF8WithoutHTMLOrLineSeparatorEscapes(t *testing.T) {
	got, err := marshal(map[string]any{"s": "a<b>&c \u2028\u2029 é 世界 🚀 \"q\" \\ \t\n", "n": []any{int64(1), 2.5, nil, true}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"n":[1,2.5,null,true],"s":"a<b>&c ` + "\u2028\u2029" + ` é 世界 🚀 \"q\" \\ \t\n"}`
	if string(got) != want {
		t.Errorf("marshal =\n%s\nwant\n%s", got, want)
	}
}

func TestUnescapeLineSeparatorsOnlyTouchesRealEscapesInStrings(t *testing.T) {
	for in, want := range map[string]string{
		`"\u2028"`:          "\"\u2028\"",
		`"\u2029x"`:         "\"\u2029x\"",
		`"\\u2028"`:         `"\\u2028"`, // an escaped backslash, then text
		`"\\\u2028"`:        "\"\\\\\u2028\"",
		`"\u2027\u202a"`:    `"\u2027\u202a"`,
		`{"k\u2028":"\""}`:  "{\"k\u2028\":\"\\\"\"}",
		`["\"","\u2029"]`:   "[\"\\\"\",\"\u2029\"]",
		`"no escapes here"`: `"no escapes here"`,
	} {
		if got := string(unescapeLineSeparators([]byte(in))); got != want {
			t.Errorf("unescapeLineSeparators(%s) = %s, want %s", in, got, want)
		}
		var a, b any
		if err := json.Unmarshal([]byte(in), &a); err != nil {
			t.Fatalf("bad test input %s: %v", in, err)
		}
		if err := json.Unmarshal([]byte(want), &b); err != nil || !equalJSON(a, b) {
			t.Errorf("%s and %s decode differently", in, want)
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestEncodeStatusAcceptsAnyJSONObject(t *testing.T) {
	type status struct {
		Phase   string `json:"phase"`
		Columns int    `json:"columns,omitempty"`
	}
	for _, tc := range []struct {
		in   any
		want string
	}{
		{map[string]any{"b": 1, "a": "x"}, `{"a":"x","b":1}`},
		{status{Phase: "Ready"}, `{"phase":"Ready"}`},
		{&status{Phase: "Ready", Columns: 2}, `{"columns":2,"phase":"Ready"}`},
		{json.RawMessage(` { "a" : [ 1 , 2 ] , "big": 12345678901234567890, "f": 1.0 } `), `{"a":[1,2],"big":12345678901234567890,"f":1}`},
		{map[string]any{}, `{}`},
	} {
		got, err := encodeStatus(tc.in, "status")
		if err != nil {
			t.Errorf("encodeStatus(%#v): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("encodeStatus(%#v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAPlainMapEncodesAsItsRoundTripWould(t *testing.T) {
	plain := map[string]any{
		"s": "a<b> \u2028 é \"q\"", "i": 3, "i64": int64(-7), "u": uint64(math.MaxUint64),
		"f": 2.5, "whole": 3.0, "big": 1e21, "small": float32(0.1), "t": true, "null": nil,
		"list":   []any{1, "x", []any{}, map[string]any{}},
		"nested": map[string]any{"z": 1, "a": map[string]any{"k": "v"}},
	}
	if !plainJSON(plain) {
		t.Fatal("a map of plain values is not seen as plain")
	}
	encoded, object, err := encodeObject(plain, "status")
	if err != nil {
		t.Fatal(err)
	}
	// The round trip, taken by a value that is not a plain map.
	raw, err := marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip, _, err := encodeObject(json.RawMessage(raw), "status")
	if err != nil {
		t.Fatal(err)
	}
	if string(encoded) != string(roundTrip) {
		t.Errorf("plain map encoded as\n%s\nthe round trip gives\n%s", encoded, roundTrip)
	}
	if object["s"] != plain["s"] {
		t.Errorf("the object returned is not the map given: %v", object)
	}
	for _, v := range []any{
		map[string]any{"n": json.Number("1.0")},
		map[string]any{"r": json.RawMessage(`{"a":1}`)},
		map[string]any{"list": []string{"a"}},
		map[string]any{"deep": []any{struct{ A int }{1}}},
	} {
		if plainJSON(v) {
			t.Errorf("%#v is seen as plain: it must take the round trip", v)
		}
	}
}

func TestEncodeStatusRefusesWhatTheOperatorRefuses(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{map[string]any{"phase": "x", "observedGeneration": 5}, `status: key "observedGeneration" is reserved for the operator (it owns conditions, implementation, observedGeneration and plugin)`},
		{map[string]any{"conditions": []any{}}, `status: key "conditions" is reserved for the operator`},
		// Several reserved keys: the first in the protocol's order is named, as in Rust.
		{map[string]any{"conditions": 1, "implementation": "x"}, `status: key "implementation" is reserved`},
		{[]int{1, 2}, "status must be a JSON object (e.g. a map[string]any or a struct), got a JSON array"},
		{nil, "status must be a JSON object (e.g. a map[string]any or a struct), got null"},
		{map[string]any(nil), "got null"},
		{"text", "got a JSON string"},
		{42, "got a JSON number"},
		{map[string]any{"x": math.NaN()}, "status cannot be encoded as JSON: json: unsupported value: NaN"},
		{map[string]any{"x": make(chan int)}, "status cannot be encoded as JSON"},
	} {
		_, err := encodeStatus(tc.in, "status")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("encodeStatus(%#v) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	if _, err := encodeStatus(map[string]any{"nested": map[string]any{"conditions": 1}}, "status"); err != nil {
		t.Errorf("only top-level keys are reserved: %v", err)
	}
}

func TestDecodeJSONNumbersAndRefusals(t *testing.T) {
	v, err := decodeJSON([]byte(`{"i": 7, "neg": -3, "f": 2.5, "e": 1e3, "u": 18446744073709551615, "huge": 1e300, "one": 1.0}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	for key, want := range map[string]any{"i": int64(7), "neg": int64(-3), "f": 2.5, "e": 1000.0, "u": uint64(math.MaxUint64), "huge": 1e300, "one": 1.0} {
		if m[key] != want {
			t.Errorf("%s = %#v, want %#v", key, m[key], want)
		}
	}
	for in, want := range map[string]string{
		`{"a": NaN}`:        "invalid character 'N'",
		`{"a": Infinity}`:   "invalid character 'I'",
		`{"a": -Infinity}`:  "invalid character 'I'",
		`{"a": 1e400}`:      "number 1e400 is out of range",
		"{\"a\": \"\xff\"}": "invalid UTF-8",
		`{"a": 1} {}`:       "invalid data after the top-level value",
		`{"a": 1} x`:        "invalid data after the top-level value",
		``:                  "unexpected end of JSON input",
		`{"a": `:            "unexpected EOF",
	} {
		if _, err := decodeJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decodeJSON(%q) = %v, want an error containing %q", in, err, want)
		}
	}
	for in, want := range map[string]string{
		`{"a": "\ud800"}`:       "lone leading surrogate \\ud800 in a string at offset 7",
		`{"a": "\ud800\u0041"}`: "lone leading surrogate",
		`{"a": "x\udc00"}`:      "lone trailing surrogate \\udc00",
		`{"\uDBFF": 1}`:         "lone leading surrogate",
		`["\\", "\udfff"]`:      "lone trailing surrogate",
	} {
		if _, err := decodeJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decodeJSON(%s) = %v, want an error containing %q", in, err, want)
		}
	}
	for _, in := range []string{`{"a": "\ud83d\ude80"}`, `{"a": "\\ud800"}`, `{"a": "\\\\ud800 \u00e9 \n"}`, `{"\ud83d\ude80": "\uD83D\uDE80"}`} {
		if _, err := decodeJSON([]byte(in)); err != nil {
			t.Errorf("decodeJSON(%s): %v", in, err)
		}
	}
	v, _ = decodeJSON([]byte(`{"a": "\ud83d\ude80"}`))
	if v.(map[string]any)["a"] != "🚀" {
		t.Errorf("a surrogate pair decodes to %q", v.(map[string]any)["a"])
	}
	if _, err := decodeJSON([]byte(" {\"a\": 1}\n\t ")); err != nil {
		t.Errorf("whitespace around the value is JSON: %v", err)
	}
}

func TestStartupErrorsWrapTheirKind(t *testing.T) {
	cause := errors.New("permission denied")
	err := error(&startupError{kind: ErrSocket, message: "plugin x: cannot bind", cause: cause})
	if !errors.Is(err, ErrSocket) || !errors.Is(err, cause) || errors.Is(err, ErrSocketInUse) {
		t.Errorf("errors.Is does not match the kind and cause of %v", err)
	}
	if err.Error() != "plugin x: cannot bind" {
		t.Errorf("message %q", err)
	}
}
