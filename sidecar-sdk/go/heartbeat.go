package kplug

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// Registration with the operator: heartbeats with backoff, and Unregister
// on shutdown. Every heartbeat carries the plugin's full description, so an
// operator that restarted (and forgot the instance) simply registers it
// again: there is no separate "register" step to redo.

// backoffDelay is the protocol's wait after the attempt-th failed heartbeat
// in a row (counting from 1; 0 counts as 1), for unit drawn uniformly from
// [0, 1): base = min(ceiling, 100 ms × 2^(attempt−1)), shortened by
// base × 10 % × unit. The jitter only shortens, so the wait never exceeds
// ceiling, the heartbeat interval in force. A unit outside [0, 1] (or NaN)
// is clamped.
func backoffDelay(attempt int, ceiling time.Duration, unit float64) time.Duration {
	base := time.Duration(backoffInitial)
	for i := 1; i < attempt && base < ceiling; i++ {
		if base > ceiling/backoffFactor { // the next step passes the ceiling (and cannot overflow)
			base = ceiling
			break
		}
		base *= backoffFactor
	}
	base = min(base, ceiling)
	switch {
	case math.IsNaN(unit) || unit < 0:
		unit = 0
	case unit > 1:
		unit = 1
	}
	return base - time.Duration(float64(base)*backoffJitter*unit)
}

// dialUnix opens a lazy gRPC client connection to the Unix socket at path.
// The :authority is "localhost": the operator's HTTP/2 server resets
// streams whose authority is not a valid host name (docs/protocol.md).
func dialUnix(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///localhost",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	)
}

type registrationState int

const (
	stateStarting registrationState = iota
	stateRegistered
	stateRefused
	stateUnreachable
)

// heartbeater heartbeats one plugin instance to the registry socket.
type heartbeater struct {
	registryPath string
	socketDir    string          // for the warning while registry.sock is missing
	origin       socketDirOrigin // where socketDir came from
	request      *kplugv1.HeartbeatRequest
	logger       *slog.Logger
	randomUnit   func() float64 // uniform in [0, 1), for the backoff's jitter

	interval   atomic.Int64 // time.Duration
	registered atomic.Bool

	mu   sync.Mutex
	conn *grpc.ClientConn
}

func newHeartbeater(registryPath string, request *kplugv1.HeartbeatRequest, interval time.Duration, logger *slog.Logger) *heartbeater {
	h := &heartbeater{registryPath: registryPath, request: request, logger: logger, randomUnit: rand.Float64}
	h.interval.Store(int64(interval))
	return h
}

func (h *heartbeater) currentInterval() time.Duration { return time.Duration(h.interval.Load()) }

// client is a Registry client on a connection opened on first use. After a
// failure the connection is closed and the next call opens a fresh one, so
// that gRPC's own reconnect backoff (1 s growing to 2 min) never delays
// noticing an operator that is back.
func (h *heartbeater) client() (kplugv1.RegistryClient, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		conn, err := dialUnix(h.registryPath)
		if err != nil {
			return nil, err
		}
		h.conn = conn
	}
	return kplugv1.NewRegistryClient(h.conn), nil
}

func (h *heartbeater) closeConn() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != nil {
		_ = h.conn.Close()
		h.conn = nil
	}
}

// run heartbeats until ctx is done: at the interval while the operator
// answers, with backoff while it cannot be reached.
func (h *heartbeater) run(ctx context.Context) {
	defer h.closeConn()
	state, refusal, failures := stateStarting, "", 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		response, err := h.beat(ctx)
		if ctx.Err() != nil {
			return
		}
		var delay time.Duration
		if err != nil {
			failures++
			delay = backoffDelay(failures, h.currentInterval(), h.randomUnit())
			h.registered.Store(false)
			// The first failure of a run at Warn level, the retries at Debug.
			h.logFailure(ctx, state, err)
			state = stateUnreachable
			h.logger.Debug("heartbeat failed", "failures", failures, "next_try_in", delay)
			h.closeConn()
		} else {
			failures = 0
			if d := response.GetInterval(); d != nil && d.AsDuration() > 0 {
				h.interval.Store(int64(d.AsDuration()))
			}
			delay = h.currentInterval()
			if response.GetAccepted() {
				if state != stateRegistered {
					attrs := []any{"registry", h.registryPath, "interval", delay, "ttl", response.GetTtl().AsDuration()}
					if note := response.GetReason(); note != "" {
						attrs = append(attrs, "note", note)
					}
					h.logger.Info("registered with the operator", attrs...)
				}
				state = stateRegistered
				h.registered.Store(true)
			} else {
				h.registered.Store(false)
				if state != stateRefused || response.GetReason() != refusal {
					reason := response.GetReason()
					if reason == "" {
						reason = "no reason given"
					}
					h.logger.Error("the operator refused the registration; heartbeats go on (an upgraded operator may accept it)",
						"reason", reason)
				}
				state, refusal = stateRefused, response.GetReason()
			}
		}
		timer.Reset(delay)
	}
}

// logFailure logs a failed heartbeat that changes the state: before the
// operator ever answered, a registry.sock that is missing or refuses
// connections says where the plugin looks and where that came from.
func (h *heartbeater) logFailure(ctx context.Context, state registrationState, err error) {
	attrs := []any{"registry", h.registryPath, "error", status.Convert(err).Message(), "code", status.Code(err).String()}
	switch {
	case state == stateStarting && h.registryAbsent():
		h.logger.Warn(registryWaitingMessage(h.socketDir, h.origin), attrs[2:]...)
	case state == stateStarting:
		h.logger.Log(ctx, slog.LevelWarn, "cannot reach the operator's registry; retrying with backoff", attrs...)
	case state != stateUnreachable:
		h.logger.Log(ctx, slog.LevelWarn, "lost the operator; retrying with backoff", attrs...)
	}
}

// registryAbsent tells whether registry.sock is missing or refuses
// connections (not merely slow, nor unreadable).
func (h *heartbeater) registryAbsent() bool {
	live, err := isLive(h.registryPath)
	return err == nil && !live
}

func (h *heartbeater) beat(ctx context.Context) (*kplugv1.HeartbeatResponse, error) {
	client, err := h.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, heartbeatTimeout)
	defer cancel()
	return client.Heartbeat(ctx, h.request)
}

// unregister tells the operator this instance is going away. The operator
// answers once the calls in flight to it are done, so this can take a
// while (bounded by a 10 s deadline and ctx). Errors are logged, not
// returned: the operator also notices the socket is gone.
func (h *heartbeater) unregister(ctx context.Context) {
	defer h.closeConn()
	h.registered.Store(false)
	client, err := h.client()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, unregisterTimeout)
		defer cancel()
		var response *kplugv1.UnregisterResponse
		response, err = client.Unregister(ctx, &kplugv1.UnregisterRequest{
			Name: h.request.GetName(), InstanceId: h.request.GetInstanceId(),
		})
		if err == nil {
			if response.GetRemoved() {
				h.logger.Info("unregistered from the operator")
			} else {
				h.logger.Info("unregistered from the operator (it did not know this instance)")
			}
			return
		}
	}
	h.logger.Warn("Unregister failed; exiting anyway, the operator will notice the socket is gone",
		"registry", h.registryPath, "error", status.Convert(err).Message(), "code", status.Code(err).String())
}
