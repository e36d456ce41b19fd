package kplug

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The socket dir, as a new user meets it: a plugin started before its
// operator (or beside the wrong directory) says once, at Warn level, where
// it looks for the registry and where that came from; a socket dir that
// does not exist is a start-up error, and is never created; a plugin that
// stops cleanly leaves no socket and no empty directory behind.

// records collects slog records as text lines, at Debug level.
type records struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *records) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

// with returns the lines holding text.
func (r *records) with(text string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var found []string
	for _, line := range strings.Split(r.buf.String(), "\n") {
		if strings.Contains(line, text) {
			found = append(found, line)
		}
	}
	return found
}

func loggedServer(t *testing.T, opts ...Option) (*Server, *records) {
	t.Helper()
	logs := &records{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]Option{WithLogger(logger), WithGracePeriod(0), WithHeartbeatInterval(200 * time.Millisecond)}, opts...)
	s, err := NewServer(Info{Name: "quiet", Version: "1", Offers: []Offer{{Base: GroupKind{Group: "example.com", Kind: "Greeting"}, Implementation: "Quiet"}}},
		ReconcileFunc(nil), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("plugin logs:\n%s", logs.with(""))
		}
	})
	return s, logs
}

func TestWithoutARegistryThePluginWarnsOnceWhereItLooksThenRetriesAtDebug(t *testing.T) {
	for _, origin := range []socketDirOrigin{originEnvironment, originProgram} {
		t.Run(string(origin), func(t *testing.T) {
			dir := socketDir(t)
			var s *Server
			var logs *records
			if origin == originEnvironment {
				t.Setenv(SocketDirEnv, dir)
				s, logs = loggedServer(t)
			} else {
				s, logs = loggedServer(t, WithSocketDir(dir))
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1200 * time.Millisecond) // retries after 0.1, 0.2, 0.2... s
			if err := s.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := registryWaitingMessage(dir, origin)
			warned := logs.with(want)
			if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") {
				t.Fatalf("want one warning %q, got %q", want, warned)
			}
			if !strings.Contains(want, filepath.Join(dir, "registry.sock")) {
				t.Errorf("%q does not name the registry", want)
			}
			if origin == originEnvironment && !strings.Contains(want, "(from KPLUG_SOCKET_DIR)") {
				t.Errorf("%q does not say where the directory came from", want)
			}
			retries := logs.with("heartbeat failed")
			if len(retries) < 3 {
				t.Errorf("%d retries logged", len(retries))
			}
			for _, line := range append(retries, logs.with("registry")...) {
				if strings.Contains(line, "level=INFO") {
					t.Errorf("at Info level: %s", line)
				}
			}
		})
	}
}

func TestAMissingSocketDirIsAStartupErrorAndIsNotCreated(t *testing.T) {
	dir := socketDir(t)
	missing := filepath.Join(dir, "sockets")
	t.Setenv(SocketDirEnv, missing)
	s, _ := loggedServer(t)
	err := s.Start()
	want := "plugin quiet: " + socketDirMissingMessage(missing, originEnvironment)
	if !errors.Is(err, ErrSocket) || !errors.Is(err, fs.ErrNotExist) || err.Error() != want {
		t.Fatalf("Start: %v, want %q", err, want)
	}
	s, _ = loggedServer(t, WithSocketDir(missing))
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), "(set by the program; KPLUG_SOCKET_DIR is not read)") {
		t.Fatalf("Start: %v", err)
	}
	if _, err := os.Lstat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s was created: %v", missing, err)
	}
	// plugins/ in an existing socket dir is the plugin's to create.
	s, _ = loggedServer(t, WithSocketDir(dir))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	_ = s.Stop(context.Background())
	if info, err := os.Stat(filepath.Join(dir, "plugins")); err != nil || !info.IsDir() {
		t.Fatalf("plugins/: %v", err)
	}
}

func TestACleanStopRemovesTheSocketAndTheEmptiedPluginDirectory(t *testing.T) {
	dir := socketDir(t)
	own := filepath.Join(dir, "plugins", "quiet")
	s, _ := loggedServer(t, WithSocketDir(dir))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(own); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is left behind: %v", own, err)
	}
	if info, err := os.Stat(filepath.Join(dir, "plugins")); err != nil || !info.IsDir() {
		t.Errorf("plugins/ is shared and must stay: %v", err)
	}

	// A directory that holds anything else stays, with what it holds.
	s, _ = loggedServer(t, WithSocketDir(dir))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(own, "notes")
	if err := os.WriteFile(notes, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "kept" {
		t.Errorf("notes: %q, %v", b, err)
	}
	if _, err := os.Lstat(s.SocketPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is left behind: %v", err)
	}
}

func TestOnlyAStartingPluginSaysTheRegistryIsMissing(t *testing.T) {
	dir := socketDir(t)
	logs := &records{}
	h := newHeartbeater(filepath.Join(dir, RegistrySocket), nil, time.Second,
		slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h.socketDir, h.origin = dir, originDefault
	unavailable := errors.New("connection refused")
	h.logFailure(context.Background(), stateRegistered, unavailable)
	h.logFailure(context.Background(), stateRefused, unavailable)
	h.logFailure(context.Background(), stateUnreachable, unavailable)
	if got := logs.with("no operator registry"); len(got) != 0 {
		t.Errorf("an operator that answered before is lost, not missing: %q", got)
	}
	if got := logs.with("lost the operator"); len(got) != 2 {
		t.Errorf("lost: %q", got)
	}
	h.logFailure(context.Background(), stateStarting, unavailable)
	want := registryWaitingMessage(dir, originDefault)
	if got := logs.with(want); len(got) != 1 || !strings.Contains(got[0], "level=WARN") {
		t.Errorf("starting: %q, want %q", got, want)
	}
	if !strings.Contains(want, "KPLUG_SOCKET_DIR is not set; the default is /var/run/kplug") {
		t.Errorf("%q", want)
	}
}
