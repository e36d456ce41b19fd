package kplug

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// HookHandler is implemented by plugins that run the hooks they declare in
// [Info.Hooks]. Implementing it makes the plugin advertise the HOOKS
// capability; declaring hooks without it is a start-up error.
//
// The answer's outcome, message, retry delay, status (written under
// status.hooks.<plugin> of the base object, where the operator's reserved
// keys may be used) and events count; conditions and extension statuses
// are not a hook's to set, and make the answer FAILED ("plugin bug: ...").
// A returned error or a panic becomes OUTCOME_FAILED with its message, as
// for Reconcile.
type HookHandler interface {
	Hook(ctx context.Context, call *HookCall) (*Response, error)
}

// HookPhase is the point in an object's lifecycle where a hook runs.
type HookPhase int

// The phases of a hook.
const (
	// PhaseBeforeReconcile: before the implementation's Reconcile.
	PhaseBeforeReconcile HookPhase = HookPhase(kplugv1.HookPhase_HOOK_PHASE_BEFORE_RECONCILE)
	// PhaseAfterReconcile: after the implementation's Reconcile answered.
	PhaseAfterReconcile HookPhase = HookPhase(kplugv1.HookPhase_HOOK_PHASE_AFTER_RECONCILE)
	// PhaseBeforeFinalize: before the implementation's Finalize.
	PhaseBeforeFinalize HookPhase = HookPhase(kplugv1.HookPhase_HOOK_PHASE_BEFORE_FINALIZE)
	// PhaseAfterFinalize: after the implementation's Finalize answered.
	PhaseAfterFinalize HookPhase = HookPhase(kplugv1.HookPhase_HOOK_PHASE_AFTER_FINALIZE)
)

// String is "BEFORE_RECONCILE", "AFTER_RECONCILE", "BEFORE_FINALIZE" or
// "AFTER_FINALIZE".
func (p HookPhase) String() string {
	if p >= PhaseBeforeReconcile && p <= PhaseAfterFinalize {
		return kplugv1.HookPhase(p).String()[len("HOOK_PHASE_"):]
	}
	return fmt.Sprintf("HookPhase(%d)", int(p))
}

// HookBehaviour is how a hook's result affects the step it surrounds.
type HookBehaviour int

// The behaviours of a hook.
const (
	// BehaviourSyncEnforce: the operator waits; anything but OK stops the
	// step, and a condition names the hook.
	BehaviourSyncEnforce HookBehaviour = HookBehaviour(kplugv1.HookBehaviour_HOOK_BEHAVIOUR_SYNC_ENFORCE)
	// BehaviourSyncBypass: the operator waits; a failure becomes a Warning
	// Event, and the step goes on.
	BehaviourSyncBypass HookBehaviour = HookBehaviour(kplugv1.HookBehaviour_HOOK_BEHAVIOUR_SYNC_BYPASS)
	// BehaviourAsync: queued, never waited for; a failure becomes a
	// Warning Event.
	BehaviourAsync HookBehaviour = HookBehaviour(kplugv1.HookBehaviour_HOOK_BEHAVIOUR_ASYNC)
)

// Hook is a hook the plugin declares in [Info.Hooks]: the operator calls
// [HookHandler.Hook] at Phase for every object of the Base kind, whichever
// implementation reconciles it (a plugin may hook into a kind it does not
// offer).
type Hook struct {
	// Name is a DNS label, unique within the plugin; it names the hook in
	// HookCall.Hook, conditions, Events and metrics.
	Name string
	// Base is the kind whose objects the hook is called for.
	Base GroupKind
	// Phase is when the hook is called.
	Phase HookPhase
	// Behaviour is how its result affects the step.
	Behaviour HookBehaviour
	// Order: hooks of one phase and kind run by increasing order, then
	// plugin name, then hook name.
	Order int32
}

// Call names a call of the Plugin service, for [CallPolicy].
type Call int

// The calls a plugin may set a policy for.
const (
	CallReconcile Call = Call(kplugv1.Call_CALL_RECONCILE)
	CallFinalize  Call = Call(kplugv1.Call_CALL_FINALIZE)
	CallValidate  Call = Call(kplugv1.Call_CALL_VALIDATE)
	CallDefault   Call = Call(kplugv1.Call_CALL_DEFAULT)
	// CallHook is every hook of the plugin.
	CallHook Call = Call(kplugv1.Call_CALL_HOOK)
)

// String is "RECONCILE", "FINALIZE", "VALIDATE", "DEFAULT" or "HOOK".
func (c Call) String() string {
	if c >= CallReconcile && c <= CallHook {
		return kplugv1.Call(c).String()[len("CALL_"):]
	}
	return fmt.Sprintf("Call(%d)", int(c))
}

// FailurePolicy is what admission does when a Validate or Default call
// fails (an error, a timeout, the plugin gone). Its zero value means the
// operator's --webhook-failure-policy.
type FailurePolicy int

// The failure policies.
const (
	// FailurePolicyFail refuses the object.
	FailurePolicyFail FailurePolicy = FailurePolicy(kplugv1.FailurePolicy_FAILURE_POLICY_FAIL)
	// FailurePolicyIgnore admits it, with a warning.
	FailurePolicyIgnore FailurePolicy = FailurePolicy(kplugv1.FailurePolicy_FAILURE_POLICY_IGNORE)
)

// CallPolicy is how the plugin asks to be called for one call, declared in
// [Info.CallPolicies] (one per call). The operator clamps the deadline to
// its bounds (at least 1 s, at most 10 min, and at most 10 s for Validate
// and Default); a call past it is reported as a timeout, and the plugin
// stays registered.
type CallPolicy struct {
	// Call is the call this policy is for.
	Call Call
	// Deadline is how long the operator waits for an answer; 0 means the
	// operator's default.
	Deadline time.Duration
	// FailurePolicy is for CallValidate and CallDefault: refuse or admit
	// the object when the call fails; 0 means the operator's default.
	FailurePolicy FailurePolicy
}

// HookCall is a Hook call: which hook runs, at which phase, and the
// objects the implementation is (or was) sent.
type HookCall struct {
	// Hook is the hook's name, as declared.
	Hook string
	// Phase is the phase being run; 0 for one this SDK does not know (a
	// newer operator).
	Phase HookPhase
	// Request holds the implementation chosen for the object (possibly
	// another plugin's), the base object and the extensions the
	// implementation is sent.
	Request *Request
	// Outcome is, in after-* phases, the outcome of the implementation's
	// call (OutcomeFailed too when the call itself failed); 0 before.
	Outcome Outcome
	// Message is, in after-* phases, the message of that call.
	Message string
}

// DecodeHookCall decodes a Hook call from what the operator sends. The SDK
// does this for every call; it is exported for plugins' unit tests. Its
// errors are those of [DecodeRequest].
func DecodeHookCall(in *kplugv1.HookRequest) (*HookCall, error) {
	req, err := DecodeRequest(in.GetImplementation(), in.GetObject(), in.GetExtensions()...)
	if err != nil {
		return nil, err
	}
	call := &HookCall{Hook: in.GetHook(), Request: req, Message: in.GetMessage()}
	if p := HookPhase(in.GetPhase()); p >= PhaseBeforeReconcile && p <= PhaseAfterFinalize {
		call.Phase = p
	}
	switch o := Outcome(in.GetOutcome()); o {
	case OutcomeOK, OutcomeRetry, OutcomeFailed:
		call.Outcome = o
	}
	return call, nil
}

func (i *Info) hooksProto() []*kplugv1.Hook {
	hooks := make([]*kplugv1.Hook, 0, len(i.Hooks))
	for _, h := range i.Hooks {
		hooks = append(hooks, &kplugv1.Hook{
			Name: h.Name, Base: h.Base.proto(),
			Phase: kplugv1.HookPhase(h.Phase), Behaviour: kplugv1.HookBehaviour(h.Behaviour), Order: h.Order,
		})
	}
	return hooks
}

func (i *Info) callPoliciesProto() []*kplugv1.CallPolicy {
	policies := make([]*kplugv1.CallPolicy, 0, len(i.CallPolicies))
	for _, p := range i.CallPolicies {
		policy := &kplugv1.CallPolicy{Call: kplugv1.Call(p.Call), FailurePolicy: kplugv1.FailurePolicy(p.FailurePolicy)}
		if p.Deadline != 0 {
			policy.Deadline = durationpb.New(p.Deadline)
		}
		policies = append(policies, policy)
	}
	return policies
}

// validateDeclarations makes the operator's checks on the hooks, call
// policies and mutations at start-up, so that a mistake stops the plugin
// with a message instead of every heartbeat being refused.
func validateDeclarations(info *Info, plugin Plugin) error {
	refuse := func(format string, args ...any) error {
		return &startupError{kind: ErrInvalidDeclaration, message: "plugin " + info.Name + " cannot start: " + fmt.Sprintf(format, args...)}
	}
	if len(info.Hooks) > maxHooks {
		return refuse("%d hooks are declared; at most %d are accepted", len(info.Hooks), maxHooks)
	}
	for i, h := range info.Hooks {
		var problem string
		switch {
		case validateName(h.Name) != nil:
			problem = fmt.Sprintf("its name must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most %d characters", maxNameLength)
		case declaredBefore(info.Hooks[:i], h.Name):
			problem = "it is declared twice; hook names are unique within a plugin"
		case h.Base.Kind == "":
			problem = "it names no base kind"
		case h.Phase < PhaseBeforeReconcile || h.Phase > PhaseAfterFinalize:
			problem = fmt.Sprintf("its phase %d is not one of kplug.PhaseBeforeReconcile, PhaseAfterReconcile, PhaseBeforeFinalize, PhaseAfterFinalize", int(h.Phase))
		case h.Behaviour < BehaviourSyncEnforce || h.Behaviour > BehaviourAsync:
			problem = fmt.Sprintf("its behaviour %d is not one of kplug.BehaviourSyncEnforce, BehaviourSyncBypass, BehaviourAsync", int(h.Behaviour))
		default:
			continue
		}
		return refuse("hook %q: %s", h.Name, problem)
	}
	if _, ok := plugin.(HookHandler); len(info.Hooks) > 0 && !ok {
		return refuse("it declares hooks but does not implement kplug.HookHandler (a Hook method)")
	}
	if len(info.CallPolicies) > maxCallPolicies {
		return refuse("%d call policies are declared; at most %d are accepted", len(info.CallPolicies), maxCallPolicies)
	}
	for i, p := range info.CallPolicies {
		var problem string
		switch {
		case p.Call < CallReconcile || p.Call > CallHook:
			problem = "the call is not one of kplug.CallReconcile, CallFinalize, CallValidate, CallDefault, CallHook"
		case policyBefore(info.CallPolicies[:i], p.Call):
			problem = "declared twice; one policy per call"
		case p.Deadline < 0:
			problem = "the deadline must be positive (leave it 0 for the operator's default)"
		case p.FailurePolicy != 0 && p.FailurePolicy != FailurePolicyFail && p.FailurePolicy != FailurePolicyIgnore:
			problem = fmt.Sprintf("the failure policy %d is not one of kplug.FailurePolicyFail, FailurePolicyIgnore", int(p.FailurePolicy))
		default:
			continue
		}
		return refuse("call policy for %s: %s", p.Call, problem)
	}
	return validateMutations(info, plugin, refuse)
}

func declaredBefore(hooks []Hook, name string) bool {
	for _, h := range hooks {
		if h.Name == name {
			return true
		}
	}
	return false
}

func policyBefore(policies []CallPolicy, call Call) bool {
	for _, p := range policies {
		if p.Call == call {
			return true
		}
	}
	return false
}
