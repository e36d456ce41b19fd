package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockFileName is the file in a --data-dir that a running kube-testenv
// holds an exclusive lock on (and writes its pid to).
const lockFileName = "kube-testenv.lock"

// lockDataDir creates dir if needed and takes an exclusive, non-blocking
// flock on its lock file, so that two kube-testenv processes never run one
// etcd data directory (which would corrupt it, or fail obscurely). The lock
// goes with the returned file: keep it open for the life of the process.
// The kernel drops it when the process dies, however it dies, so there are
// no stale locks to clean up.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot use the data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot use the data directory %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := "another process"
		if data, readErr := io.ReadAll(io.LimitReader(f, 32)); readErr == nil {
			if pid, convErr := strconv.Atoi(strings.TrimSpace(string(data))); convErr == nil {
				holder = fmt.Sprintf("another kube-testenv (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("the data directory %s is in use by %s; stop that one first, or choose another --data-dir", dir, holder)
		}
		return nil, fmt.Errorf("cannot lock the data directory %s (%s): %w", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// exists says whether path exists (errors other than "not there" count as
// existing: the caller then finds out what is wrong with it).
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
