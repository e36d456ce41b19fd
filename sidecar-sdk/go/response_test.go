package kplug_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		r         *kplug.Response
		outcome   kplugv1.Outcome
		message   string
		retryNano int64 // -1: unset
	}{
		{kplug.OK(), kplugv1.Outcome_OUTCOME_OK, "", -1},
		{kplug.OK().WithMessage("done"), kplugv1.Outcome_OUTCOME_OK, "done", -1},
		{kplug.Retry(30 * time.Second).WithMessage("waiting"), kplugv1.Outcome_OUTCOME_RETRY, "waiting", int64(30 * time.Second)},
		{kplug.Retry(1500 * time.Millisecond), kplugv1.Outcome_OUTCOME_RETRY, "", int64(1500 * time.Millisecond)},
		{kplug.Retry(0), kplugv1.Outcome_OUTCOME_RETRY, "", 0},
		{kplug.Retry(kplug.DefaultRetryAfter), kplugv1.Outcome_OUTCOME_RETRY, "", int64(10 * time.Second)},
		{kplug.Failed("database refused the connection"), kplugv1.Outcome_OUTCOME_FAILED, "database refused the connection", -1},
	} {
		wire := tc.r.ReconcileResponse()
		if wire.GetOutcome() != tc.outcome || wire.GetMessage() != tc.message {
			t.Errorf("%v: got %v %q", tc.r.Outcome(), wire.GetOutcome(), wire.GetMessage())
		}
		if tc.retryNano < 0 && wire.RetryAfter != nil || tc.retryNano >= 0 && (wire.RetryAfter == nil || wire.GetRetryAfter().AsDuration().Nanoseconds() != tc.retryNano) {
			t.Errorf("%v: retry_after %v, want %dns", tc.r.Outcome(), wire.GetRetryAfter(), tc.retryNano)
		}
		if tc.r.Err() != nil {
			t.Errorf("%v: unexpected problem %v", tc.r.Outcome(), tc.r.Err())
		}
	}
	if kplug.OutcomeOK.String() != "OK" || kplug.OutcomeRetry.String() != "RETRY" || kplug.OutcomeFailed.String() != "FAILED" {
		t.Error("Outcome.String")
	}
}

func TestAFullResponse(t *testing.T) {
	req := mustDecode(t, base, extension)
	ext := req.Extension("DatabaseTablePostgreSqlExtension")
	wire := kplug.Retry(3*time.Second).
		WithMessage("waiting").
		WithStatus(map[string]any{"phase": "Creating"}).
		WithStatus(map[string]any{"columns": 1}). // replaces, as in the Rust SDK
		WithExtensionStatus(ext, struct {
			Partitions int `json:"partitions"`
		}{4}).
		WithCondition("TableReady", kplug.ConditionUnknown, "Pending", "soon").
		WithCondition("Partitioned", kplug.ConditionTrue, "Done", "").
		WithEvent("Creating", "creating table users").
		WithWarning("Slow", "slow server").
		WithEventOn(ext, "Partitioned", "4 partitions").
		WithWarningOn(req.Object, "Big", "many columns").
		ReconcileResponse()
	want := &kplugv1.ReconcileResponse{}
	if err := protojson.Unmarshal([]byte(`{
		"outcome": "OUTCOME_RETRY", "message": "waiting", "retryAfter": "3s",
		"status": "`+b64(`{"columns":1}`)+`",
		"extensionStatuses": [{"target": {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTablePostgreSqlExtension", "namespace": "shop", "name": "users-pg"}, "status": "`+b64(`{"partitions":4}`)+`"}],
		"conditions": [
			{"type": "TableReady", "status": "CONDITION_STATUS_UNKNOWN", "reason": "Pending", "message": "soon"},
			{"type": "Partitioned", "status": "CONDITION_STATUS_TRUE", "reason": "Done"}
		],
		"events": [
			{"type": "EVENT_TYPE_NORMAL", "reason": "Creating", "message": "creating table users"},
			{"type": "EVENT_TYPE_WARNING", "reason": "Slow", "message": "slow server"},
			{"type": "EVENT_TYPE_NORMAL", "reason": "Partitioned", "message": "4 partitions", "regarding": {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTablePostgreSqlExtension", "namespace": "shop", "name": "users-pg"}},
			{"type": "EVENT_TYPE_WARNING", "reason": "Big", "message": "many columns", "regarding": {"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable", "namespace": "shop", "name": "users"}}
		]
	}`), want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(wire, want) {
		t.Errorf("got\n%v\nwant\n%v", protojson.Format(wire), protojson.Format(want))
	}
}

func b64(s string) string {
	b, _ := json.Marshal([]byte(s))
	return strings.Trim(string(b), `"`)
}

func TestBuilderMistakesBecomeFailedWithNothingElse(t *testing.T) {
	req := mustDecode(t, base, extension)
	for _, tc := range []struct {
		name string
		r    *kplug.Response
		want string
	}{
		{"reserved status key", kplug.OK().WithStatus(map[string]any{"observedGeneration": 5}),
			`plugin bug: status: key "observedGeneration" is reserved for the operator`},
		{"reserved key in an extension status", kplug.OK().WithExtensionStatus(req.Extensions[0], map[string]any{"implementation": "x"}),
			`plugin bug: status of DatabaseTablePostgreSqlExtension users-pg: key "implementation" is reserved for the operator`},
		{"reserved condition type", kplug.OK().WithCondition("Ready", kplug.ConditionTrue, "Done", ""),
			`plugin bug: condition type "Ready" is reserved for the operator`},
		{"empty condition type", kplug.OK().WithCondition("", kplug.ConditionTrue, "Done", ""),
			`plugin bug: condition type is empty`},
		{"status not an object", kplug.OK().WithStatus([]int{1, 2}),
			`plugin bug: status must be a JSON object`},
		{"nil extension", kplug.OK().WithExtensionStatus(req.Extension("Missing"), map[string]any{"a": 1}),
			`plugin bug: extension status target is nil`},
		{"nil event target", kplug.OK().WithWarningOn(nil, "R", "m"),
			`plugin bug: event "R" is about a nil object`},
		{"negative retry", kplug.Retry(-time.Second), `plugin bug: retry delay -1s is negative`},
	} {
		// Everything else the response carried is dropped: a half-valid
		// response would write a status the plugin did not mean.
		r := tc.r.WithMessage("ignored").WithEvent("Kept", "not kept").WithCondition("Fine", kplug.ConditionTrue, "R", "")
		if r.Err() == nil {
			t.Errorf("%s: no Err()", tc.name)
		}
		wire := r.ReconcileResponse()
		want := &kplugv1.ReconcileResponse{Outcome: kplugv1.Outcome_OUTCOME_FAILED, Message: wire.GetMessage()}
		if !strings.HasPrefix(wire.GetMessage(), tc.want) || !proto.Equal(wire, want) {
			t.Errorf("%s: got %v, want FAILED %q... and nothing else", tc.name, protojson.Format(wire), tc.want)
		}
		fin := r.FinalizeResponse()
		if fin.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED || fin.GetMessage() != wire.GetMessage() || len(fin.GetEvents()) != 0 {
			t.Errorf("%s: Finalize got %v", tc.name, protojson.Format(fin))
		}
	}
	// The first mistake is the one reported.
	r := kplug.OK().WithCondition("Reconciled", kplug.ConditionTrue, "", "").WithStatus(map[string]any{"conditions": 1})
	if !strings.Contains(r.Err().Error(), `condition type "Reconciled"`) {
		t.Errorf("first mistake: %v", r.Err())
	}
}

func TestFinalizeCarriesOnlyOutcomeMessageDelayAndEvents(t *testing.T) {
	req := mustDecode(t, base)
	wire := kplug.Retry(5*time.Second).WithMessage("still dropping").
		WithStatus(map[string]any{"phase": "Dropping"}).
		WithCondition("Dropped", kplug.ConditionFalse, "InProgress", "").
		WithEventOn(req.Object, "Dropping", "dropping table users").
		FinalizeResponse()
	want := &kplugv1.FinalizeResponse{
		Outcome: kplugv1.Outcome_OUTCOME_RETRY, Message: "still dropping", RetryAfter: wire.GetRetryAfter(),
		Events: []*kplugv1.Event{{Type: kplugv1.EventType_EVENT_TYPE_NORMAL, Reason: "Dropping", Message: "dropping table users",
			Regarding: &kplugv1.ObjectRef{ApiVersion: "myorg.org/v1alpha1", Kind: "DatabaseTable", Namespace: "shop", Name: "users"}}},
	}
	if wire.GetRetryAfter().AsDuration() != 5*time.Second || !proto.Equal(wire, want) {
		t.Errorf("got %v", protojson.Format(wire))
	}
}

func TestStatusBytesAreCompactUTF8(t *testing.T) {
	status := kplug.OK().WithStatus(map[string]any{"s": "<é 世界 🚀 \u2028>", "n": 1.5}).ReconcileResponse().GetStatus()
	if want := `{"n":1.5,"s":"<é 世界 🚀 ` + "\u2028" + `>"}`; string(status) != want {
		t.Errorf("status %s, want %s", status, want)
	}
}
