// Package conformance is the Go SDK's conformance plugin: its behaviour is
// driven by the base object's spec.conformance exactly as
// sidecar-sdk/conformance/README.md specifies, so that every SDK's
// conformance plugin answers the cases in cases.json identically.
package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/kplug/kplug/sidecar-sdk/go"
)

const group = "conformance.kplug.dev"

// Info is the plugin's description, as cases.json's "plugin" gives it.
func Info() kplug.Info {
	return kplug.Info{
		Name:        "conformance",
		Version:     "1.0.0",
		Description: "kplug SDK conformance plugin",
		Offers: []kplug.Offer{{
			Base:           kplug.GroupKind{Group: group, Kind: "Widget"},
			Implementation: "Conformance",
			Extensions:     []kplug.GroupKind{{Group: group, Kind: "WidgetExtensionA"}, {Group: group, Kind: "WidgetExtensionB"}},
			Children: []kplug.GroupVersionKind{
				kplug.FromAPIVersionAndKind("v1", "ConfigMap"),
				kplug.FromAPIVersionAndKind("apps/v1", "Deployment"),
			},
		}},
		Hooks: []kplug.Hook{
			{Name: "audit", Base: widget, Phase: kplug.PhaseBeforeReconcile, Behaviour: kplug.BehaviourSyncEnforce, Order: -10},
			{Name: "record", Base: widget, Phase: kplug.PhaseAfterReconcile, Behaviour: kplug.BehaviourSyncBypass},
			{Name: "backup", Base: widget, Phase: kplug.PhaseBeforeFinalize, Behaviour: kplug.BehaviourSyncEnforce},
			{Name: "notify", Base: kplug.GroupKind{Group: group, Kind: "Gadget"}, Phase: kplug.PhaseAfterFinalize, Behaviour: kplug.BehaviourAsync, Order: 5},
		},
		CallPolicies: []kplug.CallPolicy{
			{Call: kplug.CallReconcile, Deadline: 120 * time.Second},
			{Call: kplug.CallValidate, Deadline: 2 * time.Second, FailurePolicy: kplug.FailurePolicyFail},
			{Call: kplug.CallDefault, Deadline: 1500 * time.Millisecond, FailurePolicy: kplug.FailurePolicyIgnore},
			{Call: kplug.CallHook},
		},
		Mutations: []kplug.GroupVersionKind{kplug.FromAPIVersionAndKind("apps/v1", "Deployment")},
	}
}

var widget = kplug.GroupKind{Group: group, Kind: "Widget"}

// Plugin is the conformance plugin. It implements Finalize, Validate,
// Default, Hook, Mutate and readiness, and its offer declares child kinds,
// so it advertises RECONCILE, FINALIZE, VALIDATE, DEFAULT, HOOKS, CHILDREN
// and MUTATE.
type Plugin struct {
	kplug.ReadinessGate
}

// Error is what the "raise" action returns.
type Error struct{ Message string }

// Error is "ConformanceError: <message>", as the Rust plugin's.
func (e *Error) Error() string { return "ConformanceError: " + e.Message }

// Reconcile follows steps 1 to 8 of the README (4b and 4c included).
func (p *Plugin) Reconcile(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	c := directives(req)
	if c["action"] == "setReadiness" {
		if ready, _ := c["ready"].(bool); ready {
			p.SetReady()
		} else {
			p.SetNotReady(text(c, "message"))
		}
		return kplug.OK().WithMessage("readiness set"), nil
	}
	response, err := outcome(c)
	if err != nil {
		return nil, err
	}
	status, hasStatus := c["status"]
	if echo, _ := c["echo"].(bool); echo {
		merged := map[string]any{}
		if m, ok := status.(map[string]any); ok {
			for k, v := range m {
				merged[k] = v
			}
		}
		merged["echo"] = echoOf(req)
		status, hasStatus = merged, true
	}
	if echo, _ := c["echoChildren"].(bool); echo {
		merged := map[string]any{}
		if m, ok := status.(map[string]any); ok {
			for k, v := range m {
				merged[k] = v
			}
		}
		observed := make([]any, 0, len(req.Children))
		for _, child := range req.Children {
			observed = append(observed, child.Kind()+"/"+child.Name())
		}
		merged["observedChildren"] = observed
		status, hasStatus = merged, true
	}
	if hasStatus {
		response.WithStatus(status)
	}
	if children, ok := c["children"].([]any); ok {
		response.WithChildren(children...)
	}
	if extensionStatus, ok := c["extensionStatus"]; ok {
		for _, extension := range req.Extensions {
			response.WithExtensionStatus(extension, extensionStatus)
		}
	}
	for _, item := range list(c, "conditions") {
		condition, _ := item.(map[string]any)
		typ, _ := condition["type"].(string)
		status := kplug.ConditionUnknown
		if b, ok := condition["status"].(bool); ok {
			status = map[bool]kplug.ConditionStatus{true: kplug.ConditionTrue, false: kplug.ConditionFalse}[b]
		}
		response.WithCondition(typ, status, text(condition, "reason"), text(condition, "message"))
	}
	addEvents(response, req, c)
	return response, nil
}

// Finalize follows steps 2 and 7 of the README.
func (p *Plugin) Finalize(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	c := directives(req)
	response, err := outcome(c)
	if err != nil {
		return nil, err
	}
	addEvents(response, req, c)
	return response, nil
}

// Validate follows the README's Validate: errors (with or without a
// value), warnings, echo, and "raise".
func (p *Plugin) Validate(_ context.Context, req *kplug.AdmissionRequest) (*kplug.Validation, error) {
	c := specDirectives(req.Spec())
	if err := raised(c); err != nil {
		return nil, err
	}
	verdict := kplug.Allowed()
	for _, item := range list(c, "errors") {
		e, _ := item.(map[string]any)
		if value, ok := e["value"]; ok {
			verdict.WithError(text(e, "path"), value, text(e, "message"))
		} else {
			verdict.WithErrorAt(text(e, "path"), text(e, "message"))
		}
	}
	for _, warning := range warnings(c) {
		verdict.WithWarning(warning)
	}
	if echo, _ := c["echo"].(bool); echo {
		old := "none"
		if req.OldObject != nil {
			old = req.OldObject.Kind() + "/" + req.OldObject.Name()
		}
		verdict.WithWarning(fmt.Sprintf("%s %s %s/%s old=%s", req.Operation, req.Implementation, req.Kind(), req.Name(), old))
	}
	return verdict, nil
}

// Default follows the README's Default: patch (through the SDK's
// builder), warnings, and "raise".
func (p *Plugin) Default(_ context.Context, req *kplug.AdmissionRequest) (*kplug.Defaults, error) {
	c := specDirectives(req.Spec())
	if err := raised(c); err != nil {
		return nil, err
	}
	defaults := kplug.NoDefaults()
	for _, item := range list(c, "patch") {
		op, _ := item.(map[string]any)
		switch text(op, "op") {
		case "add":
			defaults.Add(text(op, "path"), op["value"])
		case "replace":
			defaults.Replace(text(op, "path"), op["value"])
		default:
			defaults.Remove(text(op, "path"))
		}
	}
	for _, warning := range warnings(c) {
		defaults.WithWarning(warning)
	}
	return defaults, nil
}

// Mutate follows the README's Mutate: c is the base object's
// spec.conformance (none without a base); "raise", patch (through the
// SDK's builder), warnings and echo.
func (p *Plugin) Mutate(_ context.Context, call *kplug.MutateCall) (*kplug.Mutation, error) {
	c := map[string]any{}
	if call.Base != nil {
		c = specDirectives(call.Base.Spec())
	}
	if err := raised(c); err != nil {
		return nil, err
	}
	mutation := kplug.NoMutation()
	for _, item := range list(c, "patch") {
		op, _ := item.(map[string]any)
		switch text(op, "op") {
		case "add":
			mutation.Add(text(op, "path"), op["value"])
		case "replace":
			mutation.Replace(text(op, "path"), op["value"])
		default:
			mutation.Remove(text(op, "path"))
		}
	}
	for _, warning := range warnings(c) {
		mutation.WithWarning(warning)
	}
	if echo, _ := c["echo"].(bool); echo {
		live := "none"
		if call.Live != nil {
			live = call.Live.Name()
		}
		mutation.WithWarning(fmt.Sprintf("%s %s/%s live=%s", call.Implementation, call.Object.Kind(), call.Object.Name(), live))
	}
	return mutation, nil
}

// Hook follows the README's Hook: the outcome and events as for Finalize,
// status (reserved keys allowed) and echo.
func (p *Plugin) Hook(_ context.Context, call *kplug.HookCall) (*kplug.Response, error) {
	req := call.Request
	c := directives(req)
	response, err := outcome(c)
	if err != nil {
		return nil, err
	}
	status, hasStatus := c["status"]
	if echo, _ := c["echo"].(bool); echo {
		merged := map[string]any{}
		if m, ok := status.(map[string]any); ok {
			for k, v := range m {
				merged[k] = v
			}
		}
		extensions := make([]any, 0, len(req.Extensions))
		for _, e := range req.Extensions {
			extensions = append(extensions, e.Kind()+"/"+e.Name())
		}
		var phase, result any
		if call.Phase != 0 {
			phase = call.Phase.String()
		}
		if call.Outcome != 0 {
			result = call.Outcome.String()
		}
		merged["echo"] = map[string]any{
			"hook": call.Hook, "phase": phase, "implementation": req.Implementation,
			"name": req.Name(), "namespace": req.Namespace(), "extensions": extensions,
			"outcome": result, "message": call.Message,
		}
		status, hasStatus = merged, true
	}
	if hasStatus {
		response.WithStatus(status)
	}
	addEvents(response, req, c)
	return response, nil
}

func directives(req *kplug.Request) map[string]any {
	return specDirectives(req.Spec())
}

func specDirectives(spec map[string]any) map[string]any {
	c, _ := spec["conformance"].(map[string]any)
	if c == nil {
		c = map[string]any{}
	}
	return c
}

func text(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func list(m map[string]any, key string) []any {
	l, _ := m[key].([]any)
	return l
}

// raised is the README's "raise" for Validate, Default and Mutate: the error the
// handler returns, or nil when the directives do not ask for one.
func raised(c map[string]any) error {
	if c["action"] == "raise" {
		return &Error{Message: text(c, "message")}
	}
	return nil
}

// warnings are the "warnings" directive's items; one that is not a string
// is an empty warning.
func warnings(c map[string]any) []string {
	var all []string
	for _, w := range list(c, "warnings") {
		warning, _ := w.(string)
		all = append(all, warning)
	}
	return all
}

func outcome(c map[string]any) (*kplug.Response, error) {
	message := text(c, "message")
	action, ok := c["action"].(string)
	if !ok {
		action = "ok"
	}
	switch action {
	case "ok":
		return kplug.OK().WithMessage(message), nil
	case "retry":
		after := kplug.DefaultRetryAfter
		if seconds, ok := number(c["retryAfterSeconds"]); ok {
			after = time.Duration(seconds * float64(time.Second))
		}
		return kplug.Retry(after).WithMessage(message), nil
	case "fail":
		return kplug.Failed(message), nil
	case "raise":
		return nil, &Error{Message: message}
	}
	return nil, fmt.Errorf("unknown conformance action %q", action)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func echoOf(req *kplug.Request) map[string]any {
	extensions := make([]any, 0, len(req.Extensions))
	for _, e := range req.Extensions {
		extensions = append(extensions, e.Kind()+"/"+e.Name())
	}
	data, _ := req.Object.Get("spec", "data")
	return map[string]any{
		"implementation": req.Implementation,
		"name":           req.Name(),
		"namespace":      req.Namespace(),
		"generation":     req.Generation(),
		"extensions":     extensions,
		"data":           data,
	}
}

func addEvents(response *kplug.Response, req *kplug.Request, c map[string]any) {
	for _, item := range list(c, "events") {
		event, _ := item.(map[string]any)
		reason, message := text(event, "reason"), text(event, "message")
		warning, _ := event["warning"].(bool)
		var regarding *kplug.Object
		switch r := event["regarding"].(type) {
		case nil:
		case string:
			if r == "base" {
				regarding = req.Object
			}
		case int64:
			if r >= 0 && r < int64(len(req.Extensions)) {
				regarding = req.Extensions[r]
			}
		}
		switch {
		case regarding == nil && warning:
			response.WithWarning(reason, message)
		case regarding == nil:
			response.WithEvent(reason, message)
		case warning:
			response.WithWarningOn(regarding, reason, message)
		default:
			response.WithEventOn(regarding, reason, message)
		}
	}
}

// Main runs the conformance plugin as a process (KPLUG_SOCKET_DIR and
// KPLUG_HEARTBEAT_INTERVAL from the environment).
func Main() {
	kplug.Main(Info(), &Plugin{})
}
