package kplug

import (
	"context"
	"sync"
)

// Plugin is your plugin's logic. Reconcile is required; implement
// [Finalizer] and [ReadinessChecker] too when you need them.
//
// Calls may run concurrently (up to the operator's in-flight bound), for
// different objects, and must be idempotent: the same request can come
// again. ctx carries the operator's deadline and is cancelled if the
// operator gives up or the plugin is stopped.
//
// A returned error, or a panic, becomes an OUTCOME_FAILED response carrying
// the error's message, shown on the resource; the operator retries with
// backoff. The plugin keeps serving.
type Plugin interface {
	// Reconcile drives the real world towards the base object's spec and
	// reports what it achieved.
	Reconcile(ctx context.Context, req *Request) (*Response, error)
}

// Finalizer is implemented by plugins that must clean up before an object
// they reconciled is deleted. Implementing it makes the plugin advertise the
// FINALIZE capability: the operator then adds a finalizer to the object and
// calls Finalize when it is deleted. [OK] lets the object go; anything else
// keeps it. A Finalize response carries only its outcome, message, retry
// delay, events and children.
type Finalizer interface {
	// Finalize cleans up before the base object is deleted, or moved to
	// another implementation (the annotation kplug.io/reselect).
	Finalize(ctx context.Context, req *Request) (*Response, error)
}

// ReadinessChecker is implemented by plugins that are not always ready to
// take work (e.g. while their database is unreachable). The operator probes
// the plugin at registration and on each heartbeat while it is not ready,
// and routes no work to it until it is. Without it, the plugin is always
// ready. Embed a [ReadinessGate] to get one you can flip.
type ReadinessChecker interface {
	// Readiness tells whether the plugin can take work now.
	Readiness(ctx context.Context) Readiness
}

// Readiness is the answer to the operator's Probe.
type Readiness struct {
	// Ready is false while the plugin cannot take work.
	Ready bool
	// Message says why not, for humans.
	Message string
}

// ReadinessGate is a [ReadinessChecker] you set from your own code, e.g.
// from a goroutine watching your database. Its zero value is ready. Embed
// it in your plugin struct and pass the plugin by pointer:
//
//	type MyPlugin struct {
//		kplug.ReadinessGate
//	}
//
//	p := &MyPlugin{}
//	p.SetNotReady("database unreachable")
//
// It is safe for concurrent use; do not copy it after first use.
type ReadinessGate struct {
	mu       sync.RWMutex
	notReady bool
	message  string
}

// SetReady lets the operator route work to the plugin.
func (g *ReadinessGate) SetReady() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.notReady, g.message = false, ""
}

// SetNotReady stops the operator from routing work to the plugin; message
// says why, for humans.
func (g *ReadinessGate) SetNotReady(message string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.notReady, g.message = true, message
}

// Readiness implements [ReadinessChecker].
func (g *ReadinessGate) Readiness(context.Context) Readiness {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return Readiness{Ready: !g.notReady, Message: g.message}
}

// ReconcileFunc turns a function into a [Plugin], for plugins that need
// nothing but Reconcile.
type ReconcileFunc func(ctx context.Context, req *Request) (*Response, error)

// Reconcile calls f.
func (f ReconcileFunc) Reconcile(ctx context.Context, req *Request) (*Response, error) {
	return f(ctx, req)
}
