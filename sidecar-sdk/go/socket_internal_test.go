package kplug

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// socketDir is a short temporary directory: Unix socket paths must stay
// under 108 bytes, and t.TempDir's grow with the test's name.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "kplug-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// staleSocket leaves a socket file nobody listens on at path: what a
// SIGKILLed plugin leaves behind.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	_ = l.Close()
	if info, err := os.Lstat(path); err != nil || info.Mode().Type() != os.ModeSocket {
		t.Fatalf("no stale socket at %s: %v", path, err)
	}
}

func mustBeLive(t *testing.T, path string) {
	t.Helper()
	if live, err := isLive(path); !live || err != nil {
		t.Fatalf("%s should be live: %v, %v", path, live, err)
	}
}

func TestBindCreatesThePluginsDir(t *testing.T) {
	path := filepath.Join(socketDir(t), "plugins", "demo", "plugin.sock")
	l, _, err := bindSocket(path, "demo", originProgram)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	mustBeLive(t, path)
	// plugins/ is open to all and sticky; the plugin's own directory is not.
	for dir, want := range map[string]os.FileMode{
		filepath.Dir(filepath.Dir(path)): 0o777 | os.ModeSticky,
		filepath.Dir(path):               0o755,
	} {
		info, err := os.Stat(dir)
		if err != nil || info.Mode().Perm()|(info.Mode()&os.ModeSticky) != want {
			t.Errorf("%s: mode %v, want %v (%v)", dir, info.Mode(), want, err)
		}
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	path := filepath.Join(socketDir(t), "plugins", "demo", "plugin.sock")
	staleSocket(t, path)
	if live, err := isLive(path); live || err != nil {
		t.Fatalf("a socket nobody listens on must look stale: %v, %v", live, err)
	}
	l, _, err := bindSocket(path, "demo", originProgram)
	if err != nil {
		t.Fatalf("a stale socket must be replaced: %v", err)
	}
	defer func() { _ = l.Close() }()
	mustBeLive(t, path)
}

func TestLiveSocketIsNeverStolen(t *testing.T) {
	path := filepath.Join(socketDir(t), "plugins", "demo", "plugin.sock")
	first, _, err := bindSocket(path, "demo", originProgram)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close() }()
	_, _, err = bindSocket(path, "demo", originProgram)
	if !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("second bind: %v, want ErrSocketInUse", err)
	}
	want := "plugin demo: " + path + " is served by another live process; refusing to take it over"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q, want it to start with %q", err, want)
	}
	mustBeLive(t, path) // the first server still has its socket
	conn, err := first.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
}

func TestNonSocketsAreRefusedAndKept(t *testing.T) {
	for _, kind := range []string{"file", "directory", "symlink", "symlink to a socket"} {
		t.Run(kind, func(t *testing.T) {
			dir := socketDir(t)
			path := filepath.Join(dir, "plugins", "demo", "plugin.sock")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			var err error
			switch kind {
			case "file":
				err = os.WriteFile(path, []byte("precious"), 0o600)
			case "directory":
				err = os.Mkdir(path, 0o755)
			case "symlink":
				err = os.Symlink("/etc/hostname", path)
			case "symlink to a socket":
				target := filepath.Join(dir, "elsewhere.sock")
				staleSocket(t, target)
				err = os.Symlink(target, path)
			}
			if err != nil {
				t.Fatal(err)
			}
			before, _ := os.Lstat(path)
			_, _, err = bindSocket(path, "demo", originProgram)
			if !errors.Is(err, ErrNotASocket) {
				t.Fatalf("bind over a %s: %v, want ErrNotASocket", kind, err)
			}
			want := "plugin demo: " + path + " exists and is not a socket; refusing to delete it"
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q, want it to start with %q", err, want)
			}
			after, statErr := os.Lstat(path)
			if statErr != nil || after.Mode() != before.Mode() {
				t.Fatalf("the %s was touched: %v", kind, statErr)
			}
			if kind == "file" {
				if b, _ := os.ReadFile(path); string(b) != "precious" {
					t.Errorf("the file's content changed: %q", b)
				}
			}
		})
	}
}

func TestTooLongSocketPathIsRefusedWithAHint(t *testing.T) {
	path := filepath.Join(socketDir(t), strings.Repeat("d", 120), "x.sock")
	_, _, err := bindSocket(path, "demo", originProgram)
	if !errors.Is(err, ErrSocket) || !strings.Contains(err.Error(), "longer than 107 bytes") || !strings.Contains(err.Error(), SocketDirEnv) {
		t.Fatalf("bind %s: %v", path, err)
	}
}

func TestRemoveOnlyOurOwnSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "plugins", "demo", "plugin.sock")
	l, _, err := bindSocket(path, "demo", originProgram)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("closing the listener must not unlink the path (a successor may own it by then): %v", err)
	}
	// A successor replaces the stale file and serves on the same path.
	successor, _, err := bindSocket(path, "demo", originProgram)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel often hands the freed inode number straight to the
	// successor's file, so device and inode then match what we recorded.
	// Whether it does here depends on what else the machine is doing, so
	// take the successor's identity as ours: that is the case to prove.
	ours, err := identify(path)
	if err != nil {
		t.Fatal(err)
	}
	if ours.remove() {
		t.Fatal("removed the successor's live socket")
	}
	mustBeLive(t, path)
	_ = successor.Close()
	// Now nobody serves the path: whoever bound it, the file is stale.
	if !ours.remove() {
		t.Fatal("a stale socket at our path was kept")
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there: %v", err)
	}
}

func TestRemoveLeavesAnotherFileAlone(t *testing.T) {
	path := filepath.Join(socketDir(t), "plugins", "demo", "plugin.sock")
	l, ours, err := bindSocket(path, "demo", originProgram)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// Replaced by hand with a regular file, which may well get the freed
	// inode number: it is still not ours to delete.
	if err := os.WriteFile(path, []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ours.remove() {
		t.Fatal("removed a file that is not the socket we bound")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "someone else's" {
		t.Fatalf("the other file was touched: %q, %v", b, err)
	}
}

func TestRemoveOurStaleSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "plugins", "demo", "plugin.sock")
	l, ours, err := bindSocket(path, "demo", originProgram)
	if err != nil {
		t.Fatal(err)
	}
	if ours.remove() {
		t.Fatal("removed the socket while it is still served")
	}
	_ = l.Close()
	if !ours.remove() {
		t.Fatal("our own stale socket was not removed")
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there: %v", err)
	}
	if ours.remove() {
		t.Fatal("removed twice")
	}
}
