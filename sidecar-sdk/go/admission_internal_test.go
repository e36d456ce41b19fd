package kplug

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidationIsBoundedLikeEverySDK(t *testing.T) {
	v := Allowed()
	for i := range 100 {
		v.WithError(fmt.Sprintf("spec.x[%d]", i), i, "bad")
	}
	for i := range 20 {
		v.WithWarning(fmt.Sprintf("w%d %s", i, strings.Repeat("x", 300)))
	}
	v.WithErrorAt("spec.m", strings.Repeat("y", 2000))
	r := v.ValidateResponse()
	if len(r.Errors) != maxFieldErrors || r.Errors[maxFieldErrors-1].Message != "and 38 more errors" {
		t.Errorf("%d errors, last %v", len(r.Errors), r.Errors[len(r.Errors)-1])
	}
	if len(r.Warnings) != maxWarnings || r.Warnings[maxWarnings-1] != "and 5 more warnings" {
		t.Errorf("warnings %q", r.Warnings)
	}
	if n := utf8.RuneCountInString(r.Warnings[0]); n != maxWarningChars || !strings.HasSuffix(r.Warnings[0], "…") {
		t.Errorf("first warning has %d characters: %q", n, r.Warnings[0])
	}
	if v.IsAllowed() || !Allowed().WithWarning("fine").IsAllowed() {
		t.Error("IsAllowed")
	}
	if got := Allowed().WithErrorAt("a", strings.Repeat("y", 2000)).ValidateResponse().Errors[0].Message; utf8.RuneCountInString(got) != maxMessageChars {
		t.Errorf("message not cut: %d", utf8.RuneCountInString(got))
	}
	if got := Allowed().WithError("a", []any{"a", 1, nil}, "m").Errors()[0].Value; got != `["a",1,null]` {
		t.Errorf("value %s", got)
	}
	// A value JSON cannot carry is sent as no value, as the Rust SDK does.
	if got := Allowed().WithError("a", make(chan int), "m").Errors()[0].Value; got != "" {
		t.Errorf("value %s", got)
	}
}

func TestDefaultsOutsideTheAllowedPathsAreAPluginBug(t *testing.T) {
	for _, path := range []string{"/status/x", "/metadata/name", "/specx", "spec/x", ""} {
		d := NoDefaults().Add("/spec/a", 1).Add(path, 2)
		_, err := d.DefaultResponse()
		if err == nil || !strings.HasPrefix(err.Error(), "plugin bug: a default may only change /spec") || !strings.Contains(err.Error(), fmt.Sprintf("%q", path)) {
			t.Errorf("%q: %v", path, err)
		}
	}
	r, err := NoDefaults().Add("/spec", map[string]any{"a": 1}).Replace("/metadata/annotations/a~1b", "c").Remove("/metadata/labels/old").DefaultResponse()
	if err != nil || string(r.Patch) != `[{"op":"add","path":"/spec","value":{"a":1}},{"op":"replace","path":"/metadata/annotations/a~1b","value":"c"},{"op":"remove","path":"/metadata/labels/old"}]` {
		t.Errorf("patch %s (%v)", r.GetPatch(), err)
	}
	if r, err := NoDefaults().DefaultResponse(); err != nil || len(r.Patch) != 0 {
		t.Errorf("empty: %v %v", r, err)
	}
	if _, err := NoDefaults().Add("/spec/blob", strings.Repeat("x", maxPatchBytes)).DefaultResponse(); err == nil || !strings.Contains(err.Error(), "at most 262144") {
		t.Errorf("huge: %v", err)
	}
}
