package kplug

import "errors"

// Errors a plugin can meet while starting. The errors [NewServer],
// [Server.Start], [Serve] and [Main] return wrap one of them, with a message
// that names the plugin, the path and what to do; test with [errors.Is].
var (
	// ErrInvalidName: the plugin name is not a DNS label.
	ErrInvalidName = errors.New("invalid plugin name")
	// ErrInvalidConfig: an option or environment variable has an invalid value.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrSocketInUse: another live process serves the plugin's socket; it is
	// never taken over.
	ErrSocketInUse = errors.New("socket in use")
	// ErrNotASocket: something that is not a socket sits where the plugin's
	// socket must go; it is never deleted.
	ErrNotASocket = errors.New("not a socket")
	// ErrInvalidDeclaration: the plugin's hooks, call policies or mutations
	// are ones the operator would refuse (a hook name that is not a DNS
	// label or is declared twice, an unknown phase, hooks without a
	// [HookHandler], a call policy declared twice or with a negative
	// deadline, mutations without a [Mutator] or a [Mutator] without
	// mutations...).
	ErrInvalidDeclaration = errors.New("invalid declaration")
	// ErrSocket: the socket could not be bound for another reason
	// (permissions, a path too long, a missing volume).
	ErrSocket = errors.New("cannot bind the socket")
)

// startupError carries a complete message and the kind it wraps.
type startupError struct {
	kind    error
	message string
	cause   error
}

// Error is the complete message.
func (e *startupError) Error() string { return e.message }

// Unwrap lets errors.Is match the kind and the underlying cause.
func (e *startupError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}
