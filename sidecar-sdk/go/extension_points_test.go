package kplug_test

// Admission (Validate, Default), hooks and call policies over a real
// socket: capabilities from the interfaces a plugin implements, the same
// declarations in GetInfo and heartbeats, checked at start-up as the
// operator checks them, and every answer, error and bad input.

import (
	"context"
	"encoding/json"
	"errors"
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

var widgetKind = kplug.GroupKind{Group: "example.com", Kind: "Widget"}

var tablesInfo = kplug.Info{
	Name: "tables", Version: "1.0.0",
	Offers: []kplug.Offer{{Base: widgetKind, Implementation: "Tables"}},
	Hooks: []kplug.Hook{
		{Name: "audit", Base: widgetKind, Phase: kplug.PhaseBeforeReconcile, Behaviour: kplug.BehaviourSyncEnforce, Order: -1},
		{Name: "notify", Base: kplug.GroupKind{Kind: "ConfigMap"}, Phase: kplug.PhaseAfterFinalize, Behaviour: kplug.BehaviourAsync},
	},
	CallPolicies: []kplug.CallPolicy{
		{Call: kplug.CallValidate, Deadline: 2 * time.Second, FailurePolicy: kplug.FailurePolicyIgnore},
		{Call: kplug.CallHook, Deadline: 250 * time.Millisecond},
		{Call: kplug.CallReconcile},
	},
}

// tables refuses columns that are not text, defaults the engine and runs
// hooks; an object named "broken" makes every handler fail, "panicky"
// panic.
type tables struct{ echo }

func (*tables) Validate(_ context.Context, req *kplug.AdmissionRequest) (*kplug.Validation, error) {
	switch req.Name() {
	case "broken":
		return nil, errors.New("the type catalogue is unreachable")
	case "panicky":
		panic("validate panicked on purpose")
	}
	verdict := kplug.Allowed()
	columns, _ := req.Spec()["columns"].([]any)
	for i, c := range columns {
		if c != "text" {
			verdict.WithError("spec.columns["+string(rune('0'+i))+"]", c, "only text")
		}
	}
	if req.Operation == kplug.OperationUpdate && req.OldObject != nil {
		verdict.WithWarning("was " + req.OldObject.Name())
	}
	return verdict, nil
}

func (*tables) Default(_ context.Context, req *kplug.AdmissionRequest) (*kplug.Defaults, error) {
	switch req.Name() {
	case "broken":
		return nil, errors.New("defaults unavailable")
	case "sneaky":
		return kplug.NoDefaults().Add("/status/engine", "InnoDB"), nil
	}
	return kplug.NoDefaults().Add("/spec/engine", "InnoDB").WithWarning("engine defaulted"), nil
}

func (*tables) Hook(_ context.Context, call *kplug.HookCall) (*kplug.Response, error) {
	switch call.Request.Name() {
	case "broken":
		return nil, errors.New("backup disk full")
	case "conditions":
		return kplug.OK().WithCondition("BackedUp", kplug.ConditionTrue, "Done", ""), nil
	}
	return kplug.OK().WithMessage("done").
		WithStatus(map[string]any{"implementation": call.Request.Implementation, "phase": call.Phase.String()}).
		WithEvent("Hooked", "after "+call.Outcome.String()+": "+call.Message), nil
}

func widgetJSON(name string) []byte {
	return mustJSON(map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"spec":     map[string]any{"columns": []any{"text", "värchar"}},
	})
}

func TestCapabilitiesFollowTheImplementedInterfaces(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	plain := kplugtest.StartPlugin(t, dir, info, &echo{})
	full := kplugtest.StartPlugin(t, dir, tablesInfo, &tables{})
	for server, want := range map[*kplug.Server][]kplugv1.Capability{
		plain: {kplugv1.Capability_CAPABILITY_RECONCILE},
		full: {kplugv1.Capability_CAPABILITY_RECONCILE, kplugv1.Capability_CAPABILITY_VALIDATE,
			kplugv1.Capability_CAPABILITY_DEFAULT, kplugv1.Capability_CAPABILITY_HOOKS},
	} {
		r, err := kplugtest.Dial(t, server.SocketPath()).GetInfo(ctxFor(t, 2*time.Second), &kplugv1.GetInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.GetCapabilities(); !equalCaps(got, want) {
			t.Errorf("capabilities %v, want %v", got, want)
		}
	}
}

func TestGetInfoAndHeartbeatsDeclareTheSameHooksAndPolicies(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	kplugtest.StartPlugin(t, dir, tablesInfo, &tables{}, kplug.WithHeartbeatInterval(100*time.Millisecond))
	hb := registry.WaitForHeartbeats(t, 1, 5*time.Second)[0].Request
	handshake, ok := registry.Handshake(hb.GetInstanceId())
	if !ok || handshake.Err != nil {
		t.Fatalf("handshake: %v", handshake.Err)
	}
	for i, h := range hb.GetHooks() {
		if !proto.Equal(h, handshake.Info.GetHooks()[i]) {
			t.Errorf("hook %d: heartbeat %v, GetInfo %v", i, h, handshake.Info.GetHooks()[i])
		}
	}
	if len(hb.GetCallPolicies()) != 3 || len(handshake.Info.GetCallPolicies()) != 3 {
		t.Fatalf("call policies: heartbeat %v, GetInfo %v", hb.GetCallPolicies(), handshake.Info.GetCallPolicies())
	}
	for i, p := range hb.GetCallPolicies() {
		if !proto.Equal(p, handshake.Info.GetCallPolicies()[i]) {
			t.Errorf("policy %d: heartbeat %v, GetInfo %v", i, p, handshake.Info.GetCallPolicies()[i])
		}
	}
	audit := hb.GetHooks()[0]
	if audit.GetName() != "audit" || audit.GetPhase() != kplugv1.HookPhase_HOOK_PHASE_BEFORE_RECONCILE ||
		audit.GetBehaviour() != kplugv1.HookBehaviour_HOOK_BEHAVIOUR_SYNC_ENFORCE || audit.GetOrder() != -1 {
		t.Errorf("audit hook %v", audit)
	}
	validate, hook, reconcile := hb.GetCallPolicies()[0], hb.GetCallPolicies()[1], hb.GetCallPolicies()[2]
	if validate.GetDeadline().AsDuration() != 2*time.Second || validate.GetFailurePolicy() != kplugv1.FailurePolicy_FAILURE_POLICY_IGNORE {
		t.Errorf("validate policy %v", validate)
	}
	if hook.GetDeadline().AsDuration() != 250*time.Millisecond {
		t.Errorf("hook policy %v", hook)
	}
	if reconcile.Deadline != nil || reconcile.GetFailurePolicy() != kplugv1.FailurePolicy_FAILURE_POLICY_UNSPECIFIED {
		t.Errorf("reconcile policy %v", reconcile)
	}
}

func TestValidateAnswersAndErrorsAsTheProtocolSays(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	client := kplugtest.Dial(t, kplugtest.StartPlugin(t, dir, tablesInfo, &tables{}).SocketPath())
	create := kplugv1.Operation_OPERATION_CREATE
	r, err := client.Validate(ctxFor(t, 2*time.Second), &kplugv1.ValidateRequest{
		Operation: kplugv1.Operation_OPERATION_UPDATE, Object: widgetJSON("w"), OldObject: widgetJSON("w"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetErrors()) != 1 || r.GetErrors()[0].GetPath() != "spec.columns[1]" || r.GetErrors()[0].GetValue() != `"värchar"` {
		t.Errorf("errors %v", r.GetErrors())
	}
	if w := r.GetWarnings(); len(w) != 1 || w[0] != "was w" {
		t.Errorf("warnings %v", w)
	}
	for _, c := range []struct {
		object    []byte
		operation kplugv1.Operation
		code      codes.Code
		message   string
	}{
		{widgetJSON("broken"), create, codes.Internal, "the type catalogue is unreachable"},
		{widgetJSON("panicky"), create, codes.Internal, "the plugin's Validate handler panicked: validate panicked on purpose"},
		{[]byte("{"), create, codes.InvalidArgument, "kplug: the object is not valid JSON: "},
		{[]byte("[]"), create, codes.InvalidArgument, "kplug: the object is not a JSON object"},
		{widgetJSON("w"), kplugv1.Operation_OPERATION_UNSPECIFIED, codes.InvalidArgument, "kplug: the admission request's operation 0 is neither CREATE nor UPDATE"},
	} {
		_, err := client.Validate(ctxFor(t, 2*time.Second), &kplugv1.ValidateRequest{Operation: c.operation, Object: c.object})
		if s := status.Convert(err); s.Code() != c.code || !strings.HasPrefix(s.Message(), c.message) {
			t.Errorf("%s: got %v %q, want %v %q", c.object, s.Code(), s.Message(), c.code, c.message)
		}
	}
}

func TestDefaultPatchesAndRefusesPathsOutsideTheAllowedOnes(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	client := kplugtest.Dial(t, kplugtest.StartPlugin(t, dir, tablesInfo, &tables{}).SocketPath())
	request := func(name string) *kplugv1.DefaultRequest {
		return &kplugv1.DefaultRequest{Operation: kplugv1.Operation_OPERATION_CREATE, Object: widgetJSON(name)}
	}
	r, err := client.Default(ctxFor(t, 2*time.Second), request("w"))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.GetPatch()) != `[{"op":"add","path":"/spec/engine","value":"InnoDB"}]` || len(r.GetWarnings()) != 1 {
		t.Errorf("patch %s, warnings %v", r.GetPatch(), r.GetWarnings())
	}
	for name, message := range map[string]string{
		"broken": "defaults unavailable",
		"sneaky": `plugin bug: a default may only change /spec, /metadata/labels and /metadata/annotations; add "/status/engine" is outside them`,
	} {
		_, err := client.Default(ctxFor(t, 2*time.Second), request(name))
		if s := status.Convert(err); s.Code() != codes.Internal || s.Message() != message {
			t.Errorf("%s: got %v %q, want INTERNAL %q", name, s.Code(), s.Message(), message)
		}
	}
}

func TestHookAnswersAndAFailingHookIsFailed(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	client := kplugtest.Dial(t, kplugtest.StartPlugin(t, dir, tablesInfo, &tables{}).SocketPath())
	request := func(object []byte) *kplugv1.HookRequest {
		return &kplugv1.HookRequest{Hook: "audit", Phase: kplugv1.HookPhase_HOOK_PHASE_AFTER_RECONCILE, Implementation: "Other",
			Object: object, Outcome: kplugv1.Outcome_OUTCOME_FAILED, Message: "locked"}
	}
	r, err := client.Hook(ctxFor(t, 2*time.Second), request(widgetJSON("w")))
	if err != nil {
		t.Fatal(err)
	}
	// A hook's status lands under status.hooks.<plugin>: reserved keys are allowed.
	var st map[string]any
	if err := json.Unmarshal(r.GetStatus(), &st); err != nil || st["implementation"] != "Other" || st["phase"] != "AFTER_RECONCILE" {
		t.Errorf("status %s (%v)", r.GetStatus(), err)
	}
	if r.GetOutcome() != kplugv1.Outcome_OUTCOME_OK || r.GetEvents()[0].GetMessage() != "after FAILED: locked" {
		t.Errorf("answer %v", r)
	}
	for object, message := range map[string]string{
		string(widgetJSON("broken")):     "backup disk full",
		string(widgetJSON("conditions")): "plugin bug: a hook's response sets conditions or extension statuses; a hook writes only its status (under status.hooks.<plugin>) and events",
		"nope":                           "kplug: the base object is not valid JSON: ",
	} {
		r, err := client.Hook(ctxFor(t, 2*time.Second), request([]byte(object)))
		if err != nil || r.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED || !strings.HasPrefix(r.GetMessage(), message) {
			t.Errorf("%s: got %v (%v), want FAILED %q", object, r, err, message)
		}
	}
}

func TestAPluginWithoutTheHandlersAnswersUnimplemented(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	client := kplugtest.Dial(t, kplugtest.StartPlugin(t, dir, info, &echo{}).SocketPath())
	_, err := client.Validate(ctxFor(t, 2*time.Second), &kplugv1.ValidateRequest{Object: []byte("{}")})
	if s := status.Convert(err); s.Code() != codes.Unimplemented || s.Message() != "plugin postgresql does not implement Validate" {
		t.Errorf("Validate: %v", err)
	}
	_, err = client.Hook(ctxFor(t, 2*time.Second), &kplugv1.HookRequest{Object: []byte("{}")})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Hook: %v", err)
	}
}

func TestDeclarationsAreCheckedAtStartup(t *testing.T) {
	hook := func(name string, phase kplug.HookPhase, behaviour kplug.HookBehaviour) kplug.Hook {
		return kplug.Hook{Name: name, Base: widgetKind, Phase: phase, Behaviour: behaviour}
	}
	ok := hook("audit", kplug.PhaseAfterFinalize, kplug.BehaviourAsync)
	many := make([]kplug.Hook, 17)
	for i := range many {
		many[i] = hook("h"+string(rune('a'+i)), kplug.PhaseAfterFinalize, kplug.BehaviourAsync)
	}
	for _, c := range []struct {
		hooks    []kplug.Hook
		policies []kplug.CallPolicy
		message  string
	}{
		{[]kplug.Hook{hook("Audit", kplug.PhaseAfterFinalize, kplug.BehaviourAsync)}, nil, `hook "Audit": its name must be a DNS label`},
		{[]kplug.Hook{ok, ok}, nil, `hook "audit": it is declared twice`},
		{[]kplug.Hook{{Name: "a", Phase: kplug.PhaseAfterFinalize, Behaviour: kplug.BehaviourAsync}}, nil, "it names no base kind"},
		{[]kplug.Hook{hook("a", 0, kplug.BehaviourAsync)}, nil, "its phase 0 is not one of"},
		{[]kplug.Hook{hook("a", kplug.PhaseAfterFinalize, 9)}, nil, "its behaviour 9 is not one of"},
		{many, nil, "17 hooks are declared; at most 16"},
		{nil, []kplug.CallPolicy{{Call: kplug.CallHook}, {Call: kplug.CallHook}}, "call policy for HOOK: declared twice"},
		{nil, []kplug.CallPolicy{{Call: kplug.CallValidate, Deadline: -time.Second}}, "call policy for VALIDATE: the deadline must be positive"},
		{nil, []kplug.CallPolicy{{}}, "the call is not one of"},
		{nil, []kplug.CallPolicy{{Call: kplug.CallDefault, FailurePolicy: 7}}, "the failure policy 7 is not one of"},
	} {
		i := tablesInfo
		i.Hooks, i.CallPolicies = c.hooks, c.policies
		_, err := kplug.NewServer(i, &tables{})
		if !errors.Is(err, kplug.ErrInvalidDeclaration) || !strings.Contains(err.Error(), "plugin tables cannot start: ") || !strings.Contains(err.Error(), c.message) {
			t.Errorf("got %v, want ErrInvalidDeclaration with %q", err, c.message)
		}
	}
	i := tablesInfo
	i.Offers = nil
	if _, err := kplug.NewServer(i, &echo{}); err == nil || !strings.Contains(err.Error(), "declares hooks but does not implement kplug.HookHandler") {
		t.Errorf("hooks without a HookHandler: %v", err)
	}
}
