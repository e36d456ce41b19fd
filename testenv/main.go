// Command kube-testenv runs a real Kubernetes control plane (kube-apiserver
// with an embedded etcd) on loopback for tests and demos.
//
// Everything it needs lives in one temporary directory that is removed at
// exit, or with --data-dir in a directory that is kept and reused, so that the
// API server can be restarted with its data. It writes an admin kubeconfig,
// prints one line when /readyz is ok, and shuts down on SIGTERM/SIGINT or when
// the process that started it dies, so a crashed test run leaves nothing
// behind.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"go.etcd.io/etcd/server/v3/embed"
)

const usage = `kube-testenv: a real kube-apiserver with embedded etcd, on loopback.

Usage:
  kube-testenv --kubeconfig PATH [--port N] [--data-dir DIR] [--verbose] [--exit-on-stdin-eof]
  kube-testenv --node --kubeconfig PATH [--load-image IMAGE]... [other flags]

It picks free ports, generates self-signed certificates, keeps all state in a
temporary directory removed at exit, writes an admin kubeconfig to PATH and
prints one line starting with "kube-testenv ready:" once /readyz answers ok.
It stops on SIGTERM/SIGINT and when its parent process exits (and, with
--exit-on-stdin-eof, when its stdin is closed), removing everything it wrote.

With --data-dir DIR, the etcd data, the certificates and the service-account
signing key live in DIR instead, which is created if missing, reused when it
already holds them, and kept at exit, as is the kubeconfig. Started again with
the same --data-dir and --port, it serves the same objects and writes the same
kubeconfig: clients (and service-account tokens) from before keep working.
One DIR can be used by one kube-testenv at a time.

With --node (as root), it also runs a one-node cluster on this machine:
kube-controller-manager, kube-scheduler and a kubelet with containerd, runc,
a CNI bridge (pods on 10.88.0.0/16, the API server at 10.96.0.1:443) and a
locally built pause image. The ready line is printed once the node is Ready.
Each --load-image IMAGE is copied from the local Docker engine into the
node's containerd (pods use imagePullPolicy IfNotPresent or Never: nothing is
ever pulled). Each --expose-host-port PORT makes 127.0.0.1:PORT of this
machine (a database, say) reachable from pods at 10.88.0.1:PORT. The node needs Debian's containerd, runc and
containernetworking-plugins, and the kubelet, kube-controller-manager,
kube-scheduler and pause binaries of "make node-binaries" next to
kube-testenv (or in --node-bin-dir). Stopping removes every pod, and restores
what the node changed on the machine: processes, mounts, network namespaces,
the bridge, iptables rules, cgroups and sysctls.

Flags:
`

// readyPrefix starts the one line printed on stdout once the API server is
// ready. Callers (the kplug-testenv crate) wait for it.
const readyPrefix = "kube-testenv ready:"

type options struct {
	kubeconfig     string
	port           int
	dataDir        string
	verbose        bool
	readyTimeout   time.Duration
	exitOnStdinEOF bool
	node           nodeOptions
}

// shutdownTimeout bounds the graceful shutdown of kube-apiserver.
const shutdownTimeout = 15 * time.Second

func main() {
	opts := parseFlags()
	if err := run(opts); err != nil {
		fmt.Fprintf(messages, "kube-testenv: error: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (required); removed again at exit, unless --data-dir is given")
	flag.IntVar(&o.port, "port", 0, "loopback port for the API server; 0 picks a free one")
	flag.StringVar(&o.dataDir, "data-dir", "", "keep etcd data, certificates and keys in this directory (created if missing, reused if it holds them, kept at exit); default: a temporary directory removed at exit")
	flag.BoolVar(&o.verbose, "verbose", false, "show kube-apiserver and etcd logs on stderr (default: kept in the state directory and shown only on failure)")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 60*time.Second, "give up if /readyz is not ok within this time")
	flag.BoolVar(&o.exitOnStdinEOF, "exit-on-stdin-eof", false, "also shut down when stdin is closed (for a parent that holds a pipe to it)")
	flag.BoolVar(&o.node.enabled, "node", false, "also run a one-node cluster: kubelet, containerd, kube-controller-manager, kube-scheduler (root only)")
	flag.StringVar(&o.node.binDir, "node-bin-dir", "", "where kubelet, kube-controller-manager, kube-scheduler and pause are (default: kube-testenv's own directory)")
	flag.Func("load-image", "with --node: copy this image from the local Docker engine into the node (repeatable)", func(image string) error {
		o.node.images = append(o.node.images, image)
		return nil
	})
	flag.Func("expose-host-port", "with --node: pods reach 127.0.0.1:PORT of this machine at the node's address, 10.88.0.1:PORT (repeatable; e.g. a database on loopback)", func(value string) error {
		port, err := strconv.Atoi(value)
		if err != nil || port < 1 || port > 65535 {
			return fmt.Errorf("%q is not a TCP port", value)
		}
		o.node.hostPorts = append(o.node.hostPorts, port)
		return nil
	})
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "kube-testenv: error: --kubeconfig PATH is required")
		flag.Usage()
		os.Exit(2)
	}
	if !o.node.enabled && (len(o.node.images) > 0 || o.node.binDir != "" || len(o.node.hostPorts) > 0) {
		fmt.Fprintln(os.Stderr, "kube-testenv: error: --load-image, --expose-host-port and --node-bin-dir need --node")
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kube-testenv: error: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	return o
}

func run(o options) error {
	start := time.Now()
	parent := os.Getppid()

	// Stop requests (SIGTERM/SIGINT, the parent going away, EOF on stdin)
	// are watched from the very start, so that a request during start-up
	// also ends with the state directory removed. The first reason wins.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reasons := make(chan string, 1)
	stop := func(why string) {
		select {
		case reasons <- why:
		default:
		}
		cancel()
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, unix.SIGTERM, unix.SIGINT)
	// When the parent dies, so does the reader of our stdout/stderr; Go
	// would turn the next write to fd 1 or 2 (our "shutting down" message)
	// into a fatal SIGPIPE and skip the clean-up. Ignored, it is an error
	// that we do not care about.
	signal.Ignore(unix.SIGPIPE)
	go func() {
		sig := <-signals
		stop(fmt.Sprintf("received %v", sig))
	}()
	go watchParent(ctx, parent, func() {
		stop(fmt.Sprintf("parent process %d is gone", parent))
	})
	if o.exitOnStdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop("stdin was closed")
		}()
	}

	// Check everything the user gave us before starting anything, so bad
	// input fails fast with a message instead of a half-started server.
	kubeconfig, err := filepath.Abs(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig path %q: %w", o.kubeconfig, err)
	}
	// A data directory is created and locked first: the kubeconfig may go
	// into it, and a second kube-testenv on the same directory most likely
	// asks for the same port too, where "in use by pid N" says more than
	// "port taken".
	persistent := o.dataDir != ""
	var state string
	if persistent {
		if state, err = filepath.Abs(o.dataDir); err != nil {
			return fmt.Errorf("data directory %q: %w", o.dataDir, err)
		}
		lock, err := lockDataDir(state)
		if err != nil {
			return err
		}
		// Released (by the kernel) when the process exits, after etcd is
		// closed by the deferred calls below.
		defer lock.Close()
	}
	if err := checkWritable(kubeconfig); err != nil {
		return err
	}
	if o.node.enabled {
		if err := checkNode(&o.node); err != nil {
			return err
		}
	}
	apiListener, err := listenLoopback(o.port)
	if err != nil {
		return err
	}
	apiPort := apiListener.Addr().(*net.TCPAddr).Port
	// The listener only reserved the port; kube-apiserver binds it itself.
	// Both listeners set SO_REUSEADDR (Go does on Linux), so the port of a
	// kube-testenv that just stopped is usable at once, TIME_WAIT or not.
	apiListener.Close()

	if !persistent {
		state, err = os.MkdirTemp("", "kube-testenv-")
		if err != nil {
			return fmt.Errorf("creating the state directory: %w", err)
		}
		defer os.RemoveAll(state)
	}

	logPath := filepath.Join(state, "control-plane.log")
	if err := redirectLogs(logPath, o.verbose); err != nil {
		return err
	}
	if persistent && !o.verbose {
		// The log of a data directory collects every run; mark where this
		// one starts (fd 2 is the log file now).
		fmt.Fprintf(os.Stderr, "--- kube-testenv (pid %d) starting at %s on port %d ---\n",
			os.Getpid(), time.Now().Format(time.RFC3339), apiPort)
	}
	// Our own messages always go to the real stderr.
	say := func(format string, args ...any) {
		fmt.Fprintf(messages, "kube-testenv: "+format+"\n", args...)
	}
	// showLog prints the end of the (hidden) logs when something failed.
	showLog := func() {
		if !o.verbose {
			say("last lines of %s:\n%s", logPath, tail(logPath, 40))
		}
	}
	// stopReason is why a stop was requested; call it only once ctx is done.
	stopReason := sync.OnceValue(func() string { return <-reasons })
	fail := func(err error) error {
		if ctx.Err() != nil {
			// Not a failure: we were asked to stop while starting.
			return fmt.Errorf("stopped before the API server was ready: %s", stopReason())
		}
		showLog()
		return err
	}

	var pki *pkiFiles
	if persistent {
		var reused bool
		pki, reused, err = loadOrWritePKI(filepath.Join(state, "pki"))
		if err != nil {
			return err
		}
		if reused || exists(filepath.Join(state, "etcd")) {
			say("reusing the data directory %s", state)
		}
	} else {
		pki, err = writePKI(filepath.Join(state, "pki"), tempCertValidity)
		if err != nil {
			return fmt.Errorf("generating certificates: %w", err)
		}
	}

	etcd, err := startEtcd(ctx, filepath.Join(state, "etcd"))
	if err != nil {
		return fail(err)
	}
	defer etcd.Close()

	args := apiserverArgs(apiPort, etcd.Clients[0].Addr().String(), pki)
	nodeDir := filepath.Join(state, "node")
	if o.node.enabled {
		if err := prepareNode(nodeDir, pki); err != nil {
			return fmt.Errorf("preparing the node: %w", err)
		}
		args = append(args, nodeAPIServerArgs(nodeDir)...)
	}
	apiserverDone := make(chan error, 1)
	go func() {
		apiserverDone <- runAPIServer(ctx, args)
	}()

	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	client, err := adminClient(pki)
	if err != nil {
		return err
	}
	readyCtx, cancelReady := context.WithTimeout(ctx, o.readyTimeout)
	defer cancelReady()
	version, err := waitReady(readyCtx, client, server, apiserverDone, etcd.Err())
	if err != nil {
		return fail(err)
	}
	if err := writeKubeconfig(kubeconfig, server, pki); err != nil {
		return err
	}
	if !persistent {
		defer os.Remove(kubeconfig)
	}
	nodeNote := ""
	var n *node
	if o.node.enabled {
		n, err = startNode(ctx, o.node, nodeDir, server, apiPort, pki, client, say)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("stopped before the node was ready: %s", stopReason())
			}
			return fmt.Errorf("starting the node: %w", err)
		}
		// Also on the error paths below; normally it is stopped first thing
		// on shutdown.
		defer n.stop()
		nodeNote = fmt.Sprintf(", node %s", n.name)
	}

	fmt.Printf("%s kube-apiserver %s at %s, etcd %s%s, in %.2fs; kubeconfig %s\n",
		readyPrefix, version, server, etcdVersion(), nodeNote, time.Since(start).Seconds(), kubeconfig)

	select {
	case err := <-apiserverDone:
		if ctx.Err() != nil {
			// It saw the stop request first; the wait below takes it back.
			apiserverDone <- err
			break
		}
		if err == nil {
			err = errors.New("it returned without being asked to stop")
		}
		showLog()
		return fmt.Errorf("kube-apiserver stopped: %w", err)
	case err := <-etcd.Err():
		showLog()
		return fmt.Errorf("etcd stopped: %w", err)
	case <-ctx.Done():
	}

	say("%s; shutting down", stopReason())
	if n != nil {
		n.stop()
	}
	// kube-apiserver drains its requests and watches; bound the wait so a
	// stuck shutdown cannot keep a test run (or CI) waiting. A second
	// signal skips the wait. Either way the deferred clean-up runs.
	select {
	case err := <-apiserverDone:
		if err != nil {
			say("kube-apiserver shut down with an error: %v", err)
		}
	case <-time.After(shutdownTimeout):
		say("kube-apiserver did not stop within %s; exiting anyway", shutdownTimeout)
	case sig := <-signals:
		say("received %v again; exiting without waiting", sig)
	}
	if persistent {
		say("stopped cleanly; the data directory %s and the kubeconfig %s are kept", state, kubeconfig)
	} else {
		say("stopped cleanly")
	}
	return nil
}

// checkWritable fails early, with the path in the message, when the
// kubeconfig cannot be written.
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	probe, err := os.CreateTemp(dir, ".kube-testenv-probe-")
	if err != nil {
		return fmt.Errorf("cannot write the kubeconfig %s: %w (choose a writable path with --kubeconfig)", path, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return fmt.Errorf("cannot write the kubeconfig %s: it is a directory (give a file path with --kubeconfig)", path)
	}
	return nil
}

// listenLoopback reserves a loopback port, or reports who to blame when the
// requested one is taken.
func listenLoopback(port int) (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("port %d on 127.0.0.1 is already in use; pick another with --port, or --port 0 for a free one", port)
		}
		return nil, fmt.Errorf("cannot listen on 127.0.0.1:%d: %w", port, err)
	}
	return l, nil
}

// messages is where our own messages go: the real stderr, also after
// redirectLogs has pointed fd 2 (where kube-apiserver and etcd log) at a file.
var messages io.Writer = os.Stderr

// redirectLogs sends kube-apiserver's and etcd's logs (they write to fd 2)
// to a file unless verbose, keeping a duplicate of the real stderr for
// messages.
func redirectLogs(path string, verbose bool) error {
	if verbose {
		return nil
	}
	logFile, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the log file: %w", err)
	}
	saved, err := unix.Dup(int(os.Stderr.Fd()))
	if err != nil {
		return fmt.Errorf("duplicating stderr: %w", err)
	}
	if err := unix.Dup2(int(logFile.Fd()), int(os.Stderr.Fd())); err != nil {
		return fmt.Errorf("redirecting logs: %w", err)
	}
	messages = os.NewFile(uintptr(saved), "stderr")
	return nil
}

// startEtcd starts etcd on data directory dir, which it creates or, when it
// exists (a --data-dir of an earlier run), reuses. Its ports are new on every
// start: the API server is told them, and a single-member cluster does not
// need its recorded peer address.
func startEtcd(ctx context.Context, dir string) (*embed.Etcd, error) {
	existed := exists(dir)
	var lastErr error
	// Free ports are picked by binding port 0 and releasing it; another
	// process may grab one in between, so retry a few times.
	for attempt := 0; attempt < 3; attempt++ {
		clientPort, err := freePort()
		if err != nil {
			return nil, err
		}
		peerPort, err := freePort()
		if err != nil {
			return nil, err
		}
		cfg := embed.NewConfig()
		cfg.Dir = dir
		cfg.LogLevel = "error"
		// A test control plane does not need durable writes; fsync makes
		// every write (and so every test) slower.
		cfg.UnsafeNoFsync = true
		clientURL := mustURL(fmt.Sprintf("http://127.0.0.1:%d", clientPort))
		peerURL := mustURL(fmt.Sprintf("http://127.0.0.1:%d", peerPort))
		cfg.ListenClientUrls = []urlT{clientURL}
		cfg.AdvertiseClientUrls = []urlT{clientURL}
		cfg.ListenPeerUrls = []urlT{peerURL}
		cfg.AdvertisePeerUrls = []urlT{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			// Only what this attempt created is removed: never the data of
			// an earlier run.
			if !existed {
				os.RemoveAll(dir)
			}
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, nil
		case <-time.After(30 * time.Second):
			e.Close()
			return nil, errors.New("etcd did not become ready within 30s")
		case <-ctx.Done():
			e.Close()
			return nil, errors.New("stopped while etcd was starting")
		}
	}
	if existed {
		return nil, fmt.Errorf("starting etcd on the existing data in %s: %w (if the data is damaged, remove that directory to start afresh)", dir, lastErr)
	}
	return nil, fmt.Errorf("starting etcd: %w", lastErr)
}

func freePort() (int, error) {
	l, err := listenLoopback(0)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func apiserverArgs(port int, etcdAddr string, pki *pkiFiles) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--etcd-servers=http://" + etcdAddr,
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.serviceAccountKey,
		"--service-account-signing-key-file=" + pki.serviceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// RBAC is on so that permission checks (SubjectAccessReview,
		// impersonation) behave as in a real cluster; the admin is in
		// system:masters.
		"--authorization-mode=Node,RBAC",
		"--shutdown-delay-duration=0s",
		// A positive grace period is what makes the API server end open
		// watches when it shuts down (it then waits for them up to this
		// long). With 0s it does not end them, and its HTTP server waits
		// for those connections until kube-testenv's shutdownTimeout: a
		// stop with a controller watching took 15s instead of about one.
		"--shutdown-watch-termination-grace-period=2s",
		"--v=0",
	}
}

func waitReady(ctx context.Context, client *http.Client, server string, apiserverDone <-chan error, etcdErr <-chan error) (string, error) {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case err := <-apiserverDone:
			if err == nil {
				err = errors.New("exited before it was ready")
			}
			return "", fmt.Errorf("kube-apiserver failed to start: %w", err)
		case err := <-etcdErr:
			return "", fmt.Errorf("etcd failed: %w", err)
		case <-ctx.Done():
			return "", fmt.Errorf("kube-apiserver at %s was not ready in time (raise --ready-timeout, or run with --verbose to see why)", server)
		case <-ticker.C:
		}
		resp, err := client.Get(server + "/readyz")
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return apiserverVersion(client, server), nil
		}
	}
}

// watchParent calls gone once the process that started us has exited (we
// get re-parented). Polling getppid works for any parent, including one
// killed with SIGKILL, without a cooperating pipe.
func watchParent(ctx context.Context, parent int, gone func()) {
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if os.Getppid() != parent {
			gone()
			return
		}
	}
}

func etcdVersion() string {
	return moduleVersion("go.etcd.io/etcd/server/v3")
}

func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	count := 0
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			count++
			if count > lines {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
