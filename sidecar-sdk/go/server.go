package kplug

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// Server is one running plugin instance: its socket server and its
// heartbeats. [Main] is what plugins use; Server is for embedding a plugin
// in a larger program, or a test, that decides itself when to stop.
type Server struct {
	info       Info
	plugin     Plugin
	socketDir  string
	origin     socketDirOrigin // where socketDir came from, for messages
	socketPath string
	instanceID string
	grace      time.Duration
	logger     *slog.Logger
	heartbeat  *heartbeater

	mu            sync.Mutex
	started       bool
	stopped       bool
	grpcServer    *grpc.Server
	listener      *net.UnixListener
	socket        *boundSocket
	serveDone     chan struct{} // closed when grpcServer.Serve returns
	serveErr      error         // what it returned, read after serveDone
	stopHeartbeat context.CancelFunc
	heartbeatDone chan struct{}
}

// NewServer prepares a plugin server. Settings come from the options, then
// the environment: $KPLUG_SOCKET_DIR (default /var/run/kplug) and
// $KPLUG_HEARTBEAT_INTERVAL (seconds, may be fractional; default 5). It
// fails, with an error wrapping [ErrInvalidName] or [ErrInvalidConfig],
// when the plugin could not work; it touches nothing yet. The socket dir
// must exist by [Server.Start]: it is the volume shared with the operator,
// and the plugin never creates it.
//
// While the operator's registry.sock is missing (or refuses connections)
// before the operator ever answered, the plugin logs once, at Warn level,
// where it looks and where that came from ($KPLUG_SOCKET_DIR, its default
// or [WithSocketDir]); the retries after it at Debug level.
func NewServer(info Info, plugin Plugin, opts ...Option) (*Server, error) {
	if plugin == nil {
		return nil, &startupError{kind: ErrInvalidConfig, message: fmt.Sprintf("plugin %s: the Plugin is nil", info.Name)}
	}
	if err := validateName(info.Name); err != nil {
		return nil, err
	}
	if err := validateDeclarations(&info, plugin); err != nil {
		return nil, err
	}
	c := config{grace: DefaultGracePeriod}
	for _, opt := range opts {
		if err := opt(&c); err != nil {
			var se *startupError
			if errors.As(err, &se) {
				se.message = "plugin " + info.Name + ": " + se.message
			}
			return nil, err
		}
	}
	origin := originProgram
	if c.socketDir == "" {
		c.socketDir, origin = os.Getenv(SocketDirEnv), originEnvironment
	}
	if c.socketDir == "" {
		c.socketDir, origin = DefaultSocketDir, originDefault
	}
	socketDir, err := filepath.Abs(c.socketDir)
	if err != nil {
		return nil, &startupError{kind: ErrInvalidConfig, cause: err, message: fmt.Sprintf(
			"plugin %s: cannot resolve the socket dir %s: %v", info.Name, c.socketDir, err)}
	}
	if c.heartbeatInterval == 0 {
		if c.heartbeatInterval, err = intervalFromEnv(info.Name); err != nil {
			return nil, err
		}
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	logger := c.logger.With("plugin", info.Name)
	if len(info.Offers) == 0 && len(info.Hooks) == 0 {
		logger.Warn("the plugin offers nothing, so the operator will route no work to it; add an Offer to its Info")
	}
	s := &Server{
		info:       info,
		plugin:     plugin,
		socketDir:  socketDir,
		origin:     origin,
		socketPath: filepath.Join(socketDir, PluginsDir, info.Name, PluginSocket),
		instanceID: newInstanceID(),
		grace:      c.grace,
		logger:     logger,
	}
	s.heartbeat = newHeartbeater(filepath.Join(socketDir, RegistrySocket), &kplugv1.HeartbeatRequest{
		Name:         info.Name,
		Version:      info.Version,
		InstanceId:   s.instanceID,
		Protocol:     Protocol,
		Socket:       PluginsDir + "/" + info.Name + "/" + PluginSocket,
		Offers:       info.offersProto(),
		Capabilities: capabilities(plugin, &info),
		Hooks:        info.hooksProto(),
		CallPolicies: info.callPoliciesProto(),
		Mutations:    info.mutationsProto(),
	}, c.heartbeatInterval, logger)
	s.heartbeat.socketDir, s.heartbeat.origin = socketDir, origin
	return s, nil
}

func intervalFromEnv(plugin string) (time.Duration, error) {
	text := os.Getenv(HeartbeatIntervalEnv)
	if text == "" {
		return DefaultHeartbeatInterval, nil
	}
	// A plain decimal number, as Rust's f64 parser reads it: ParseFloat
	// alone would also take "1_0", hex ("0x1p4") and "inf".
	seconds, err := strconv.ParseFloat(text, 64)
	if strings.Trim(text, "0123456789.eE+-") != "" {
		err = strconv.ErrSyntax
	}
	if err != nil || math.IsNaN(seconds) || seconds <= 0 || seconds > float64(math.MaxInt64)/float64(time.Second) {
		return 0, &startupError{kind: ErrInvalidConfig, message: fmt.Sprintf(
			"plugin %s: invalid %s=%q: the heartbeat interval is a positive number of seconds, e.g. 5 or 0.5",
			plugin, HeartbeatIntervalEnv, text)}
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

// newInstanceID is a random UUID (version 4): a fresh id per process
// start, so the operator can tell a restarted plugin from a renewing one.
func newInstanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read panics rather than return an error)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// SocketPath is the socket the plugin serves on:
// <socket dir>/plugins/<name>/plugin.sock.
func (s *Server) SocketPath() string { return s.socketPath }

// SocketDir is the (absolute) socket dir shared with the operator.
func (s *Server) SocketDir() string { return s.socketDir }

// InstanceID identifies this instance in heartbeats: a random UUID,
// different on every start.
func (s *Server) InstanceID() string { return s.instanceID }

// Registered tells whether the operator accepted the last heartbeat.
func (s *Server) Registered() bool { return s.heartbeat.registered.Load() }

// HeartbeatInterval is the current heartbeat interval: the configured one,
// then the one the operator asks for.
func (s *Server) HeartbeatInterval() time.Duration { return s.heartbeat.currentInterval() }

// Start claims the socket (removing a stale one; never a live one or a file
// that is not a socket), serves the Plugin service on it, and only then
// starts heartbeating, because the operator dials back on the first
// heartbeat. It returns at once; stop the server with [Server.Stop].
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("kplug: Server.Start called twice; a Server runs once, create a new one")
	}
	s.started = true
	listener, socket, err := bindSocket(s.socketPath, s.info.Name, s.origin)
	if err != nil {
		return err
	}
	s.listener, s.socket = listener, socket
	s.grpcServer = grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes))
	kplugv1.RegisterPluginServer(s.grpcServer, &service{info: &s.info, plugin: s.plugin, logger: s.logger})
	s.serveDone = make(chan struct{})
	go func() {
		defer close(s.serveDone)
		s.serveErr = s.grpcServer.Serve(listener)
	}()
	s.logger.Info("serving", "version", s.info.Version, "socket", s.socketPath, "instance_id", s.instanceID)

	ctx, cancel := context.WithCancel(context.Background())
	s.stopHeartbeat = cancel
	s.heartbeatDone = make(chan struct{})
	go func() {
		defer close(s.heartbeatDone)
		s.heartbeat.run(ctx)
	}()
	return nil
}

// Stop shuts the plugin down the way the protocol asks: stop heartbeating,
// call Registry.Unregister (the operator stops routing calls here and
// answers once the calls in flight are done; errors are logged), stop
// taking calls and let those in flight finish (up to the grace period),
// then remove the socket if it is still ours, and the plugin's directory,
// plugins/<name>/, if that left it empty.
//
// If ctx ends first, Stop gives up waiting: it closes every connection at
// once (handlers see their contexts cancelled), removes the socket and
// returns ctx's error. It returns nil otherwise, also when the grace period
// ran out.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grpcServer == nil || s.stopped { // never started, or Start failed
		return nil
	}
	s.stopped = true
	s.stopHeartbeat()
	<-s.heartbeatDone
	s.heartbeat.unregister(ctx)

	s.logger.Info("stopped taking calls; draining those in flight", "grace", s.grace)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		s.grpcServer.GracefulStop()
	}()
	grace := time.NewTimer(s.grace)
	defer grace.Stop()
	var err error
	select {
	case <-drained:
	case <-grace.C:
		if s.grace > 0 {
			s.logger.Warn("calls still in flight after the grace period; stopping them", "grace", s.grace)
		} else {
			s.logger.Info("no grace period; closing every connection")
		}
		s.forceStop()
	case <-ctx.Done():
		s.logger.Warn("stopping now; calls in flight are abandoned")
		s.forceStop()
		err = fmt.Errorf("kplug: plugin %s stopped before its calls in flight finished: %w", s.info.Name, ctx.Err())
	}
	// GracefulStop closes the listener, but maybe not yet (a 0 s grace
	// period): close it here, so that the socket is not live when removed.
	_ = s.listener.Close()
	s.socket.remove()
	if _, err := os.Lstat(s.socketPath); errors.Is(err, fs.ErrNotExist) {
		removePluginDir(filepath.Dir(s.socketPath))
	}
	s.logger.Info("stopped")
	return err
}

// forceStop closes every connection, cancelling the calls in flight,
// without waiting for their handlers: one that ignores its cancelled
// context may run on, and grpc's Stop, racing with the GracefulStop in
// progress, would wait for it.
func (s *Server) forceStop() {
	go s.grpcServer.Stop()
}

// Run starts the server, serves until ctx is done, then stops it as
// [Server.Stop] does (waiting for the drain, whatever ctx says). It returns
// an error when the server cannot start or stops serving on its own.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return s.Stop(context.WithoutCancel(ctx))
	case <-s.serveDone:
		_ = s.Stop(context.WithoutCancel(ctx))
		return s.serveFailure()
	}
}

func (s *Server) serveFailure() error {
	return fmt.Errorf("kplug: plugin %s stopped serving on %s: %w", s.info.Name, s.socketPath, s.serveErr)
}

// Serve runs plugin until ctx is done: [NewServer], then [Server.Run]. It
// does not handle signals; [Main] does.
func Serve(ctx context.Context, info Info, plugin Plugin, opts ...Option) error {
	s, err := NewServer(info, plugin, opts...)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// Main runs plugin as the whole program: the body of a plugin's main. It
// serves until SIGTERM or SIGINT, then unregisters, drains the calls in
// flight, removes the socket and returns. A second signal during the drain
// abandons the calls in flight and exits with status 1 at once. When the
// plugin cannot start (an invalid name, a socket in use...), Main logs why
// and exits with status 1.
//
// See [NewServer] for the settings and [WithLogger] for the logging.
func Main(info Info, plugin Plugin, opts ...Option) {
	if err := run(info, plugin, opts...); err != nil {
		logger := slog.Default()
		var c config
		for _, opt := range opts {
			if opt(&c) == nil && c.logger != nil {
				logger = c.logger
			}
		}
		logger.Error(err.Error(), "plugin", info.Name)
		os.Exit(1)
	}
}

func run(info Info, plugin Plugin, opts ...Option) error {
	stopTracing, err := startTracing(context.Background(), info.Name)
	if err != nil {
		return err
	}
	if stopTracing != nil {
		// Flush the last spans, bounded: the process is exiting.
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = stopTracing(ctx)
		}()
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	s, err := NewServer(info, plugin, opts...)
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return err
	}
	select {
	case sig := <-signals:
		s.logger.Info(signalName(sig) + " received; shutting down")
	case <-s.serveDone:
		_ = s.Stop(context.Background())
		return s.serveFailure()
	}
	ctx, hurry := context.WithCancel(context.Background())
	defer hurry()
	go func() {
		select {
		case sig := <-signals:
			s.logger.Warn(signalName(sig) + " received again; stopping now")
			hurry()
		case <-ctx.Done():
		}
	}()
	return s.Stop(ctx)
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}
