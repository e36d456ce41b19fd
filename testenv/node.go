package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A real node next to the control plane (--node): containerd (Debian's
// package) with runc, a CNI bridge and a locally built pause image; a
// kubelet, kube-controller-manager and kube-scheduler built from the same
// k8s.io/kubernetes module as the API server (`make node-binaries`).
//
// Pods get addresses on the bridge and reach the API server the way they
// would in any cluster, at the `kubernetes` Service (10.96.0.1:443): an
// iptables DNAT rule sends that to the API server on 127.0.0.1. No packet
// and no DNS query leaves the machine: pods get no masquerading and a
// resolv.conf that points at their own loopback.
//
// The node is root-only (containers, mounts, cgroups) and one per machine
// (the bridge and the kubelet's port are fixed).

const (
	nodeBridge   = "ktenv0"
	nodeSubnet   = "10.88.0.0/16"
	nodeIP       = "10.88.0.1"
	apiServiceIP = "10.96.0.1"
	// serviceRange is the API server's --service-cluster-ip-range. Pods get
	// a route to it through the node and no default route: what is not on
	// the bridge or a Service address is unreachable, so nothing a pod
	// sends can be forwarded off the machine.
	serviceRange   = "10.96.0.0/16"
	natChain       = "KUBE-TESTENV"
	kubeletPort    = 10250
	nodeReadyLimit = 120 * time.Second
	// componentStopTimeout bounds how long each node process gets after
	// SIGTERM before it is killed.
	componentStopTimeout = 10 * time.Second
)

// nodeOptions are the --node flags.
type nodeOptions struct {
	enabled bool
	// binDir holds kubelet, kube-controller-manager, kube-scheduler and
	// pause; default: the directory of kube-testenv itself.
	binDir string
	// images are loaded from the local Docker engine into containerd.
	images []string
	// hostPorts are loopback ports of the machine that pods reach at the
	// node's address (a database on 127.0.0.1, say).
	hostPorts []int
}

// node is a running node: its processes and what to undo when it stops.
type node struct {
	dir      string
	name     string
	say      func(string, ...any)
	host     *hostState
	procs    []*process // in start order; stopped in reverse
	socket   string     // containerd's
	natRules [][]string // the -A rules added to natChain's callers
	bridge   bool
	stopped  sync.Once
}

// nodeBinaries are the node's executables from `make node-binaries`.
var nodeBinaries = []string{"kubelet", "kube-controller-manager", "kube-scheduler", "pause"}

// hostTools are the node's executables from Debian packages, with the
// package that has each.
var hostTools = map[string]string{
	"containerd": "containerd",
	"ctr":        "containerd",
	"runc":       "runc",
	"iptables":   "iptables",
	"ip":         "iproute2",
}

// cniPlugins are the CNI plugins the node's network uses
// (containernetworking-plugins).
var cniPlugins = []string{"bridge", "host-local", "loopback"}

const cniBinDir = "/usr/lib/cni"

// checkNode fails early, with what to do, when the node cannot run here.
func checkNode(o *nodeOptions) error {
	if os.Geteuid() != 0 {
		return errors.New("--node runs containers, mounts and a network bridge: run kube-testenv as root")
	}
	if o.binDir == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding kube-testenv's own directory: %w (give --node-bin-dir)", err)
		}
		o.binDir = filepath.Dir(self)
	}
	var missing []string
	for _, name := range nodeBinaries {
		if !exists(filepath.Join(o.binDir, name)) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("--node needs %s in %s: build them with `make node-binaries` (or point --node-bin-dir at them)", strings.Join(missing, ", "), o.binDir)
	}
	packages := map[string]bool{}
	for tool, pkg := range hostTools {
		if _, err := exec.LookPath(tool); err != nil {
			packages[pkg] = true
		}
	}
	for _, plugin := range cniPlugins {
		if !exists(filepath.Join(cniBinDir, plugin)) {
			packages["containernetworking-plugins"] = true
		}
	}
	if len(packages) > 0 {
		var names []string
		for pkg := range packages {
			names = append(names, pkg)
		}
		return fmt.Errorf("--node needs Debian packages that are missing: apt-get install %s", strings.Join(names, " "))
	}
	if len(o.images) > 0 {
		if _, err := exec.LookPath("docker"); err != nil {
			return errors.New("--load-image reads images from the Docker engine, but the docker CLI is missing")
		}
	}
	if exists("/sys/class/net/" + nodeBridge) {
		return fmt.Errorf("the network bridge %s exists: another kube-testenv --node runs on this machine, or one was killed before it could clean up (then: ip link delete %s)", nodeBridge, nodeBridge)
	}
	return nil
}

// nodeAPIServerArgs are the API server flags a node needs: client
// credentials for the kubelet (logs, exec) and its address, which is the
// bridge's, never a name looked up in DNS.
func nodeAPIServerArgs(dir string) []string {
	return []string{
		"--kubelet-client-certificate=" + filepath.Join(dir, "admin.crt"),
		"--kubelet-client-key=" + filepath.Join(dir, "admin.key"),
		"--kubelet-preferred-address-types=InternalIP",
	}
}

// prepareNode writes the files the API server needs before it starts.
func prepareNode(dir string, pki *pkiFiles) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.crt"), pki.adminCertPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "admin.key"), pki.adminKeyPEM, 0o600)
}

// startNode starts the node once the API server at server (on loopback port
// apiPort) is ready, and waits until the node is Ready. On error, whatever
// was started is stopped again.
func startNode(ctx context.Context, o nodeOptions, dir, server string, apiPort int, pki *pkiFiles, client *http.Client, say func(string, ...any)) (n *node, err error) {
	start := time.Now()
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading the host name (the node's name): %w", err)
	}
	n = &node{dir: dir, name: strings.ToLower(hostname), say: say, socket: filepath.Join(dir, "containerd.sock")}
	if n.host, err = recordHost(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.stop()
		}
	}()

	if err := n.startNetwork(apiPort, o.hostPorts); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx, o); err != nil {
		return n, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, pki); err != nil {
		return n, err
	}
	if err := n.startControllers(kubeconfig, o, pki); err != nil {
		return n, err
	}
	if err := n.startKubelet(kubeconfig, o, pki); err != nil {
		return n, err
	}
	if err := n.waitReady(ctx, client, server); err != nil {
		return n, err
	}
	say("node %s ready in %.1fs (containerd %s; pods on %s via %s)", n.name, time.Since(start).Seconds(), containerdVersion(), nodeSubnet, nodeBridge)
	return n, nil
}

// startNetwork creates the bridge the CNI plugin attaches pods to, with the
// node's address, and the DNAT rule that makes the `kubernetes` Service
// reach the API server on loopback.
func (n *node) startNetwork(apiPort int, hostPorts []int) error {
	if err := command("ip", "link", "add", nodeBridge, "type", "bridge"); err != nil {
		return err
	}
	n.bridge = true
	if err := command("ip", "addr", "add", nodeIP+"/16", "dev", nodeBridge); err != nil {
		return err
	}
	if err := command("ip", "link", "set", nodeBridge, "up"); err != nil {
		return err
	}
	// Packets from pods may be routed to 127.0.0.1 (the DNAT target) only
	// with route_localnet on the interface they arrive on; the setting goes
	// with the bridge.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+nodeBridge+"/route_localnet", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enabling route_localnet on %s: %w", nodeBridge, err)
	}
	// A chain of our own, so that stopping removes exactly what we added.
	_ = command("iptables", "-w", "-t", "nat", "-X", natChain) // a leftover, empty chain
	if err := command("iptables", "-w", "-t", "nat", "-N", natChain); err != nil {
		return fmt.Errorf("%w: another kube-testenv --node runs on this machine, or one was killed before it could clean up (then: iptables -t nat -D PREROUTING -i %s -j %s; iptables -t nat -F %s; iptables -t nat -X %s)",
			err, nodeBridge, natChain, natChain, natChain)
	}
	if err := command("iptables", "-w", "-t", "nat", "-A", natChain, "-d", apiServiceIP+"/32", "-p", "tcp", "--dport", "443",
		"-j", "DNAT", "--to-destination", "127.0.0.1:"+strconv.Itoa(apiPort)); err != nil {
		return err
	}
	for _, port := range hostPorts {
		p := strconv.Itoa(port)
		if err := command("iptables", "-w", "-t", "nat", "-A", natChain, "-d", nodeIP+"/32", "-p", "tcp", "--dport", p,
			"-j", "DNAT", "--to-destination", "127.0.0.1:"+p); err != nil {
			return err
		}
		// And from 127.0.0.1: a server on loopback trusts (pg_hba.conf,
		// MariaDB's 'user'@'localhost') loopback clients, not the pod
		// network it never listened on.
		snat := []string{"INPUT", "-s", nodeSubnet, "-d", "127.0.0.1/32", "-p", "tcp", "--dport", p, "-j", "SNAT", "--to-source", "127.0.0.1"}
		if err := command("iptables", append([]string{"-w", "-t", "nat", "-A"}, snat...)...); err != nil {
			return err
		}
		n.natRules = append(n.natRules, snat)
	}
	rule := []string{"PREROUTING", "-i", nodeBridge, "-j", natChain}
	if err := command("iptables", append([]string{"-w", "-t", "nat", "-A"}, rule...)...); err != nil {
		return err
	}
	n.natRules = append(n.natRules, rule)
	return nil
}

func (n *node) startContainerd(ctx context.Context, o nodeOptions) error {
	config := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(config, []byte(containerdConfig(n.dir, n.socket)), 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(n.dir, "cni"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "cni", "10-kube-testenv.conflist"), []byte(cniConfig(n.dir)), 0o644); err != nil {
		return err
	}
	p, err := n.run("containerd", "containerd", "--config", config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for n.ctr("version") != nil {
		if p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("containerd did not start; the end of its log:\n%s", tail(p.log, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	archive := filepath.Join(n.dir, "pause.tar")
	if err := writePauseImage(filepath.Join(o.binDir, "pause"), archive); err != nil {
		return err
	}
	if err := n.ctr("images", "import", archive); err != nil {
		return fmt.Errorf("importing the pause image: %w", err)
	}
	for _, image := range o.images {
		if err := n.loadImage(image); err != nil {
			return err
		}
	}
	return nil
}

// loadImage copies an image from the local Docker engine into containerd's
// k8s.io namespace, where the kubelet finds it (pods then need
// imagePullPolicy IfNotPresent or Never: there is no registry).
func (n *node) loadImage(image string) error {
	start := time.Now()
	save := exec.Command("docker", "save", image)
	importer := exec.Command("ctr", "--address", n.socket, "--namespace", "k8s.io", "images", "import", "-")
	pipe, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	importer.Stdin = pipe
	var saveErr, importOut strings.Builder
	save.Stderr = &saveErr
	importer.Stdout = &importOut
	importer.Stderr = &importOut
	if err := save.Start(); err != nil {
		return fmt.Errorf("docker save %s: %w", image, err)
	}
	importErr := importer.Run()
	if err := save.Wait(); err != nil {
		return fmt.Errorf("--load-image %s: docker save: %w: %s (is it built? `docker image ls %s`)", image, err, strings.TrimSpace(saveErr.String()), image)
	}
	if importErr != nil {
		return fmt.Errorf("--load-image %s: importing into containerd: %w: %s", image, importErr, strings.TrimSpace(importOut.String()))
	}
	n.say("loaded %s into the node in %.1fs", image, time.Since(start).Seconds())
	return nil
}

func (n *node) startControllers(kubeconfig string, o nodeOptions, pki *pkiFiles) error {
	if _, err := n.run("kube-controller-manager", filepath.Join(o.binDir, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--service-account-private-key-file="+pki.serviceAccountKey,
		"--root-ca-file="+pki.caCert,
		"--cluster-name=kube-testenv",
		"--v=1",
	); err != nil {
		return err
	}
	_, err := n.run("kube-scheduler", filepath.Join(o.binDir, "kube-scheduler"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	)
	return err
}

func (n *node) startKubelet(kubeconfig string, o nodeOptions, pki *pkiFiles) error {
	// For pods with dnsPolicy Default: the same as clusterDNS below.
	resolv := filepath.Join(n.dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# kube-testenv: no DNS leaves the machine\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		return err
	}
	config := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(kubeletConfig(n.dir, n.socket, pki.caCert, resolv)), 0o600); err != nil {
		return err
	}
	_, err := n.run("kubelet", filepath.Join(o.binDir, "kubelet"),
		"--config="+config,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.dir, "kubelet"),
		// Its serving certificate; the default is /var/lib/kubelet/pki
		// whatever the root dir.
		"--cert-dir="+filepath.Join(n.dir, "kubelet", "pki"),
		"--hostname-override="+n.name,
		"--node-ip="+nodeIP,
		"--v=1",
	)
	return err
}

// waitReady waits for the Node to be Ready and for the default
// ServiceAccount (created by kube-controller-manager): before it exists, no
// pod can be created in the default namespace.
func (n *node) waitReady(ctx context.Context, client *http.Client, server string) error {
	deadline := time.Now().Add(nodeReadyLimit)
	for {
		ready, why := n.isReady(client, server)
		if ready {
			return nil
		}
		for _, p := range n.procs {
			if p.exited() {
				return fmt.Errorf("%s exited while the node was starting; the end of its log:\n%s", p.name, tail(p.log, 30))
			}
		}
		if ctx.Err() != nil {
			return errors.New("stopped while the node was starting")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not ready within %s: %s; logs in %s", n.name, nodeReadyLimit, why, n.dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *node) isReady(client *http.Client, server string) (bool, string) {
	var nodeObject struct {
		Status struct {
			Conditions []struct {
				Type, Status, Message string
			}
		}
	}
	if err := getJSON(client, server+"/api/v1/nodes/"+n.name, &nodeObject); err != nil {
		return false, "the kubelet has not registered the node yet (" + err.Error() + ")"
	}
	for _, c := range nodeObject.Status.Conditions {
		if c.Type == "Ready" && c.Status != "True" {
			return false, "Ready is " + c.Status + ": " + c.Message
		}
	}
	if err := getJSON(client, server+"/api/v1/namespaces/default/serviceaccounts/default", nil); err != nil {
		return false, "no default ServiceAccount yet (" + err.Error() + ")"
	}
	return true, ""
}

func getJSON(client *http.Client, url string, into any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if into == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// stop stops the node and restores the host, in the reverse order of
// start-up: the kubelet and the controllers first (nothing starts pods any
// more), then every pod sandbox is removed through the CRI, then containerd
// and whatever shims are left, then mounts, the network and the host state.
// Problems are reported; the clean-up goes on regardless.
func (n *node) stop() {
	n.stopped.Do(n.cleanUp)
}

func (n *node) cleanUp() {
	start := time.Now()
	var errs []error
	var containerd *process
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		if p.name == "containerd" {
			containerd = p
			continue
		}
		p.stop(componentStopTimeout)
	}
	if containerd != nil && !containerd.exited() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		count, retried, err := removePodSandboxes(ctx, n.socket)
		cancel()
		if retried != nil {
			n.say("pod sandbox removal took more than one pass; the first one met: %v", retried)
		}
		if err != nil {
			errs = append(errs, err)
		} else if count > 0 {
			n.say("removed %d pod sandbox(es)", count)
		}
		// Normally none: whatever the CRI could not remove is killed and
		// deleted through containerd itself, which shuts its shim down
		// cleanly (a shim removes its own socket when it is told to go).
		if deleted, err := n.deleteTasks(); err != nil {
			errs = append(errs, err)
		} else if deleted > 0 {
			errs = append(errs, fmt.Errorf("deleted %d containerd task(s) that the CRI left", deleted))
		}
		containerd.stop(componentStopTimeout)
	}
	// Shims outlive containerd by design (containers survive its
	// restarts); the node's must not outlive the node. A shim killed here
	// cannot remove its socket in containerd's fixed /run/containerd/s, so
	// that is removed too.
	if killed, sockets := killShims(n.socket); killed > 0 {
		errs = append(errs, fmt.Errorf("killed %d containerd shim(s) left running, removed their sockets %v", killed, sockets))
	}
	// Normally none: the sandboxes' removal stopped every container. If
	// that failed, their processes (in the kubelet's cgroups) and network
	// namespaces are still there.
	if killed := killPodProcesses(); killed > 0 {
		errs = append(errs, fmt.Errorf("killed %d container process(es) left running", killed))
	}
	if n.host != nil {
		for _, ns := range n.host.newNetworkNamespaces() {
			if err := command("ip", "netns", "delete", ns); err != nil {
				errs = append(errs, err)
			} else {
				errs = append(errs, fmt.Errorf("deleted network namespace %s, left behind", ns))
			}
		}
	}
	if err := unmountUnder(n.dir); err != nil {
		errs = append(errs, err)
	}
	for _, rule := range n.natRules {
		if err := command("iptables", append([]string{"-w", "-t", "nat", "-D"}, rule...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if len(n.natRules) > 0 {
		if err := command("iptables", "-w", "-t", "nat", "-F", natChain); err != nil {
			errs = append(errs, err)
		} else if err := command("iptables", "-w", "-t", "nat", "-X", natChain); err != nil {
			errs = append(errs, err)
		}
	}
	if n.bridge {
		if err := command("ip", "link", "delete", nodeBridge); err != nil {
			errs = append(errs, err)
		}
	}
	if n.host != nil {
		errs = append(errs, n.host.restore(n.dir)...)
	}
	if err := os.RemoveAll(n.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", n.dir, err))
	}
	for _, err := range errs {
		n.say("node clean-up: %v", err)
	}
	n.say("node stopped and cleaned up in %.1fs", time.Since(start).Seconds())
}

// deleteTasks kills and deletes every task left in the node's containerd
// (namespace k8s.io), so that their shims exit. It says how many there were.
func (n *node) deleteTasks() (int, error) {
	out, err := exec.Command("ctr", "--address", n.socket, "--namespace", "k8s.io", "tasks", "list", "--quiet").Output()
	if err != nil {
		return 0, fmt.Errorf("listing containerd's tasks: %w", err)
	}
	ids := strings.Fields(string(out))
	var errs []error
	for _, id := range ids {
		// A task that has exited already refuses the signal; the delete
		// is what counts.
		_ = n.ctr("tasks", "kill", "--all", "--signal", "SIGKILL", id)
		if err := n.ctr("tasks", "delete", "--force", id); err != nil {
			errs = append(errs, fmt.Errorf("deleting containerd task %s: %w", id, err))
		}
	}
	return len(ids), errors.Join(errs...)
}

// killShims kills the containerd shims serving this node's containerd (those
// whose command line names its socket), waits for them to go and removes
// the sockets they listened on in /run/containerd/s. It returns how many it
// killed and the sockets it removed.
func killShims(socket string) (int, []string) {
	var pids []int
	var sockets []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && strings.Contains(string(cmdline), socket) {
			// Read before the kill: a dead process has no file descriptors.
			sockets = append(sockets, listeningSockets(pid, shimSocketDir)...)
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				pids = append(pids, pid)
			}
		}
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		alive := false
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				alive = true
			}
		}
		if !alive {
			break
		}
	}
	for _, path := range sockets {
		_ = os.Remove(path)
	}
	return len(pids), sockets
}

// shimSocketDir is where containerd's runc shims listen, whatever the
// containerd's own state directory: containerd 1.6 fixes it.
const shimSocketDir = "/run/containerd/s/"

// listeningSockets lists the paths of the Unix sockets below dir that
// process pid holds open, from its file descriptors and /proc/net/unix.
func listeningSockets(pid int, dir string) []string {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	// Num RefCount Protocol Flags Type St Inode Path
	table, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/unix", pid))
	var paths []string
	for _, line := range strings.Split(string(table), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 8 && inodes[fields[6]] && strings.HasPrefix(fields[7], dir) {
			paths = append(paths, fields[7])
		}
	}
	return paths
}

// killPodProcesses kills the processes in a kubepods cgroup (a pod's) and
// waits, briefly, for them to go, so that their cgroups can be removed.
func killPodProcesses() int {
	pids := podProcesses()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(5 * time.Second); len(podProcesses()) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	return len(pids)
}

func podProcesses() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cgroups, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && strings.Contains(string(cgroups), ":/kubepods") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (n *node) ctr(args ...string) error {
	return command("ctr", append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...)
}

func containerdVersion() string {
	out, err := exec.Command("containerd", "--version").Output()
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(out))
	if len(fields) >= 3 {
		return fields[2]
	}
	return strings.TrimSpace(string(out))
}

// process is one of the node's processes, logging to a file in the node's
// directory.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (n *node) run(name, binary string, args ...string) (*process, error) {
	log := filepath.Join(n.dir, name+".log")
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout = out
	cmd.Stderr = out
	// A process group of its own: a Ctrl-C in the terminal reaches
	// kube-testenv only, which then stops the node in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) stop(timeout time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func containerdConfig(dir, socket string) string {
	return fmt.Sprintf(`# kube-testenv's node: everything under %[1]s.
version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = "%[2]s"

[ttrpc]
  address = "%[2]s.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[3]s"
  # Root here may lack CAP_SYS_RESOURCE; without this every sandbox fails
  # with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  disable_apparmor = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%[4]s"
    conf_dir = "%[1]s/cni"
    max_conf_num = 1
`, dir, socket, pauseImage, cniBinDir)
}

func cniConfig(dir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kube-testenv",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": %q}],
        "dataDir": %q
      }
    }
  ]
}
`, nodeBridge, nodeSubnet, nodeIP, serviceRange, filepath.Join(dir, "cni-ipam"))
}

func kubeletConfig(dir, socket, caFile, resolv string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# What this kind of machine needs (cgroup v1, containerd 1.6, swap on).
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
port: %[4]d
readOnlyPort: 0
healthzPort: 0
# The API server (logs, exec) authenticates with the admin certificate.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %[5]s
authorization:
  mode: AlwaysAllow
podLogsDir: %[1]s/pod-logs
# Pods resolve names against their own loopback, where nothing listens: a
# lookup fails at once instead of leaving the machine.
clusterDomain: cluster.local
clusterDNS: ["127.0.0.1"]
resolvConf: %[6]s
# No iptables chains of the kubelet's own: nothing here needs them, and
# the machine keeps only the rules it had.
makeIPTablesUtilChains: false
serializeImagePulls: false
# A busy test machine must not evict the pods under test.
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, dir, socket, nodeIP, kubeletPort, caFile, resolv)
}
