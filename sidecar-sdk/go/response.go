package kplug

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// Outcome is what a call achieved.
type Outcome int

// The outcomes a plugin answers with.
const (
	// OutcomeOK: done; the object is reconciled (for Finalize: cleaned up,
	// it may go).
	OutcomeOK Outcome = Outcome(kplugv1.Outcome_OUTCOME_OK)
	// OutcomeRetry: not done yet, nothing is wrong; call again after the
	// retry delay.
	OutcomeRetry Outcome = Outcome(kplugv1.Outcome_OUTCOME_RETRY)
	// OutcomeFailed: failed; the message says why and the operator retries
	// with backoff.
	OutcomeFailed Outcome = Outcome(kplugv1.Outcome_OUTCOME_FAILED)
)

// String is "OK", "RETRY" or "FAILED".
func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "OK"
	case OutcomeRetry:
		return "RETRY"
	case OutcomeFailed:
		return "FAILED"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// ConditionStatus is the status of a condition a plugin reports.
type ConditionStatus int

// The statuses of a Kubernetes condition.
const (
	// ConditionTrue: the condition holds.
	ConditionTrue ConditionStatus = ConditionStatus(kplugv1.ConditionStatus_CONDITION_STATUS_TRUE)
	// ConditionFalse: the condition does not hold.
	ConditionFalse ConditionStatus = ConditionStatus(kplugv1.ConditionStatus_CONDITION_STATUS_FALSE)
	// ConditionUnknown: it is not known whether the condition holds.
	ConditionUnknown ConditionStatus = ConditionStatus(kplugv1.ConditionStatus_CONDITION_STATUS_UNKNOWN)
)

// Response is a plugin's answer to Reconcile or Finalize. Start with [OK],
// [Retry] or [Failed], then chain what there is to report:
//
//	return kplug.OK().
//		WithMessage("table users is up to date").
//		WithStatus(map[string]any{"columns": 3}).
//		WithExtensionStatus(req.Extension("DatabaseTablePostgreSqlExtension"), map[string]any{"partitions": 4}).
//		WithCondition("TableReady", kplug.ConditionTrue, "Created", "the table exists").
//		WithEvent("TableCreated", "created table users"), nil
//
// The builders apply the operator's rules: the status keys implementation,
// plugin, observedGeneration and conditions and the condition types Ready,
// PluginAvailable, ExtensionsResolved and Reconciled belong to the
// operator, and statuses must be JSON objects. The first such mistake is
// kept ([Response.Err]) and the response is sent as OUTCOME_FAILED with the
// message "plugin bug: ..." and nothing else, so that it shows on the
// resource.
//
// A Finalize answer carries only the outcome, message, retry delay, events
// and children; the rest is dropped (with a warning in the log).
type Response struct {
	outcome           Outcome
	message           string
	retryAfter        *time.Duration
	status            []byte
	extensionStatuses []*kplugv1.ObjectStatus
	conditions        []*kplugv1.Condition
	events            []*kplugv1.Event
	// children are the desired children, each compact JSON; nil leaves
	// the children as they are, non-nil (even empty) is the whole set.
	children [][]byte
	problem  error
	// reservedKey is a reserved key in the base object's status: a mistake
	// in Reconcile and Finalize, not in a hook, whose status lands under
	// status.hooks.<plugin> where no key is the operator's.
	reservedKey error
}

// OK answers done: the object is reconciled (for Finalize: cleaned up, it
// may go).
func OK() *Response { return &Response{outcome: OutcomeOK} }

// Retry answers not done yet, nothing wrong: call again after after (use
// [DefaultRetryAfter], 10 s, when you have no better idea).
func Retry(after time.Duration) *Response {
	r := &Response{outcome: OutcomeRetry, retryAfter: &after}
	if after < 0 {
		r.fail(fmt.Errorf("retry delay %v is negative; use 0 to be called again at once", after))
	}
	return r
}

// Failed answers failed: message says why (shown on the resource), and the
// operator retries with backoff. Returning an error from the handler does
// the same.
func Failed(message string) *Response {
	return &Response{outcome: OutcomeFailed, message: message}
}

// WithMessage sets the human-readable summary, shown in the resource's
// Reconciled condition.
func (r *Response) WithMessage(message string) *Response {
	r.message = message
	return r
}

// WithStatus sets the plugin's part of the base object's status: a JSON
// object (a map[string]any, a struct, a json.RawMessage...) merged into the
// object's .status by server-side apply. It replaces a status set before.
// From a [HookHandler], it is written under status.hooks.<plugin>, where
// the operator's reserved keys may be used.
func (r *Response) WithStatus(status any) *Response {
	encoded, object, err := encodeObject(status, "status")
	if err != nil {
		r.fail(err)
		return r
	}
	if err := checkReservedKeys(object, "status"); err != nil && r.reservedKey == nil {
		r.reservedKey = err
	}
	r.status = encoded
	return r
}

// WithExtensionStatus adds the status of an extension the plugin was sent
// (one of [Request.Extensions]), merged into that object's .status.
func (r *Response) WithExtensionStatus(extension *Object, status any) *Response {
	if extension == nil {
		r.fail(errors.New("extension status target is nil: pass an extension from the request " +
			"(Request.Extension returns nil when none of that kind was sent)"))
		return r
	}
	encoded, err := encodeStatus(status, "status of "+extension.Kind()+" "+extension.Name())
	if err != nil {
		r.fail(err)
		return r
	}
	r.extensionStatuses = append(r.extensionStatuses, &kplugv1.ObjectStatus{Target: extension.Ref().proto(), Status: encoded})
	return r
}

// WithCondition adds a Kubernetes-style condition on the base object, e.g.
// WithCondition("TableReady", kplug.ConditionTrue, "Created", "the table
// exists"). typ and reason are CamelCase.
func (r *Response) WithCondition(typ string, status ConditionStatus, reason, message string) *Response {
	switch {
	case typ == "":
		r.fail(errors.New(`condition type is empty; use a CamelCase type such as "TableReady"`))
		return r
	case slices.Contains(ReservedConditionTypes, typ):
		r.fail(fmt.Errorf("condition type %q is reserved for the operator (it owns %s); use a type of your own, e.g. \"TableReady\"",
			typ, joinSorted(ReservedConditionTypes)))
		return r
	}
	r.conditions = append(r.conditions, &kplugv1.Condition{
		Type: typ, Status: kplugv1.ConditionStatus(status), Reason: reason, Message: message,
	})
	return r
}

// WithEvent adds a Normal Kubernetes Event on the base object.
func (r *Response) WithEvent(reason, message string) *Response {
	return r.event(kplugv1.EventType_EVENT_TYPE_NORMAL, reason, message, nil, false)
}

// WithWarning adds a Warning Kubernetes Event on the base object.
func (r *Response) WithWarning(reason, message string) *Response {
	return r.event(kplugv1.EventType_EVENT_TYPE_WARNING, reason, message, nil, false)
}

// WithEventOn adds a Normal Event on regarding: the base object or one of
// the extensions the plugin was sent.
func (r *Response) WithEventOn(regarding *Object, reason, message string) *Response {
	return r.event(kplugv1.EventType_EVENT_TYPE_NORMAL, reason, message, regarding, true)
}

// WithWarningOn adds a Warning Event on regarding: the base object or one
// of the extensions the plugin was sent.
func (r *Response) WithWarningOn(regarding *Object, reason, message string) *Response {
	return r.event(kplugv1.EventType_EVENT_TYPE_WARNING, reason, message, regarding, true)
}

func (r *Response) event(typ kplugv1.EventType, reason, message string, regarding *Object, explicit bool) *Response {
	event := &kplugv1.Event{Type: typ, Reason: reason, Message: message}
	if explicit {
		if regarding == nil {
			r.fail(fmt.Errorf("event %q is about a nil object: pass the request's Object or one of its Extensions", reason))
			return r
		}
		event.Regarding = regarding.Ref().proto()
	}
	r.events = append(r.events, event)
	return r
}

// WithChild adds a child: a Kubernetes object the operator applies for
// this base object, with apiVersion, kind, metadata.name and the fields the
// plugin manages. Anything that encodes to a JSON object will do: a
// map[string]any, or a struct of your own (or of k8s.io/api) with JSON
// tags. Its kind must be one the offer declares ([Offer.Children]); the
// operator puts it in the base object's namespace, owns it and watches it.
//
//	return kplug.OK().WithChild(map[string]any{
//		"apiVersion": "v1", "kind": "ConfigMap",
//		"metadata": map[string]any{"name": "greeting-" + req.Name()},
//		"data":     map[string]any{"greeting": "hello, world"},
//	}), nil
//
// An answer that adds a child, or calls [Response.WithChildren], carries
// the whole set of desired children: on OK the operator deletes the
// children it no longer lists. An answer with neither leaves the children
// as they are. Only Reconcile and Finalize answers carry children; a
// hook's answer with children is sent as OUTCOME_FAILED "plugin bug: ...".
func (r *Response) WithChild(child any) *Response {
	if r.children == nil {
		r.children = [][]byte{}
	}
	encoded, _, err := encodeObject(child, "a child")
	if err != nil {
		r.fail(err)
		return r
	}
	r.children = append(r.children, encoded)
	return r
}

// WithChildren sets the whole set of desired children (see
// [Response.WithChild]), replacing those added before. With none, the
// answer carries an empty set: on OK the operator deletes every child.
func (r *Response) WithChildren(children ...any) *Response {
	r.children = make([][]byte, 0, len(children))
	for _, child := range children {
		r.WithChild(child)
	}
	return r
}

func (r *Response) fail(err error) {
	if r.problem == nil {
		r.problem = err
	}
}

// Outcome is the outcome the response was built with.
func (r *Response) Outcome() Outcome { return r.outcome }

// Message is the response's message.
func (r *Response) Message() string { return r.message }

// Err is the first mistake made while building the response (a reserved
// key, a status that is not a JSON object...), or nil. A response with a
// mistake is sent as OUTCOME_FAILED "plugin bug: <Err>". (A reserved key
// in the status is no mistake in a hook's answer.)
func (r *Response) Err() error {
	if r.problem != nil {
		return r.problem
	}
	return r.reservedKey
}

// sent is the response as it goes on the wire: itself, or the FAILED
// answer that replaces it when it has a mistake.
func (r *Response) sent() *Response {
	if err := r.Err(); err != nil {
		return Failed("plugin bug: " + err.Error())
	}
	return r
}

// HookResponse is the response as sent in answer to Hook: the outcome,
// message, retry delay, status and events. Conditions, extension statuses
// and children are not a hook's to set: a response with them is sent as
// OUTCOME_FAILED "plugin bug: ...", like the other mistakes.
func (r *Response) HookResponse() *kplugv1.HookResponse {
	s := r
	switch {
	case len(r.conditions) > 0 || len(r.extensionStatuses) > 0:
		s = Failed("plugin bug: a hook's response sets conditions or extension statuses; a hook writes only its status (under status.hooks.<plugin>) and events")
	case r.children != nil:
		s = Failed("plugin bug: a hook's response sets children; only Reconcile and Finalize answers carry children")
	case r.problem != nil:
		s = Failed("plugin bug: " + r.problem.Error())
	}
	return &kplugv1.HookResponse{
		Outcome:    kplugv1.Outcome(s.outcome),
		Message:    s.message,
		Status:     s.status,
		Events:     s.events,
		RetryAfter: s.retryAfterProto(),
	}
}

func (r *Response) retryAfterProto() *durationpb.Duration {
	if r.retryAfter == nil {
		return nil
	}
	return durationpb.New(*r.retryAfter)
}

// ReconcileResponse is the response as sent in answer to Reconcile.
func (r *Response) ReconcileResponse() *kplugv1.ReconcileResponse {
	s := r.sent()
	return &kplugv1.ReconcileResponse{
		Outcome:           kplugv1.Outcome(s.outcome),
		Message:           s.message,
		RetryAfter:        s.retryAfterProto(),
		Status:            s.status,
		ExtensionStatuses: s.extensionStatuses,
		Conditions:        s.conditions,
		Events:            s.events,
		Children:          s.childrenProto(),
	}
}

// childrenProto is the children message: nil (unset) when the answer
// leaves the children as they are.
func (r *Response) childrenProto() *kplugv1.Children {
	if r.children == nil {
		return nil
	}
	return &kplugv1.Children{Objects: r.children}
}

// FinalizeResponse is the response as sent in answer to Finalize: the
// outcome, message, retry delay, events and the children still wanted
// while clean-up goes on (statuses and conditions are dropped: the object
// is going away; once the answer is OK, every child goes).
func (r *Response) FinalizeResponse() *kplugv1.FinalizeResponse {
	s := r.sent()
	return &kplugv1.FinalizeResponse{
		Outcome:    kplugv1.Outcome(s.outcome),
		Message:    s.message,
		RetryAfter: s.retryAfterProto(),
		Events:     s.events,
		Children:   s.childrenProto(),
	}
}

// dropsInFinalize tells whether a Finalize answer would drop parts of r.
func (r *Response) dropsInFinalize() bool {
	return r.Err() == nil && (r.status != nil || len(r.extensionStatuses) > 0 || len(r.conditions) > 0)
}
