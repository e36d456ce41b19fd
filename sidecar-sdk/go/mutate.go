package kplug

import (
	"context"
	"strings"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// Mutator is implemented by plugins that patch objects before the
// operator applies them: the children other plugins desire, of the kinds
// declared in [Info.Mutations], as a backup plugin adds a sidecar container
// to the Deployments an operator creates (docs/protocol.md, "Mutate").
// Implementing it advertises the MUTATE capability; implementing it
// without declaring a kind, or declaring kinds without implementing it, is
// a start-up error. The operator sends a kind only when its admin allows
// the plugin to mutate it (--mutators).
//
// The answer must be deterministic: the same call, the same [Mutation].
// The operator judges drift by the mutated object, so a patch that changes
// from call to call (a timestamp, a random name, map iteration order)
// would rewrite the object on every reconcile.
//
// A returned error, a panic, a nil answer or a patch outside the allowed
// paths is answered with a gRPC INTERNAL error carrying its message, and
// the operator holds the object (it is not applied unmutated) until a call
// succeeds; an object that is not JSON is answered INVALID_ARGUMENT.
type Mutator interface {
	Mutate(ctx context.Context, call *MutateCall) (*Mutation, error)
}

// MutateCall is a Mutate call: the object about to be applied, as it is so
// far.
type MutateCall struct {
	// Implementation is the implementation that desires the object; empty
	// for an embedding operator's own object.
	Implementation string
	// Object is the object about to be applied: what the plugin that
	// desires it answered, with kplug's labels and owner reference, and
	// the patches of the mutators before this one. The patch applies to it.
	Object *Object
	// Live is the object as it is now; nil when it does not exist yet.
	Live *Object
	// Base is the base object the object is for; nil for an embedding
	// operator's own object.
	Base *Object
}

// DecodeMutateCall decodes a Mutate call from what the operator sends. The
// SDK does this for every call; it is exported for plugins' unit tests.
// Its errors are the messages every SDK answers with INVALID_ARGUMENT,
// e.g. "kplug: the object is not a JSON object" or "kplug: the live object
// is not valid JSON: ...".
func DecodeMutateCall(in *kplugv1.MutateRequest) (*MutateCall, error) {
	object, err := decodeObject(in.GetObject(), "the object")
	if err != nil {
		return nil, err
	}
	call := &MutateCall{Implementation: in.GetImplementation(), Object: object}
	// Empty bytes are the protocol's "none", not an invalid object.
	if live := in.GetLive(); len(live) > 0 {
		if call.Live, err = decodeObject(live, "the live object"); err != nil {
			return nil, err
		}
	}
	if base := in.GetBase(); len(base) > 0 {
		if call.Base, err = decodeObject(base, "the base object"); err != nil {
			return nil, err
		}
	}
	return call, nil
}

// Mutation is a plugin's answer to Mutate: JSON Patch operations (RFC
// 6902) on [MutateCall.Object], limited to /spec (or below it) and single
// members of /metadata/labels and /metadata/annotations, never a kplug.io/
// one. Start with [NoMutation]:
//
//	return kplug.NoMutation().
//		Add("/spec/template/spec/containers/-", map[string]any{"name": "backup", "image": "backup:1"}).
//		Add("/metadata/annotations/backup.example~1enabled", "true"), nil
//
// Paths are JSON Pointers ("~1" stands for "/" in a key; "-" appends to a
// list). A path outside the allowed ones is a plugin bug: the first such
// mistake is kept ([Mutation.Err]) and the call is answered with a gRPC
// INTERNAL error "plugin bug: ...", instead of a patch the operator would
// refuse (it refuses the whole child for it).
type Mutation struct {
	patch jsonPatch
}

// NoMutation is a Mutation that changes nothing, so far.
func NoMutation() *Mutation { return &Mutation{} }

// Add sets value at path (a new member, or the member replaced; "-" as the
// last segment appends to a list).
func (m *Mutation) Add(path string, value any) *Mutation {
	m.patch.push("add", path, value, true, mutationPathProblem)
	return m
}

// Replace replaces the value at path, which must exist.
func (m *Mutation) Replace(path string, value any) *Mutation {
	m.patch.push("replace", path, value, true, mutationPathProblem)
	return m
}

// Remove removes the value at path, which must exist.
func (m *Mutation) Remove(path string) *Mutation {
	m.patch.push("remove", path, nil, false, mutationPathProblem)
	return m
}

// WithWarning adds a warning for humans, recorded on the base object.
func (m *Mutation) WithWarning(warning string) *Mutation {
	m.patch.warnings = append(m.patch.warnings, warning)
	return m
}

// IsEmpty tells whether no operation was added.
func (m *Mutation) IsEmpty() bool { return len(m.patch.operations) == 0 }

// Err is the first mistake made while building (a path outside the
// allowed ones, a value that is not JSON), or nil.
func (m *Mutation) Err() error { return m.patch.problem }

// MutateResponse is the answer as sent (no patch when nothing changes); an
// error (a mistake made while building, or a patch larger than the
// operator takes) is what the SDK answers with INTERNAL.
func (m *Mutation) MutateResponse() (*kplugv1.MutateResponse, error) {
	patch, err := m.patch.encode("the mutation's")
	if err != nil {
		return nil, err
	}
	return &kplugv1.MutateResponse{Patch: patch, Warnings: boundedWarnings(m.patch.warnings)}, nil
}

// mutationPathProblem says why a Mutate patch may not touch path, as the
// operator judges it; empty when it may. Narrower than a default's: the
// whole labels or annotations map would drop the ones kplug and the other
// mutators set, and kplug.io/ keys are how the operator finds its objects.
func mutationPathProblem(path string) string {
	wholeMap := path == "/metadata/labels" || path == "/metadata/annotations"
	kplugKey := strings.HasPrefix(path, "/metadata/labels/kplug.io~1") ||
		strings.HasPrefix(path, "/metadata/annotations/kplug.io~1")
	if defaultPatchPathAllowed(path) && !wholeMap && !kplugKey {
		return ""
	}
	return "a mutation may only change /spec and single labels and annotations, not kplug.io/ ones"
}

// validateMutations: the operator's checks (at most 16, each naming a
// version and kind), and the SDK's own: a [Mutator] and its kinds go
// together, since either alone means a plugin that is never called or a
// kind that is never answered.
func validateMutations(info *Info, plugin Plugin, refuse func(format string, args ...any) error) error {
	if len(info.Mutations) > maxMutations {
		return refuse("%d mutations are declared; at most %d are accepted", len(info.Mutations), maxMutations)
	}
	for i, m := range info.Mutations {
		if m.Version == "" || m.Kind == "" {
			return refuse("mutation #%d (%q, %q) names no version or kind; use kplug.FromAPIVersionAndKind(\"apps/v1\", \"Deployment\")", i, m.APIVersion(), m.Kind)
		}
	}
	_, mutates := plugin.(Mutator)
	switch {
	case len(info.Mutations) > 0 && !mutates:
		return refuse("it declares mutations but does not implement kplug.Mutator (a Mutate method)")
	case mutates && len(info.Mutations) == 0:
		return refuse("it implements kplug.Mutator but declares no kind to mutate (Info.Mutations)")
	}
	return nil
}

func (i *Info) mutationsProto() []*kplugv1.Mutation {
	mutations := make([]*kplugv1.Mutation, 0, len(i.Mutations))
	for _, m := range i.Mutations {
		mutations = append(mutations, &kplugv1.Mutation{Kind: m.proto()})
	}
	return mutations
}
