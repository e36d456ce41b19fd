// Command sdkecho is the Go SDK's side of the polyglot benchmark: a plugin
// served by [kplug.Main], the SDK's normal path, on
// $KPLUG_SOCKET_DIR/plugins/echo/plugin.sock. Nothing registers it (the
// benchmark runs no operator): its heartbeats fail and back off in the
// background, up to one attempt per heartbeat interval.
package main

import (
	"context"

	"github.com/kplug/kplug/sidecar-sdk/go"
)

// echo decodes the object and echoes its spec into the status.
type echo struct{}

func (echo) Reconcile(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	return kplug.OK().WithStatus(map[string]any{"echo": req.Spec()}), nil
}

func main() {
	kplug.Main(kplug.Info{
		Name:    "echo",
		Version: "1.0.0",
		Offers: []kplug.Offer{{
			Base:           kplug.GroupKind{Group: "myorg.org", Kind: "DatabaseTable"},
			Implementation: "Echo",
		}},
	}, echo{})
}
