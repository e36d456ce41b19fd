// Package bench holds the Go servers of the polyglot benchmark
// (sidecar-sdk/benches/polyglot.rs, `make bench`): the Go SDK's echo plugin
// (sdkecho) and the same kplug.v1.Plugin service in bare grpc-go (bareecho),
// its baseline. The Rust driver starts each as a process and times
// Reconcile calls over their Unix sockets.
//
// Both answer Reconcile with the object echoed into the status: the SDK one
// decodes the object and returns {"echo": spec} (what the Rust SDK's bench
// plugin does), the bare one copies the object's bytes, so the difference
// between the two is what the SDK adds on top of grpc-go.
package bench
