package kplug_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugtest"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// startProcess runs this test binary as a plugin process (see TestMain)
// with env added to the environment; it is killed when the test ends.
func startProcess(t *testing.T, env ...string) (*exec.Cmd, *logBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stderr := &logBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("plugin process stderr:\n%s", stderr)
		}
	})
	return cmd, stderr
}

// exitCode waits for cmd, failing the test after timeout.
func exitCode(t *testing.T, cmd *exec.Cmd, timeout time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the plugin process did not exit within %v", timeout)
		return -1
	}
}

func TestSIGTERMUnregistersDrainsAndExitsCleanly(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	process, stderr := startProcess(t, "KPLUG_TEST_PLUGIN=slow", "KPLUG_SOCKET_DIR="+dir, "KPLUG_HEARTBEAT_INTERVAL=0.2")
	hb := registry.WaitForHeartbeats(t, 1, 10*time.Second)[0].Request
	socket := filepath.Join(dir, "plugins", "slow", "plugin.sock")
	client := kplugtest.Dial(t, socket)

	type result struct {
		r   *kplugv1.ReconcileResponse
		err error
	}
	inFlight := make(chan result, 1)
	go func() {
		r, err := client.Reconcile(ctxFor(t, 10*time.Second), nap(2))
		inFlight <- result{r, err}
	}()
	time.Sleep(300 * time.Millisecond) // the call is running in the plugin
	sigterm := time.Now()
	if err := process.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	unregister := registry.WaitForUnregisters(t, 1, 3*time.Second)[0]
	if unregister.Request.GetName() != "slow" || unregister.Request.GetInstanceId() != hb.GetInstanceId() {
		t.Errorf("Unregister %v, want slow's instance %s", unregister.Request, hb.GetInstanceId())
	}
	if d := unregister.At.Sub(sigterm); d > 1500*time.Millisecond {
		t.Errorf("Unregister came %v after SIGTERM", d)
	}
	// New calls are turned away while the old one drains.
	eventually(t, 1500*time.Millisecond, "a new call refused while draining", func() bool {
		_, err := kplugtest.Dial(t, socket).Reconcile(ctxFor(t, time.Second), nap(0))
		return status.Code(err) == codes.Unavailable
	})
	select {
	case <-inFlight:
		t.Fatal("the call in flight ended before the drain; Unregister must come first")
	default:
	}
	got := <-inFlight
	if got.err != nil || got.r.GetOutcome() != kplugv1.Outcome_OUTCOME_OK || got.r.GetMessage() != "slept" {
		t.Errorf("the call in flight: %v, %v", got.r, got.err)
	}
	if code := exitCode(t, process, 10*time.Second); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if _, err := os.Lstat(socket); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
	for _, want := range []string{"SIGTERM received; shutting down", "unregistered from the operator", "stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("a panic in the log:\n%s", stderr)
	}
	beats := len(registry.Heartbeats())
	time.Sleep(400 * time.Millisecond)
	if n := len(registry.Heartbeats()); n != beats {
		t.Errorf("%d heartbeats after exit", n-beats)
	}
}

func TestSecondSIGTERMStopsAtOnce(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	process, _ := startProcess(t, "KPLUG_TEST_PLUGIN=slow", "KPLUG_SOCKET_DIR="+dir, "KPLUG_HEARTBEAT_INTERVAL=0.2")
	registry.WaitForHeartbeats(t, 1, 10*time.Second)
	socket := filepath.Join(dir, "plugins", "slow", "plugin.sock")
	inFlight := make(chan error, 1)
	go func() {
		_, err := kplugtest.Dial(t, socket).Reconcile(ctxFor(t, 40*time.Second), nap(30))
		inFlight <- err
	}()
	time.Sleep(300 * time.Millisecond)
	_ = process.Process.Signal(syscall.SIGTERM)
	registry.WaitForUnregisters(t, 1, 3*time.Second)
	time.Sleep(100 * time.Millisecond)
	_ = process.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, process, 5*time.Second); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if _, err := os.Lstat(socket); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
	select {
	case err := <-inFlight:
		if err == nil {
			t.Error("the abandoned 30 s call succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Error("the abandoned call is still waiting")
	}
}

func TestStartupErrorExits1WithAMessage(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	path := filepath.Join(dir, "plugins", "slow", "plugin.sock")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	process, stderr := startProcess(t, "KPLUG_TEST_PLUGIN=slow", "KPLUG_SOCKET_DIR="+dir)
	if code := exitCode(t, process, 10*time.Second); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if want := "plugin slow: " + path + " exists and is not a socket"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != "not a socket" {
		t.Error("the file was touched")
	}
}
