// Command bareecho is the baseline of the Go SDK in the polyglot benchmark:
// the kplug.v1.Plugin service in bare grpc-go, with the same generated
// messages, answering Reconcile with the object's bytes as the status. It
// serves on the Unix socket $KPLUG_BENCH_SOCKET until SIGTERM or SIGINT.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

type bare struct {
	kplugv1.UnimplementedPluginServer
}

func (bare) Probe(context.Context, *kplugv1.ProbeRequest) (*kplugv1.ProbeResponse, error) {
	return &kplugv1.ProbeResponse{Ready: true}, nil
}

func (bare) Reconcile(_ context.Context, in *kplugv1.ReconcileRequest) (*kplugv1.ReconcileResponse, error) {
	return &kplugv1.ReconcileResponse{Outcome: kplugv1.Outcome_OUTCOME_OK, Status: in.GetObject()}, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bareecho:", err)
		os.Exit(1)
	}
}

func run() error {
	path := os.Getenv("KPLUG_BENCH_SOCKET")
	if path == "" {
		return fmt.Errorf("set KPLUG_BENCH_SOCKET to the Unix socket to serve on")
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	kplugv1.RegisterPluginServer(server, bare{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		server.Stop() // also closes the listener, which removes the socket
	}()
	return server.Serve(listener)
}
