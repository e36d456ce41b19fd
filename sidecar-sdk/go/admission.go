package kplug

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// Validator is implemented by plugins that check objects at admission.
// Implementing it makes the plugin advertise the VALIDATE capability: the
// operator then asks it, when an object is created or changed, whether
// the object is valid. The objects are those of a base kind it offers
// (that its implementation reconciles, or would be chosen for) and the
// extensions of kinds its offers declare
// ([AdmissionRequest.Implementation] says which offer).
//
// Field errors refuse the object, and kubectl prints them. A returned
// error (or a panic) means the plugin could not decide: the SDK answers
// with a gRPC INTERNAL error carrying its message, and the plugin's
// failure policy ([CallPolicy]), else the operator's, refuses or admits
// the object. To refuse an object, return field errors.
type Validator interface {
	Validate(ctx context.Context, req *AdmissionRequest) (*Validation, error)
}

// Defaulter is implemented by plugins that fill in defaults at admission,
// for the same objects as [Validator] (which then sees the defaulted
// object). Implementing it advertises the DEFAULT capability. The answer
// is a JSON Patch built with [NoDefaults], limited to /spec,
// /metadata/labels and /metadata/annotations. A returned error, a panic,
// or a patch outside those paths is answered with a gRPC INTERNAL error
// carrying its message, so the failure policy decides.
type Defaulter interface {
	Default(ctx context.Context, req *AdmissionRequest) (*Defaults, error)
}

// Operation is the admission operation an object is checked for.
type Operation int

// The operations of an admission request.
const (
	// OperationCreate: the object is being created; there is no old object.
	OperationCreate Operation = Operation(kplugv1.Operation_OPERATION_CREATE)
	// OperationUpdate: the object is being changed; the old object is sent too.
	OperationUpdate Operation = Operation(kplugv1.Operation_OPERATION_UPDATE)
)

// String is "CREATE" or "UPDATE".
func (o Operation) String() string {
	switch o {
	case OperationCreate:
		return "CREATE"
	case OperationUpdate:
		return "UPDATE"
	}
	return fmt.Sprintf("Operation(%d)", int(o))
}

// AdmissionRequest is a Validate or Default call: the object being
// admitted and, on update, the object as it is stored now.
type AdmissionRequest struct {
	// Implementation is, for a base object, the implementation it is (or
	// would be) reconciled by; for an extension object, the implementation
	// of this plugin's offer that declares its kind.
	Implementation string
	// Operation is create or update.
	Operation Operation
	// Object is the object being admitted (a base object or an extension:
	// see its Kind).
	Object *Object
	// OldObject is, on update, the object as it is stored now; nil on create.
	OldObject *Object
}

// DecodeAdmissionRequest decodes an admission request from what the
// operator sends (oldObject empty on create). The SDK does this for every
// Validate and Default call; it is exported for plugins' unit tests. Its
// errors are the messages every SDK answers with INVALID_ARGUMENT, e.g.
// "kplug: the object is not valid JSON: ...".
func DecodeAdmissionRequest(implementation string, operation Operation, object, oldObject []byte) (*AdmissionRequest, error) {
	if operation != OperationCreate && operation != OperationUpdate {
		return nil, fmt.Errorf("kplug: the admission request's operation %d is neither CREATE nor UPDATE", int(operation))
	}
	o, err := decodeObject(object, "the object")
	if err != nil {
		return nil, err
	}
	req := &AdmissionRequest{Implementation: implementation, Operation: operation, Object: o}
	if len(oldObject) > 0 {
		if req.OldObject, err = decodeObject(oldObject, "the old object"); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// Name is the object's name.
func (r *AdmissionRequest) Name() string { return r.Object.Name() }

// Kind is the object's kind.
func (r *AdmissionRequest) Kind() string { return r.Object.Kind() }

// Spec is the object's spec; nil when absent or not a JSON object.
func (r *AdmissionRequest) Spec() map[string]any { return r.Object.Spec() }

// DecodeSpec decodes the object's spec into v, a pointer to your own type.
func (r *AdmissionRequest) DecodeSpec(v any) error { return r.Object.DecodeSpec(v) }

// FieldError is one reason an object is refused.
type FieldError struct {
	// Path is the field in Kubernetes' notation, e.g.
	// "spec.columns[1].type"; empty for the object as a whole.
	Path string
	// Value is the refused value as JSON text ("\"varchar2\"" for a
	// string, 3 for a number); empty when there is none.
	Value string
	// Message says why the value is refused.
	Message string
}

// Validation is a plugin's answer to Validate: allowed when it holds no
// errors. Start with [Allowed] and chain what you find:
//
//	return kplug.Allowed().
//		WithError("spec.columns[1].type", "varchar2", "unknown column type; use text or integer").
//		WithWarning("spec.comment is ignored"), nil
type Validation struct {
	errors   []FieldError
	warnings []string
}

// Allowed is a Validation that allows the object, so far: add errors to
// refuse it.
func Allowed() *Validation { return &Validation{} }

// WithError refuses the value at path ("" for the object as a whole);
// value is sent as JSON text (a string keeps its quotes). A value that
// cannot be encoded as JSON is sent as no value, as the Rust SDK does.
func (v *Validation) WithError(path string, value any, message string) *Validation {
	encoded, err := marshal(value)
	if err != nil {
		encoded = nil
	}
	v.errors = append(v.errors, FieldError{Path: path, Value: string(encoded), Message: message})
	return v
}

// WithErrorAt refuses the object for a field without a value to show
// (e.g. a required field that is missing).
func (v *Validation) WithErrorAt(path, message string) *Validation {
	v.errors = append(v.errors, FieldError{Path: path, Message: message})
	return v
}

// WithWarning adds a warning shown to the client (kubectl prints it),
// allowed or not.
func (v *Validation) WithWarning(warning string) *Validation {
	v.warnings = append(v.warnings, warning)
	return v
}

// IsAllowed tells whether no error was added.
func (v *Validation) IsAllowed() bool { return len(v.errors) == 0 }

// Errors are the field errors, in the order added.
func (v *Validation) Errors() []FieldError { return v.errors }

// Warnings are the warnings, in the order added.
func (v *Validation) Warnings() []string { return v.warnings }

// ValidateResponse is the answer as sent, within the protocol's bounds:
// past 64 errors the last one kept says how many more there were (the
// object is refused either way); warnings likewise past 16, each cut to
// 256 characters; messages and values cut to 1024 characters.
func (v *Validation) ValidateResponse() *kplugv1.ValidateResponse {
	errors := v.errors
	if len(errors) > maxFieldErrors {
		more := len(errors) - (maxFieldErrors - 1)
		errors = append(errors[:maxFieldErrors-1:maxFieldErrors-1], FieldError{Message: fmt.Sprintf("and %d more errors", more)})
	}
	wire := make([]*kplugv1.FieldError, 0, len(errors))
	for _, e := range errors {
		wire = append(wire, &kplugv1.FieldError{Path: e.Path, Value: cut(e.Value, maxMessageChars), Message: cut(e.Message, maxMessageChars)})
	}
	return &kplugv1.ValidateResponse{Errors: wire, Warnings: boundedWarnings(v.warnings)}
}

// Defaults is a plugin's answer to Default: JSON Patch operations (RFC
// 6902) on the object, limited to /spec, /metadata/labels and
// /metadata/annotations (or below them). Start with [NoDefaults]:
//
//	return kplug.NoDefaults().Add("/spec/storageEngine", "InnoDB"), nil
//
// Paths are JSON Pointers ("~1" stands for "/" in a key, as in
// /metadata/labels/app.kubernetes.io~1name). A path outside the allowed
// ones is a plugin bug: the first such mistake is kept ([Defaults.Err])
// and the call is answered with a gRPC INTERNAL error "plugin bug: ..."
// (so the failure policy decides), instead of a patch the operator would
// refuse.
type Defaults struct {
	patch jsonPatch
}

// NoDefaults is a Defaults with nothing to default, so far.
func NoDefaults() *Defaults { return &Defaults{} }

// Add sets value at path (a new member, or the member replaced; its parent
// must exist, or be added first).
func (d *Defaults) Add(path string, value any) *Defaults {
	d.patch.push("add", path, value, true, defaultPathProblem)
	return d
}

// Replace replaces the value at path, which must exist.
func (d *Defaults) Replace(path string, value any) *Defaults {
	d.patch.push("replace", path, value, true, defaultPathProblem)
	return d
}

// Remove removes the value at path, which must exist.
func (d *Defaults) Remove(path string) *Defaults {
	d.patch.push("remove", path, nil, false, defaultPathProblem)
	return d
}

// WithWarning adds a warning shown to the client (kubectl prints it).
func (d *Defaults) WithWarning(warning string) *Defaults {
	d.patch.warnings = append(d.patch.warnings, warning)
	return d
}

// IsEmpty tells whether no operation was added.
func (d *Defaults) IsEmpty() bool { return len(d.patch.operations) == 0 }

// Err is the first mistake made while building (a path outside the
// allowed ones, a value that is not JSON), or nil.
func (d *Defaults) Err() error { return d.patch.problem }

// defaultPathProblem says why a Default patch may not touch path; empty
// when it may.
func defaultPathProblem(path string) string {
	if defaultPatchPathAllowed(path) {
		return ""
	}
	return "a default may only change /spec, /metadata/labels and /metadata/annotations"
}

// jsonPatch is a JSON Patch being built, for [Defaults] and [Mutation]:
// the operations, the warnings that go with them, and the first mistake.
type jsonPatch struct {
	operations []map[string]any
	warnings   []string
	problem    error
}

// push adds one operation, unless an earlier one was a mistake (the first
// is the one worth reporting) or problem refuses its path.
func (p *jsonPatch) push(op, path string, value any, hasValue bool, problem func(path string) string) {
	if p.problem != nil {
		return
	}
	if why := problem(path); why != "" {
		quoted, _ := marshal(path)
		p.problem = fmt.Errorf("%s; %s %s is outside them", why, op, quoted)
		return
	}
	operation := map[string]any{"op": op, "path": path}
	if hasValue {
		encoded, err := marshal(value)
		if err != nil {
			p.problem = fmt.Errorf("the value of %s %q cannot be encoded as JSON: %w", op, path, err)
			return
		}
		operation["value"] = json.RawMessage(encoded)
	}
	p.operations = append(p.operations, operation)
}

// encode is the patch as sent (nil for no operation), or the plugin bug
// that prevents sending it; what names the answer in the messages.
func (p *jsonPatch) encode(what string) ([]byte, error) {
	if p.problem != nil {
		return nil, fmt.Errorf("plugin bug: %w", p.problem)
	}
	if len(p.operations) == 0 {
		return nil, nil
	}
	patch, err := marshalOperations(p.operations)
	if err != nil {
		return nil, fmt.Errorf("plugin bug: %s JSON Patch cannot be encoded: %w", what, err)
	}
	if len(patch) > maxPatchBytes {
		return nil, fmt.Errorf("plugin bug: %s JSON Patch is %d bytes; at most %d are accepted", what, len(patch), maxPatchBytes)
	}
	return patch, nil
}

// DefaultResponse is the answer as sent; an error (a mistake made while
// building, or a patch larger than the operator takes) is what the SDK
// answers with INTERNAL.
func (d *Defaults) DefaultResponse() (*kplugv1.DefaultResponse, error) {
	patch, err := d.patch.encode("the defaults'")
	if err != nil {
		return nil, err
	}
	return &kplugv1.DefaultResponse{Patch: patch, Warnings: boundedWarnings(d.patch.warnings)}, nil
}

// marshalOperations encodes the operations in the order RFC 6902's
// examples use (op, path, value), compact.
func marshalOperations(operations []map[string]any) ([]byte, error) {
	var b strings.Builder
	b.WriteByte('[')
	for i, o := range operations {
		if i > 0 {
			b.WriteByte(',')
		}
		op, _ := marshal(o["op"])
		path, _ := marshal(o["path"])
		b.WriteString(`{"op":` + string(op) + `,"path":` + string(path))
		if value, ok := o["value"].(json.RawMessage); ok {
			b.WriteString(`,"value":` + string(value))
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return []byte(b.String()), nil
}

func defaultPatchPathAllowed(path string) bool {
	for _, prefix := range DefaultPatchPrefixes {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	return false
}

func boundedWarnings(warnings []string) []string {
	if len(warnings) > maxWarnings {
		more := len(warnings) - (maxWarnings - 1)
		warnings = append(warnings[:maxWarnings-1:maxWarnings-1], fmt.Sprintf("and %d more warnings", more))
	}
	out := make([]string, 0, len(warnings))
	for _, w := range warnings {
		out = append(out, cut(w, maxWarningChars))
	}
	return out
}

// cut is text cut to limit characters, the last one an ellipsis when cut.
func cut(text string, limit int) string {
	if utf8.RuneCountInString(text) <= limit {
		return text
	}
	runes := []rune(text)
	return string(runes[:limit-1]) + "…"
}
