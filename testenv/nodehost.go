package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// The host-wide things a node changes, and how kube-testenv puts them back.
//
// A kubelet, containerd and the CNI plugins were written for machines that
// are nodes and nothing else: they set global sysctls, write fixed host paths
// and create cgroups. kube-testenv records the state of each before the node
// starts and restores it when the node stops, so that a test run leaves the
// machine as it found it. Everything else (containerd's and the kubelet's
// state, the pod logs, the CNI IPAM data) is kept under the node's own
// directory, removed at exit.

// hostSysctls are the sysctls the kubelet (vm.overcommit_memory,
// kernel.panic, kernel.panic_on_oops) and the CNI bridge plugin
// (net.ipv4.ip_forward) set.
var hostSysctls = []string{
	"vm/overcommit_memory",
	"kernel/panic",
	"kernel/panic_on_oops",
	"net/ipv4/ip_forward",
}

// hostPath is a fixed path the kubelet, containerd or its shims create
// whatever they are told.
type hostPath struct {
	path string
	// all: removed with its contents when the node created it. Otherwise
	// it must be empty by the time the node's pods are gone: anything left
	// is a leak to report, not to remove blindly (a network namespace
	// still mounted, another engine's shim socket).
	all bool
}

// hostPaths are removed in this order (children before parents) when the
// node created them: the container log symlinks, the network namespace
// mount points, libcni's result cache, the kubelet's device plugin socket
// (its directory is fixed, whatever --root-dir says) and the shims' runc
// state and sockets.
var hostPaths = []hostPath{
	{"/var/log/containers", false},
	{"/var/run/netns", false},
	{"/var/lib/cni", true},
	{"/var/lib/kubelet/device-plugins", true},
	{"/var/lib/kubelet", false},
	{"/run/containerd/runc/k8s.io", true},
	{"/run/containerd/runc", false},
	{"/run/containerd/s", false},
	{"/run/containerd", false},
}

// hostState is what the machine looked like before the node started.
type hostState struct {
	sysctls map[string]string
	// existed records which of hostPaths were already there.
	existed map[string]bool
	// cgroups are the cgroup v1 hierarchies (or the v2 root) and whether
	// a kubepods group already existed in each.
	cgroups map[string]bool
	// netns are the network namespaces named in /var/run/netns.
	netns map[string]bool
}

func recordHost() (*hostState, error) {
	h := &hostState{
		sysctls: map[string]string{},
		existed: map[string]bool{},
		cgroups: map[string]bool{},
	}
	for _, key := range hostSysctls {
		value, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil {
			return nil, fmt.Errorf("reading sysctl %s: %w", key, err)
		}
		h.sysctls[key] = strings.TrimSpace(string(value))
	}
	for _, p := range hostPaths {
		_, err := os.Lstat(p.path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		h.existed[p.path] = err == nil
	}
	for _, root := range cgroupRoots() {
		h.cgroups[root] = exists(filepath.Join(root, "kubepods"))
	}
	names, err := listDir("/var/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	h.netns = names
	return h, nil
}

// newNetworkNamespaces lists the network namespaces created since
// recordHost: the node's pods'.
func (h *hostState) newNetworkNamespaces() []string {
	names, _ := listDir("/var/run/netns")
	var added []string
	for name := range names {
		if !h.netns[name] {
			added = append(added, name)
		}
	}
	sort.Strings(added)
	return added
}

// restore puts back what recordHost saw, and reports what it could not.
// Called after every node process has stopped.
func (h *hostState) restore(nodeDir string) []error {
	var errs []error
	keys := make([]string, 0, len(h.sysctls))
	for key := range h.sysctls {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(h.sysctls[key]+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring sysctl %s to %s: %w", key, h.sysctls[key], err))
		}
	}
	// Container log symlinks point into the node's own log directory;
	// anything else in /var/log/containers belongs to someone else.
	if names, err := listDir("/var/log/containers"); err == nil {
		for name := range names {
			path := filepath.Join("/var/log/containers", name)
			if target, err := os.Readlink(path); err == nil && strings.HasPrefix(target, nodeDir+"/") {
				if err := os.Remove(path); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, p := range hostPaths {
		if h.existed[p.path] {
			continue
		}
		remove := os.Remove
		if p.all {
			remove = os.RemoveAll
		}
		if err := remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", p.path, err))
		}
	}
	for root, existed := range h.cgroups {
		if !existed {
			if err := removeCgroupTree(filepath.Join(root, "kubepods")); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// cgroupRoots lists where cgroup trees are mounted: each v1 hierarchy, or the
// v2 unified root.
func cgroupRoots() []string {
	if exists("/sys/fs/cgroup/cgroup.controllers") {
		return []string{"/sys/fs/cgroup"}
	}
	var roots []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		path := filepath.Join("/sys/fs/cgroup", e.Name())
		// Skip the symlinks of co-mounted controllers (cpu -> cpu,cpuacct).
		if info, err := os.Lstat(path); err == nil && info.IsDir() {
			roots = append(roots, path)
		}
	}
	return roots
}

// removeCgroupTree removes a cgroup and its descendants, deepest first (a
// cgroup is removed with rmdir, and only once it has no children and no
// processes).
func removeCgroupTree(root string) error {
	if !exists(root) {
		return nil
	}
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing cgroup %s: %w", root, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}

// unmountUnder detaches every mount at or below dir, deepest first:
// containerd's overlay root filesystems and sandbox /dev/shm, the kubelet's
// volumes. Normally none is left once the pods are removed; this is for a
// node whose kubelet or containerd did not stop cleanly.
func unmountUnder(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mounts[i], err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir, in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		// Field 5 is the mount point, with spaces and the like octal-escaped.
		point := unescapeMountPath(fields[4])
		if point == dir || strings.HasPrefix(point, dir+"/") {
			mounts = append(mounts, point)
		}
	}
	return mounts, scanner.Err()
}

func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func listDir(path string) (map[string]bool, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names, nil
}

// command runs a host tool (ip, iptables, ctr) and returns its error with
// its output, which names what went wrong.
func command(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
