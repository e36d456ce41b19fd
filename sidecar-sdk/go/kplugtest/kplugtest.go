// Package kplugtest helps test kplug plugins and SDKs with real sockets and
// real gRPC: short socket dirs, a fake operator registry that records what
// plugins send and dials them back like the operator does, an in-process
// plugin server, and a Plugin client.
//
//	func TestMyPlugin(t *testing.T) {
//		dir := kplugtest.SocketDir(t)
//		registry := kplugtest.StartRegistry(t, dir)
//		server := kplugtest.StartPlugin(t, dir, myInfo, &MyPlugin{})
//		registry.WaitForHeartbeats(t, 1, 5*time.Second)
//		client := kplugtest.Dial(t, server.SocketPath())
//		resp, err := client.Reconcile(ctx, &kplugv1.ReconcileRequest{...})
//		...
//	}
package kplugtest

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// SocketDir creates a socket dir for one test, removed when it ends. It is
// made under /tmp (not t.TempDir, whose paths grow with the test's name):
// Unix socket paths must stay under 108 bytes.
func SocketDir(t testing.TB) string {
	t.Helper()
	parent := "/tmp"
	if info, err := os.Stat(parent); err != nil || !info.IsDir() {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "kplug-")
	if err != nil {
		t.Fatalf("kplugtest: cannot create a socket dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// StartPlugin starts plugin in socketDir (with a 0 s grace period, a
// [Logger] and the given options, which win) and stops it when the test
// ends.
func StartPlugin(t testing.TB, socketDir string, info kplug.Info, plugin kplug.Plugin, opts ...kplug.Option) *kplug.Server {
	t.Helper()
	opts = append([]kplug.Option{kplug.WithSocketDir(socketDir), kplug.WithGracePeriod(0), kplug.WithLogger(Logger(t))}, opts...)
	server, err := kplug.NewServer(info, plugin, opts...)
	if err != nil {
		t.Fatalf("kplugtest: %v", err)
	}
	if err := server.Start(); err != nil {
		t.Fatalf("kplugtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = server.Stop(ctx)
	})
	return server
}

// Logger is a logger for the plugins of one test, at Debug level. Its
// records are shown in the test's output when the test fails or runs with
// -v (not as they happen: a plugin's goroutines may outlive the test).
func Logger(t testing.TB) *slog.Logger {
	buf := &syncBuffer{}
	t.Cleanup(func() {
		if logs := buf.String(); logs != "" && (t.Failed() || testing.Verbose()) {
			t.Logf("plugin logs:\n%s", logs)
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Dial opens a Plugin client on the socket at path, as the operator does
// (with a plain "localhost" :authority); it is closed when the test ends.
func Dial(t testing.TB, path string) kplugv1.PluginClient {
	t.Helper()
	conn, err := dial(path)
	if err != nil {
		t.Fatalf("kplugtest: cannot dial %s: %v", path, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return kplugv1.NewPluginClient(conn)
}

func dial(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(kplug.MaxMessageBytes), grpc.MaxCallSendMsgSize(kplug.MaxMessageBytes)),
	)
}
