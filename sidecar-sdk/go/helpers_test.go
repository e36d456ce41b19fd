package kplug_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/internal/conformance"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// TestMain doubles as the plugin processes the tests start: the test binary
// re-executed with KPLUG_TEST_PLUGIN set runs that plugin with kplug.Main,
// as a real plugin's main would, instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("KPLUG_TEST_PLUGIN") {
	case "":
		os.Exit(m.Run())
	case "conformance":
		conformance.Main()
	case "slow":
		kplug.Main(kplug.Info{Name: "slow", Version: "1.0.0", Offers: []kplug.Offer{{
			Base: kplug.GroupKind{Group: "test.kplug.dev", Kind: "Nap"}, Implementation: "Slow",
		}}}, kplug.ReconcileFunc(slowReconcile))
	default:
		fmt.Fprintf(os.Stderr, "unknown KPLUG_TEST_PLUGIN %q\n", os.Getenv("KPLUG_TEST_PLUGIN"))
		os.Exit(2)
	}
	os.Exit(0)
}

// slowReconcile sleeps for spec.sleepSeconds (not interrupted by ctx, as a
// handler stuck in a blocking driver would be) and answers "slept".
func slowReconcile(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	var spec struct {
		SleepSeconds float64 `json:"sleepSeconds"`
	}
	if err := req.DecodeSpec(&spec); err != nil {
		return nil, err
	}
	time.Sleep(time.Duration(spec.SleepSeconds * float64(time.Second)))
	return kplug.OK().WithMessage("slept"), nil
}

func nap(seconds float64) *kplugv1.ReconcileRequest {
	return &kplugv1.ReconcileRequest{Implementation: "Slow", Object: mustJSON(map[string]any{
		"apiVersion": "test.kplug.dev/v1", "kind": "Nap",
		"metadata": map[string]any{"name": "n", "namespace": "default"},
		"spec":     map[string]any{"sleepSeconds": seconds},
	})}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// logBuffer collects a server's log records as text, for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the records containing s.
func (b *logBuffer) lines(s string) []string {
	var found []string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, s) {
			found = append(found, line)
		}
	}
	return found
}

// withLogs logs at Debug level into a buffer (and, with -v, to the test log).
func withLogs(t *testing.T) (kplug.Option, *logBuffer) {
	buf := &logBuffer{}
	handler := slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("plugin logs:\n%s", buf)
		}
	})
	return kplug.WithLogger(slog.New(handler)), buf
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
