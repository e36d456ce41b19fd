package kplug

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The plugin's socket file: claiming the path safely, and removing only our
// own. The rule every kplug SDK and the operator share:
//
//   - nothing there: bind;
//   - a socket whose connect is refused (or fails with "no such file"): a
//     crashed instance left it; remove it and bind;
//   - a socket something accepts connections on: another live instance;
//     refuse, never steal it;
//   - anything else (a file, a directory, a symlink): refuse, never delete it.

// liveProbeTimeout bounds the connect that tells a live socket from a stale one.
const liveProbeTimeout = time.Second

// boundSocket is a socket file we bound, identified so that a successor's
// file on the same path is never removed.
type boundSocket struct {
	path        string
	device, ino uint64
	socket      bool // whether the file is a socket (when identified again)
}

// bindSocket applies the rule above and listens on path. plugin names the
// plugin in error messages, origin where the socket dir came from. The
// socket dir must exist: it is the volume shared with the operator, so a
// missing one is a wrong setting, and is never created.
func bindSocket(path, plugin string, origin socketDirOrigin) (*net.UnixListener, *boundSocket, error) {
	if n := len(path); n > maxSocketPathBytes {
		return nil, nil, &startupError{kind: ErrSocket, message: fmt.Sprintf(
			"plugin %s: socket path %s is %d bytes long, longer than %d bytes, the limit of Unix sockets; set %s to a shorter directory",
			plugin, path, n, maxSocketPathBytes, SocketDirEnv)}
	}
	// path is <socket dir>/plugins/<name>/plugin.sock. plugins/ is open to
	// all and sticky (like /tmp): plugins of one pod run as different UIDs,
	// each adds its own directory and can remove only its own. The plugin's
	// directory is writable by this UID only. In Kubernetes both exist
	// already (the plugin's is a volume of its own).
	own := filepath.Dir(path)
	plugins := filepath.Dir(own)
	socketDir := filepath.Dir(plugins)
	if _, err := os.Stat(socketDir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, &startupError{kind: ErrSocket, cause: err, message: "plugin " + plugin + ": " +
			socketDirMissingMessage(socketDir, origin)}
	}
	for _, dir := range []struct {
		path string
		mode os.FileMode
	}{{plugins, 0o777 | os.ModeSticky}, {own, 0o755}} {
		created, err := makeDir(dir.path)
		if err != nil {
			return nil, nil, &startupError{kind: ErrSocket, cause: err, message: fmt.Sprintf(
				"plugin %s: cannot create the socket directory %s: %v; check %s and that the shared volume is mounted and writable",
				plugin, dir.path, err, SocketDirEnv)}
		}
		if created {
			// Only its owner can change its mode, and that is us.
			_ = os.Chmod(dir.path, dir.mode)
		}
	}
	if err := syscall.Access(own, 0o3); err != nil { // W_OK | X_OK
		owner := "another UID"
		if info, statErr := os.Stat(own); statErr == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				owner = fmt.Sprintf("UID %d", st.Uid)
			}
		}
		return nil, nil, &startupError{kind: ErrSocket, cause: err, message: fmt.Sprintf(
			"plugin %s: cannot create a socket in %s: it belongs to %s and this process (UID %d) may not write to it. Another container holds this plugin's name: give each plugin a volume of its own at %s (see docs/security.md)",
			plugin, own, owner, os.Geteuid(), own)}
	}
	if err := claim(path, plugin); err != nil {
		return nil, nil, err
	}
	listener, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			// Another instance bound the path between our check and our bind.
			return nil, nil, inUse(path, plugin)
		}
		return nil, nil, &startupError{kind: ErrSocket, cause: err, message: fmt.Sprintf(
			"plugin %s: cannot listen on %s: %v; check that the socket directory is writable", plugin, path, err)}
	}
	// Closing must not unlink the path: by then it may be a successor's.
	listener.SetUnlinkOnClose(false)
	// The operator runs as another UID: anyone in the pod may connect, and
	// the operator tells callers apart by their credentials (SO_PEERCRED).
	if err := os.Chmod(path, 0o666); err != nil {
		_ = listener.Close()
		return nil, nil, &startupError{kind: ErrSocket, cause: err, message: fmt.Sprintf(
			"plugin %s: cannot make %s connectable: %v", plugin, path, err)}
	}
	bound, err := identify(path)
	if err != nil {
		_ = listener.Close()
		return nil, nil, &startupError{kind: ErrSocket, cause: err, message: fmt.Sprintf(
			"plugin %s: cannot stat the socket %s just bound: %v", plugin, path, err)}
	}
	return listener, bound, nil
}

// removePluginDir removes the plugin's own directory,
// <socket dir>/plugins/<name>/, if it is empty (call it once the socket is
// gone), and says whether it did. One that holds anything (a newer
// instance's socket, a file) stays, and so does one that cannot be removed
// (a volume mounted there, in Kubernetes).
func removePluginDir(own string) bool {
	// rmdir removes only an empty directory, atomically: nothing that
	// appears in it is ever lost.
	return syscall.Rmdir(own) == nil
}

// makeDir creates dir (its parent exists) when it is missing, and says
// whether it did.
func makeDir(dir string) (bool, error) {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

// claim makes path free to bind, or says why it cannot be.
func claim(path, plugin string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &startupError{kind: ErrSocket, cause: err, message: fmt.Sprintf(
			"plugin %s: cannot inspect %s: %v; check the permissions of the socket directory", plugin, path, err)}
	}
	if info.Mode().Type() != fs.ModeSocket {
		return &startupError{kind: ErrNotASocket, message: fmt.Sprintf(
			"plugin %s: %s exists and is not a socket; refusing to delete it. Remove it by hand if it is not needed, or pick another plugin name",
			plugin, path)}
	}
	live, err := isLive(path)
	if err != nil {
		return &startupError{kind: ErrSocket, cause: err, message: fmt.Sprintf(
			"plugin %s: cannot tell whether %s is in use: %v; check the permissions of the socket directory", plugin, path, err)}
	}
	if live {
		return inUse(path, plugin)
	}
	// Stale: left behind by a crashed instance.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &startupError{kind: ErrSocket, cause: err, message: fmt.Sprintf(
			"plugin %s: cannot remove the stale socket %s: %v; check the permissions of the socket directory", plugin, path, err)}
	}
	return nil
}

func inUse(path, plugin string) error {
	return &startupError{kind: ErrSocketInUse, message: fmt.Sprintf(
		"plugin %s: %s is served by another live process; refusing to take it over. Stop the other instance, or give this plugin another name",
		plugin, path)}
}

// isLive tells whether something accepts connections on the socket at path.
// A refused connect, or a missing file, means nobody does; a connect that
// times out or finds the backlog full means a busy, live server. Other
// errors (e.g. permission denied) are returned: it cannot be told.
func isLive(path string) (bool, error) {
	conn, err := net.DialTimeout("unix", path, liveProbeTimeout)
	if err == nil {
		_ = conn.Close()
		return true, nil
	}
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		return false, nil
	case errors.Is(err, syscall.EAGAIN), errors.As(err, &netErr) && netErr.Timeout():
		return true, nil
	}
	return false, err
}

func identify(path string) (*boundSocket, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("no inode information for %s", path)
	}
	return &boundSocket{
		path:   path,
		device: uint64(st.Dev), // Dev is uint64 on some platforms only
		ino:    st.Ino,
		socket: info.Mode().Type() == fs.ModeSocket,
	}, nil
}

// remove deletes the socket file if it is still the one we bound and nobody
// serves on it (call it once our server is stopped). It reports whether it
// removed the file.
func (b *boundSocket) remove() bool {
	now, err := identify(b.path)
	if err != nil || now.device != b.device || now.ino != b.ino || !now.socket {
		return false // gone, or replaced since (by a newer instance, or by hand)
	}
	// Inode numbers are reused at once, so the same number does not prove
	// it is still our file: a live server on it is a successor's.
	if live, err := isLive(b.path); live || err != nil {
		return false
	}
	return os.Remove(b.path) == nil
}
