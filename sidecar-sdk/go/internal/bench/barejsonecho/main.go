// Command barejsonecho is the second baseline of the Go SDK in the polyglot
// benchmark: the kplug.v1.Plugin service in bare grpc-go with the standard
// encoding/json, what a plugin author would write without the SDK. Reconcile
// decodes the object into a map[string]any and answers the status
// {"echo": spec}, encoded by encoding/json, as the SDK's echo plugin does.
// It serves on the Unix socket $KPLUG_BENCH_SOCKET until SIGTERM or SIGINT.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

type bareJSON struct {
	kplugv1.UnimplementedPluginServer
}

func (bareJSON) GetInfo(context.Context, *kplugv1.GetInfoRequest) (*kplugv1.GetInfoResponse, error) {
	return &kplugv1.GetInfoResponse{}, nil
}

func (bareJSON) Probe(context.Context, *kplugv1.ProbeRequest) (*kplugv1.ProbeResponse, error) {
	return &kplugv1.ProbeResponse{Ready: true}, nil
}

func (bareJSON) Reconcile(_ context.Context, in *kplugv1.ReconcileRequest) (*kplugv1.ReconcileResponse, error) {
	var object map[string]any
	if err := json.Unmarshal(in.GetObject(), &object); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "the object is not a JSON object: %v", err)
	}
	echo, err := json.Marshal(map[string]any{"echo": object["spec"]})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding the status: %v", err)
	}
	return &kplugv1.ReconcileResponse{Outcome: kplugv1.Outcome_OUTCOME_OK, Status: echo}, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "barejsonecho:", err)
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
	kplugv1.RegisterPluginServer(server, bareJSON{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		server.Stop() // also closes the listener, which removes the socket
	}()
	return server.Serve(listener)
}
