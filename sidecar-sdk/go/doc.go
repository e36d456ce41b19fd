// Package kplug writes kplug plugins in Go.
//
// A kplug plugin is a gRPC server that a kplug operator delegates the
// reconciliation of a custom resource to. It runs as a sidecar container
// next to the operator and talks to it over Unix sockets in a shared
// directory. This package does the plumbing, so that a plugin is one
// Reconcile method:
//
//   - it serves the kplug.v1.Plugin service on
//     $KPLUG_SOCKET_DIR/plugins/<name>/plugin.sock, removing a socket left by a
//     crashed instance but never a live one or a file that is not a socket;
//   - it registers by heartbeat on the operator's registry.sock, with
//     backoff while the operator is away and again after it restarts;
//   - it answers the operator's probes from the plugin's readiness;
//   - it decodes the base object and its extensions from JSON and builds
//     responses that follow the operator's rules;
//   - a handler's error or panic becomes an OUTCOME_FAILED response with a
//     message, shown on the resource;
//   - on SIGTERM it unregisters, stops taking calls, drains the calls in
//     flight and removes its socket.
//
// A whole plugin:
//
//	func main() {
//		kplug.Main(kplug.Info{
//			Name:    "hello",
//			Version: "1.0.0",
//			Offers:  []kplug.Offer{{Base: kplug.GroupKind{Group: "example.com", Kind: "Greeting"}, Implementation: "Hello"}},
//		}, kplug.ReconcileFunc(func(ctx context.Context, req *kplug.Request) (*kplug.Response, error) {
//			return kplug.OK().WithStatus(map[string]any{"greeting": "hello, " + req.Name()}), nil
//		}))
//	}
//
// The gRPC stubs (package kplugv1) are generated from the repository's
// proto/ directory by `make generate` and are not committed.
//
// The protocol behind it, shared by every kplug SDK, is described in
// docs/protocol.md in the kplug repository.
package kplug

//go:generate make generate
