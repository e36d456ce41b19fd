// Command conformance-plugin runs the Go SDK's conformance plugin (see
// sidecar-sdk/conformance/README.md):
//
//	KPLUG_SOCKET_DIR=/tmp/kc go run ./internal/conformance/cmd/conformance-plugin
package main

import "github.com/kplug/kplug/sidecar-sdk/go/internal/conformance"

func main() { conformance.Main() }
