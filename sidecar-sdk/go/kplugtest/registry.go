package kplugtest

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// Heartbeat is one heartbeat a [FakeRegistry] received.
type Heartbeat struct {
	At      time.Time
	Request *kplugv1.HeartbeatRequest
}

// Unregister is one Unregister call a [FakeRegistry] received.
type Unregister struct {
	At      time.Time
	Request *kplugv1.UnregisterRequest
}

// Handshake is what a [FakeRegistry] learned by dialing a new instance
// back during its first heartbeat: GetInfo and Probe, or the error.
type Handshake struct {
	// Info is the plugin's GetInfo answer.
	Info *kplugv1.GetInfoResponse
	// Probe is the plugin's Probe answer.
	Probe *kplugv1.ProbeResponse
	// Err is why dialing, GetInfo or Probe failed; Info and Probe are then nil.
	Err error
}

// FakeRegistry is a kplug.v1.Registry served on <socket dir>/registry.sock
// (a real gRPC server on a real Unix socket) that records what plugins
// send. Like the operator, it dials a new instance back during its first
// heartbeat (GetInfo, then Probe) before answering, so a plugin that
// heartbeats before it serves shows up as a failed [Handshake].
type FakeRegistry struct {
	kplugv1.UnimplementedRegistryServer

	socketDir string
	server    *grpc.Server
	done      chan struct{}

	mu          sync.Mutex
	accepted    bool
	reason      string
	interval    time.Duration
	heartbeats  []Heartbeat
	unregisters []Unregister
	handshakes  map[string]Handshake
	changed     chan struct{} // closed and replaced on every record
}

// StartRegistry serves a FakeRegistry in socketDir, accepting every
// plugin, until [FakeRegistry.Stop] or the end of the test.
func StartRegistry(t testing.TB, socketDir string) *FakeRegistry {
	t.Helper()
	path := filepath.Join(socketDir, kplug.RegistrySocket)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("kplugtest: cannot remove %s: %v", path, err)
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("kplugtest: cannot listen on %s: %v", path, err)
	}
	r := &FakeRegistry{
		socketDir:  socketDir,
		server:     grpc.NewServer(),
		done:       make(chan struct{}),
		accepted:   true,
		handshakes: map[string]Handshake{},
		changed:    make(chan struct{}),
	}
	kplugv1.RegisterRegistryServer(r.server, r)
	go func() {
		defer close(r.done)
		_ = r.server.Serve(listener)
	}()
	t.Cleanup(r.Stop)
	return r
}

// Path is the registry's socket.
func (r *FakeRegistry) Path() string { return filepath.Join(r.socketDir, kplug.RegistrySocket) }

// Stop stops serving at once and removes the socket, as a crashed or
// restarting operator would look to plugins. It is idempotent.
func (r *FakeRegistry) Stop() {
	r.server.Stop()
	<-r.done
}

// Answer sets what the registry answers from now on: accepted or not, the
// reason, and the interval it asks for (0: none).
func (r *FakeRegistry) Answer(accepted bool, reason string, interval time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.accepted, r.reason, r.interval = accepted, reason, interval
}

// Heartbeats returns the heartbeats received so far.
func (r *FakeRegistry) Heartbeats() []Heartbeat {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Heartbeat(nil), r.heartbeats...)
}

// Unregisters returns the Unregister calls received so far.
func (r *FakeRegistry) Unregisters() []Unregister {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Unregister(nil), r.unregisters...)
}

// Handshake returns the handshake made with an instance, if any.
func (r *FakeRegistry) Handshake(instanceID string) (Handshake, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.handshakes[instanceID]
	return h, ok
}

// Handshakes counts the instances the registry dialed back.
func (r *FakeRegistry) Handshakes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handshakes)
}

// WaitForHeartbeats waits until at least n heartbeats arrived and returns
// them; the test fails after timeout.
func (r *FakeRegistry) WaitForHeartbeats(t testing.TB, n int, timeout time.Duration) []Heartbeat {
	t.Helper()
	r.wait(t, "heartbeats", func() int { return len(r.heartbeats) }, n, timeout)
	return r.Heartbeats()
}

// WaitForUnregisters waits until at least n Unregister calls arrived and
// returns them; the test fails after timeout.
func (r *FakeRegistry) WaitForUnregisters(t testing.TB, n int, timeout time.Duration) []Unregister {
	t.Helper()
	r.wait(t, "unregisters", func() int { return len(r.unregisters) }, n, timeout)
	return r.Unregisters()
}

func (r *FakeRegistry) wait(t testing.TB, what string, count func() int, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got, changed := count(), r.changed
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("kplugtest: %d %s after %v, wanted %d", got, what, timeout, n)
		}
	}
}

func (r *FakeRegistry) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Heartbeat implements the Registry service.
func (r *FakeRegistry) Heartbeat(ctx context.Context, request *kplugv1.HeartbeatRequest) (*kplugv1.HeartbeatResponse, error) {
	r.mu.Lock()
	_, known := r.handshakes[request.GetInstanceId()]
	r.mu.Unlock()
	if !known {
		handshake := r.handshake(ctx, request)
		r.mu.Lock()
		r.handshakes[request.GetInstanceId()] = handshake
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heartbeats = append(r.heartbeats, Heartbeat{At: time.Now(), Request: request})
	r.notify()
	response := &kplugv1.HeartbeatResponse{Accepted: r.accepted, Reason: r.reason, Ttl: durationpb.New(15 * time.Second)}
	if r.interval > 0 {
		response.Interval = durationpb.New(r.interval)
	}
	return response, nil
}

func (r *FakeRegistry) handshake(ctx context.Context, request *kplugv1.HeartbeatRequest) Handshake {
	conn, err := dial(filepath.Join(r.socketDir, request.GetSocket()))
	if err != nil {
		return Handshake{Err: err}
	}
	defer func() { _ = conn.Close() }()
	client := kplugv1.NewPluginClient(conn)
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, err := client.GetInfo(ctx, &kplugv1.GetInfoRequest{})
	if err != nil {
		return Handshake{Err: status.Convert(err).Err()}
	}
	probe, err := client.Probe(ctx, &kplugv1.ProbeRequest{})
	if err != nil {
		return Handshake{Err: status.Convert(err).Err()}
	}
	return Handshake{Info: info, Probe: probe}
}

// Unregister implements the Registry service; removed tells whether the
// instance had heartbeated.
func (r *FakeRegistry) Unregister(_ context.Context, request *kplugv1.UnregisterRequest) (*kplugv1.UnregisterResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unregisters = append(r.unregisters, Unregister{At: time.Now(), Request: request})
	r.notify()
	_, known := r.handshakes[request.GetInstanceId()]
	return &kplugv1.UnregisterResponse{Removed: known}, nil
}
