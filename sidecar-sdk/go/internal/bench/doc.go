// Package bench holds the Go servers of the polyglot benchmark
// (sidecar-sdk/benches/polyglot.rs, `make bench-polyglot`): the Go SDK's
// echo plugin (sdkecho) and the same kplug.v1.Plugin service in bare grpc-go,
// its baselines: alone (bareecho) and with encoding/json (barejsonecho). The
// Rust driver starts each as a process and times Reconcile calls over their
// Unix sockets.
//
// All three answer Reconcile with the object echoed into the status: the
// SDK one decodes the object and returns {"echo": spec} (what the Rust SDK's
// bench plugin does), bareecho copies the object's bytes, so the difference
// between the two is what the SDK adds on top of grpc-go, and barejsonecho
// decodes and encodes {"echo": spec} with encoding/json, so the difference
// to it is what the SDK costs against the same plugin written by hand.
package bench
