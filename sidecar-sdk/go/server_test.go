package kplug_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugtest"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

var offer = kplug.Offer{
	Base:           kplug.GroupKind{Group: "myorg.org", Kind: "DatabaseTable"},
	Implementation: "PostgreSQL",
	Extensions:     []kplug.GroupKind{{Group: "myorg.org", Kind: "DatabaseTablePostgreSqlExtension"}},
}

var info = kplug.Info{Name: "postgresql", Version: "1.4.2", Description: "Tables in PostgreSQL", Offers: []kplug.Offer{offer}}

// echo answers with the spec it was sent; its readiness can be flipped.
type echo struct {
	kplug.ReadinessGate
}

func (*echo) Reconcile(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	return kplug.OK().WithMessage("reconciled " + req.String()).WithStatus(map[string]any{"spec": req.Spec()}), nil
}

// finalizing also implements Finalize.
type finalizing struct{ echo }

func (*finalizing) Finalize(context.Context, *kplug.Request) (*kplug.Response, error) {
	return kplug.Retry(time.Second).WithMessage("still dropping"), nil
}

func reconcileRequest(spec map[string]any) *kplugv1.ReconcileRequest {
	return &kplugv1.ReconcileRequest{Implementation: "PostgreSQL", Object: mustJSON(map[string]any{
		"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable",
		"metadata": map[string]any{"name": "users", "namespace": "shop", "generation": 2},
		"spec":     spec,
	})}
}

func TestHeartbeatDescribesThePlugin(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	server := kplugtest.StartPlugin(t, dir, info, &echo{}, kplug.WithHeartbeatInterval(100*time.Millisecond))
	hb := registry.WaitForHeartbeats(t, 1, 5*time.Second)[0].Request
	want := &kplugv1.HeartbeatRequest{
		Name: "postgresql", Version: "1.4.2", InstanceId: server.InstanceID(), Protocol: "kplug.v1",
		Socket: "plugins/postgresql/plugin.sock",
		Offers: []*kplugv1.Offer{{
			Base:           &kplugv1.GroupKind{Group: "myorg.org", Kind: "DatabaseTable"},
			Implementation: "PostgreSQL",
			Extensions:     []*kplugv1.GroupKind{{Group: "myorg.org", Kind: "DatabaseTablePostgreSqlExtension"}},
		}},
		Capabilities: []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE},
	}
	if !proto.Equal(hb, want) {
		t.Errorf("heartbeat\n%v\nwant\n%v", hb, want)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(hb.GetInstanceId()) {
		t.Errorf("instance id %q is not a UUIDv4", hb.GetInstanceId())
	}
	if server.SocketPath() != filepath.Join(dir, hb.GetSocket()) {
		t.Errorf("socket %s, heartbeat says %s", server.SocketPath(), hb.GetSocket())
	}
	if info, err := os.Lstat(server.SocketPath()); err != nil || info.Mode().Type() != os.ModeSocket {
		t.Errorf("no socket at %s: %v", server.SocketPath(), err)
	}
	eventually(t, 2*time.Second, "Registered() after an accepted heartbeat", server.Registered)
}

func TestEveryStartIsANewInstance(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	a, err := kplug.NewServer(info, &echo{}, kplug.WithSocketDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	b, err := kplug.NewServer(info, &echo{}, kplug.WithSocketDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if a.InstanceID() == b.InstanceID() {
		t.Errorf("two servers share instance id %s", a.InstanceID())
	}
}

func TestServesBeforeTheFirstHeartbeatAndGetInfoAgrees(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	server := kplugtest.StartPlugin(t, dir, info, &finalizing{})
	hb := registry.WaitForHeartbeats(t, 1, 5*time.Second)[0].Request
	// The fake registry dials back (GetInfo, Probe) inside the first heartbeat.
	handshake, ok := registry.Handshake(server.InstanceID())
	if !ok || handshake.Err != nil {
		t.Fatalf("handshake: %v, %v", ok, handshake.Err)
	}
	got := handshake.Info
	if got.GetName() != "postgresql" || got.GetVersion() != "1.4.2" || got.GetProtocol() != "kplug.v1" || got.GetDescription() != "Tables in PostgreSQL" {
		t.Errorf("GetInfo %v", got)
	}
	if len(got.GetOffers()) != 1 || !proto.Equal(got.GetOffers()[0], hb.GetOffers()[0]) {
		t.Errorf("GetInfo offers %v, heartbeat %v", got.GetOffers(), hb.GetOffers())
	}
	want := []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE, kplugv1.Capability_CAPABILITY_FINALIZE}
	if !equalCaps(got.GetCapabilities(), want) || !equalCaps(hb.GetCapabilities(), want) {
		t.Errorf("capabilities: GetInfo %v, heartbeat %v, want %v", got.GetCapabilities(), hb.GetCapabilities(), want)
	}
	if !handshake.Probe.GetReady() {
		t.Error("Probe: not ready")
	}
}

func equalCaps(a, b []kplugv1.Capability) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHeartbeatsContinueAtTheInterval(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	server := kplugtest.StartPlugin(t, dir, info, &echo{}, kplug.WithHeartbeatInterval(100*time.Millisecond))
	beats := registry.WaitForHeartbeats(t, 5, 5*time.Second)
	for i := 1; i < len(beats); i++ {
		if gap := beats[i].At.Sub(beats[i-1].At); gap < 80*time.Millisecond || gap > time.Second {
			t.Errorf("gap %v between heartbeats %d and %d, want about 100ms", gap, i-1, i)
		}
		if beats[i].Request.GetInstanceId() != server.InstanceID() {
			t.Errorf("heartbeat %d from instance %s", i, beats[i].Request.GetInstanceId())
		}
	}
	if registry.Handshakes() != 1 {
		t.Errorf("%d handshakes, want 1", registry.Handshakes())
	}
}

func TestTheOperatorsIntervalWins(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	registry.Answer(true, "", 50*time.Millisecond)
	server := kplugtest.StartPlugin(t, dir, info, &echo{}, kplug.WithHeartbeatInterval(30*time.Second))
	registry.WaitForHeartbeats(t, 4, 3*time.Second)
	if server.HeartbeatInterval() != 50*time.Millisecond {
		t.Errorf("interval %v, want the operator's 50ms", server.HeartbeatInterval())
	}
}

func TestRefusalIsLoggedOnceAndHeartbeatsGoOn(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	registry.Answer(false, "protocol kplug.v1 not supported", 0)
	logs, buf := withLogs(t)
	server := kplugtest.StartPlugin(t, dir, info, &echo{}, kplug.WithHeartbeatInterval(50*time.Millisecond), logs)
	registry.WaitForHeartbeats(t, 4, 3*time.Second)
	refusals := buf.lines("refused the registration")
	if len(refusals) != 1 || !strings.Contains(refusals[0], "level=ERROR") || !strings.Contains(refusals[0], "protocol kplug.v1 not supported") {
		t.Errorf("refusal log lines: %q", refusals)
	}
	if server.Registered() {
		t.Error("Registered() while refused")
	}
	// Accepted later (an upgraded operator): registered, logged once.
	registry.Answer(true, "", 0)
	eventually(t, 2*time.Second, "Registered() once accepted", server.Registered)
	if n := len(buf.lines("registered with the operator")); n != 1 {
		t.Errorf("%d 'registered' lines, want 1", n)
	}
}

func TestRegistersOnceTheOperatorAppears(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	server := kplugtest.StartPlugin(t, dir, info, &echo{}, kplug.WithHeartbeatInterval(time.Second))
	time.Sleep(300 * time.Millisecond) // the plugin started first, as sidecars often do
	registry := kplugtest.StartRegistry(t, dir)
	registry.WaitForHeartbeats(t, 1, 2*time.Second)
	if h, ok := registry.Handshake(server.InstanceID()); !ok || h.Err != nil {
		t.Errorf("handshake: %v %v", ok, h.Err)
	}
}

func TestReregistersAfterTheOperatorRestarts(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	logs, buf := withLogs(t)
	server := kplugtest.StartPlugin(t, dir, info, &echo{}, kplug.WithHeartbeatInterval(time.Second), logs)
	registry.WaitForHeartbeats(t, 1, 5*time.Second)
	eventually(t, 2*time.Second, "registered", server.Registered) // the answer arrived
	registry.Stop()
	// Nobody answers for 3 s: the next heartbeat, 1 s later, fails, then the
	// plugin retries after 0.1, 0.2, 0.4, 0.8 and 1 s (capped at the interval).
	time.Sleep(3 * time.Second)
	if server.Registered() {
		t.Error("Registered() while the operator is gone")
	}
	restarted := kplugtest.StartRegistry(t, dir)
	hb := restarted.WaitForHeartbeats(t, 1, 3*time.Second)[0].Request
	if hb.GetInstanceId() != server.InstanceID() {
		t.Errorf("instance %s after the restart, want the same %s", hb.GetInstanceId(), server.InstanceID())
	}
	if h, ok := restarted.Handshake(server.InstanceID()); !ok || h.Err != nil {
		t.Errorf("the new operator's handshake: %v %v", ok, h.Err)
	}
	restarted.WaitForHeartbeats(t, 2, 3*time.Second) // and carries on

	var delays []time.Duration
	for _, line := range buf.lines("heartbeat failed") {
		m := regexp.MustCompile(`next_try_in=(\S+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no delay in %q", line)
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		delays = append(delays, d)
	}
	if len(delays) < 5 {
		t.Fatalf("%d retries logged, want at least 5: %v", len(delays), delays)
	}
	for i, base := range []time.Duration{100, 200, 400, 800, 1000} {
		base *= time.Millisecond
		if delays[i] > base || delays[i] < base-base/10 {
			t.Errorf("retry %d after %v, want %v less up to 10%% jitter (all: %v)", i, delays[i], base, delays)
		}
	}
	if lost := buf.lines("lost the operator"); len(lost) != 1 || !strings.Contains(lost[0], "level=WARN") {
		t.Errorf("'lost the operator' lines: %q (want one, not one per retry)", lost)
	}
	if n := len(buf.lines("registered with the operator")); n != 2 {
		t.Errorf("%d 'registered' lines, want 2", n)
	}
}

func TestProbeReflectsReadiness(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	plugin := &echo{}
	server := kplugtest.StartPlugin(t, dir, info, plugin, kplug.WithHeartbeatInterval(time.Minute))
	client := kplugtest.Dial(t, server.SocketPath())
	probe := func() (bool, string) {
		r, err := client.Probe(ctxFor(t, 2*time.Second), &kplugv1.ProbeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetReady(), r.GetMessage()
	}
	if ready, msg := probe(); !ready || msg != "" {
		t.Errorf("at start: %v %q", ready, msg)
	}
	plugin.SetNotReady("database unreachable")
	if ready, msg := probe(); ready || msg != "database unreachable" {
		t.Errorf("not ready: %v %q", ready, msg)
	}
	plugin.SetReady()
	if ready, msg := probe(); !ready || msg != "" {
		t.Errorf("ready again: %v %q", ready, msg)
	}
}

type plainPlugin struct{}

func (plainPlugin) Reconcile(context.Context, *kplug.Request) (*kplug.Response, error) {
	return kplug.OK(), nil
}

type panickyReadiness struct{ plainPlugin }

func (panickyReadiness) Readiness(context.Context) kplug.Readiness { panic("no route to database") }

func TestProbeWithoutAReadinessCheckAndWhenItPanics(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	for _, tc := range []struct {
		name    string
		plugin  kplug.Plugin
		ready   bool
		message string
	}{
		{"plain", plainPlugin{}, true, ""},
		{"panics", panickyReadiness{}, false, "the plugin's Readiness check panicked: no route to database"},
	} {
		server := kplugtest.StartPlugin(t, dir, kplug.Info{Name: tc.name, Version: "1"}, tc.plugin)
		r, err := kplugtest.Dial(t, server.SocketPath()).Probe(ctxFor(t, 2*time.Second), &kplugv1.ProbeRequest{})
		if err != nil || r.GetReady() != tc.ready || r.GetMessage() != tc.message {
			t.Errorf("%s: %v, %v", tc.name, r, err)
		}
	}
}

func TestCapabilitiesFollowTheFinalizer(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	for name, tc := range map[string]struct {
		plugin kplug.Plugin
		want   []kplugv1.Capability
	}{
		"echo":       {&echo{}, []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE}},
		"finalizing": {&finalizing{}, []kplugv1.Capability{kplugv1.Capability_CAPABILITY_RECONCILE, kplugv1.Capability_CAPABILITY_FINALIZE}},
	} {
		server := kplugtest.StartPlugin(t, dir, kplug.Info{Name: name, Version: "1"}, tc.plugin)
		r, err := kplugtest.Dial(t, server.SocketPath()).GetInfo(ctxFor(t, 2*time.Second), &kplugv1.GetInfoRequest{})
		if err != nil || !equalCaps(r.GetCapabilities(), tc.want) {
			t.Errorf("%s: %v, %v, want %v", name, r.GetCapabilities(), err, tc.want)
		}
	}
}

func TestReconcileRoundTripWithTheCallersDeadline(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	var deadline atomic.Int64
	plugin := kplug.ReconcileFunc(func(ctx context.Context, req *kplug.Request) (*kplug.Response, error) {
		if d, ok := ctx.Deadline(); ok {
			deadline.Store(int64(time.Until(d)))
		}
		return (&echo{}).Reconcile(ctx, req)
	})
	server := kplugtest.StartPlugin(t, dir, info, plugin)
	r, err := kplugtest.Dial(t, server.SocketPath()).Reconcile(ctxFor(t, 3*time.Second), reconcileRequest(map[string]any{"columns": []any{"id"}}))
	if err != nil {
		t.Fatal(err)
	}
	if r.GetOutcome() != kplugv1.Outcome_OUTCOME_OK || r.GetMessage() != "reconciled DatabaseTable shop/users" || string(r.GetStatus()) != `{"spec":{"columns":["id"]}}` {
		t.Errorf("got %v", r)
	}
	if d := time.Duration(deadline.Load()); d <= 0 || d > 3*time.Second {
		t.Errorf("the handler's ctx deadline is %v away, want the caller's (under 3s)", d)
	}
}

func TestHandlerFailuresBecomeFailedAndThePluginKeepsServing(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	for _, tc := range []struct {
		name    string
		handler kplug.ReconcileFunc
		want    string
	}{
		{"error", func(context.Context, *kplug.Request) (*kplug.Response, error) {
			return kplug.OK().WithStatus(map[string]any{"ignored": true}), errors.New("serverName is required")
		}, "serverName is required"},
		{"panic", func(context.Context, *kplug.Request) (*kplug.Response, error) {
			panic(errors.New("the driver lost its connection"))
		}, "the plugin's Reconcile handler panicked: the driver lost its connection"},
		{"nil-response", func(context.Context, *kplug.Request) (*kplug.Response, error) {
			return nil, nil
		}, "the plugin's Reconcile handler returned a nil *kplug.Response and no error; return kplug.OK(), kplug.Retry(...) or kplug.Failed(...)"},
		{"reserved-key", func(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
			return kplug.OK().WithStatus(map[string]any{"observedGeneration": req.Generation()}), nil
		}, `plugin bug: status: key "observedGeneration" is reserved for the operator (it owns conditions, implementation, observedGeneration and plugin); report it under another key, or as a condition`},
	} {
		logs, buf := withLogs(t)
		server := kplugtest.StartPlugin(t, dir, kplug.Info{Name: tc.name, Version: "1"}, tc.handler, logs)
		client := kplugtest.Dial(t, server.SocketPath())
		r, err := client.Reconcile(ctxFor(t, 2*time.Second), reconcileRequest(nil))
		if err != nil {
			t.Fatalf("%s: a gRPC error instead of a FAILED response: %v", tc.name, err)
		}
		want := &kplugv1.ReconcileResponse{Outcome: kplugv1.Outcome_OUTCOME_FAILED, Message: tc.want}
		if !proto.Equal(r, want) {
			t.Errorf("%s: got %v, want %v", tc.name, r, want)
		}
		if tc.name == "panic" && len(buf.lines("the handler panicked")) != 1 {
			t.Errorf("the panic was not logged: %s", buf)
		}
		if p, err := client.Probe(ctxFor(t, 2*time.Second), &kplugv1.ProbeRequest{}); err != nil || !p.GetReady() {
			t.Errorf("%s: the plugin stopped serving: %v %v", tc.name, p, err)
		}
	}
}

func TestInvalidJSONFromTheOperatorNeverReachesTheHandler(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	var called atomic.Bool
	server := kplugtest.StartPlugin(t, dir, info, kplug.ReconcileFunc(func(context.Context, *kplug.Request) (*kplug.Response, error) {
		called.Store(true)
		return kplug.OK(), nil
	}))
	client := kplugtest.Dial(t, server.SocketPath())
	r, err := client.Reconcile(ctxFor(t, 2*time.Second), &kplugv1.ReconcileRequest{Implementation: "PostgreSQL", Object: []byte("{oops")})
	if err != nil || r.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED || !strings.HasPrefix(r.GetMessage(), "kplug: the base object is not valid JSON: ") {
		t.Errorf("got %v, %v", r, err)
	}
	f, err := client.Finalize(ctxFor(t, 2*time.Second), &kplugv1.FinalizeRequest{Object: []byte(`{}`), Extensions: [][]byte{[]byte(`7`)}})
	if err != nil || f.GetOutcome() != kplugv1.Outcome_OUTCOME_FAILED || f.GetMessage() != "kplug: extension #0 is not a JSON object" {
		t.Errorf("got %v, %v", f, err)
	}
	if called.Load() {
		t.Error("the handler was called")
	}
}

func TestFinalize(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	request := &kplugv1.FinalizeRequest{Implementation: "PostgreSQL", Object: reconcileRequest(nil).GetObject()}
	// Without a Finalizer: done at once.
	plain := kplugtest.StartPlugin(t, dir, kplug.Info{Name: "plain", Version: "1"}, &echo{})
	r, err := kplugtest.Dial(t, plain.SocketPath()).Finalize(ctxFor(t, 2*time.Second), request)
	if err != nil || !proto.Equal(r, &kplugv1.FinalizeResponse{Outcome: kplugv1.Outcome_OUTCOME_OK}) {
		t.Errorf("default Finalize: %v, %v", r, err)
	}
	fin := kplugtest.StartPlugin(t, dir, kplug.Info{Name: "fin", Version: "1"}, &finalizing{})
	r, err = kplugtest.Dial(t, fin.SocketPath()).Finalize(ctxFor(t, 2*time.Second), request)
	if err != nil || r.GetOutcome() != kplugv1.Outcome_OUTCOME_RETRY || r.GetMessage() != "still dropping" || r.GetRetryAfter().AsDuration() != time.Second {
		t.Errorf("Finalize: %v, %v", r, err)
	}
}

func TestCallsRunConcurrently(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	var running, most atomic.Int32
	plugin := kplug.ReconcileFunc(func(context.Context, *kplug.Request) (*kplug.Response, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(500 * time.Millisecond)
		return kplug.OK(), nil
	})
	server := kplugtest.StartPlugin(t, dir, info, plugin)
	client := kplugtest.Dial(t, server.SocketPath())
	start := time.Now()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := client.Reconcile(ctxFor(t, 5*time.Second), reconcileRequest(nil))
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed > 1500*time.Millisecond || most.Load() != 4 {
		t.Errorf("4 calls of 0.5s took %v with at most %d at once; they must run concurrently", elapsed, most.Load())
	}
}

func TestLargeObjectsFit(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	server := kplugtest.StartPlugin(t, dir, info, &echo{})
	big := strings.Repeat("x", 10<<20) // over gRPC's 4 MiB default, both ways
	r, err := kplugtest.Dial(t, server.SocketPath()).Reconcile(ctxFor(t, 20*time.Second), reconcileRequest(map[string]any{"blob": big}))
	if err != nil {
		t.Fatal(err)
	}
	var status struct{ Spec struct{ Blob string } }
	if err := json.Unmarshal(r.GetStatus(), &status); err != nil || status.Spec.Blob != big {
		t.Errorf("the 10 MiB status did not come back: %v", err)
	}
}

func TestStopUnregistersDrainsAndRemovesTheSocket(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	started := make(chan struct{}, 1)
	plugin := kplug.ReconcileFunc(func(ctx context.Context, req *kplug.Request) (*kplug.Response, error) {
		started <- struct{}{}
		return slowReconcile(ctx, req)
	})
	server := kplugtest.StartPlugin(t, dir, info, plugin, kplug.WithHeartbeatInterval(100*time.Millisecond), kplug.WithGracePeriod(10*time.Second))
	registry.WaitForHeartbeats(t, 1, 5*time.Second)
	client := kplugtest.Dial(t, server.SocketPath())

	type result struct {
		r   *kplugv1.ReconcileResponse
		err error
	}
	inFlight := make(chan result, 1)
	go func() {
		r, err := client.Reconcile(ctxFor(t, 10*time.Second), nap(1.5))
		inFlight <- result{r, err}
	}()
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- server.Stop(ctxFor(t, 20*time.Second)) }()

	unregister := registry.WaitForUnregisters(t, 1, 3*time.Second)[0].Request
	if unregister.GetName() != "postgresql" || unregister.GetInstanceId() != server.InstanceID() {
		t.Errorf("Unregister %v", unregister)
	}
	beats := len(registry.Heartbeats())
	// New calls are turned away while the old one drains.
	eventually(t, 2*time.Second, "a new call refused while draining", func() bool {
		_, err := kplugtest.Dial(t, server.SocketPath()).Reconcile(ctxFor(t, time.Second), nap(0))
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
	if err := <-stopped; err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := os.Lstat(server.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(registry.Heartbeats()); n != beats {
		t.Errorf("%d heartbeats after Unregister", n-beats)
	}
	if server.Registered() {
		t.Error("Registered() after Stop")
	}
}

func TestStopGivesUpWhenItsContextEnds(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	started := make(chan struct{}, 1)
	var cancelled atomic.Bool
	plugin := kplug.ReconcileFunc(func(ctx context.Context, _ *kplug.Request) (*kplug.Response, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled.Store(true)
		return nil, ctx.Err()
	})
	server := kplugtest.StartPlugin(t, dir, info, plugin, kplug.WithGracePeriod(time.Minute))
	client := kplugtest.Dial(t, server.SocketPath())
	inFlight := make(chan error, 1)
	go func() {
		_, err := client.Reconcile(ctxFor(t, time.Minute), nap(0))
		inFlight <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := server.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("Stop: %v after %v, want DeadlineExceeded after about 0.5s", err, time.Since(start))
	}
	if err := <-inFlight; status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Errorf("the abandoned call: %v", err)
	}
	eventually(t, 2*time.Second, "the abandoned handler's ctx is cancelled", cancelled.Load)
	if _, err := os.Lstat(server.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
}

func TestGracePeriodBoundsTheDrain(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	started := make(chan struct{}, 1)
	plugin := kplug.ReconcileFunc(func(ctx context.Context, _ *kplug.Request) (*kplug.Response, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	server := kplugtest.StartPlugin(t, dir, info, plugin, kplug.WithGracePeriod(300*time.Millisecond))
	go func() { _, _ = kplugtest.Dial(t, server.SocketPath()).Reconcile(ctxFor(t, time.Minute), nap(0)) }()
	<-started
	start := time.Now()
	if err := server.Stop(ctxFor(t, time.Minute)); err != nil {
		t.Errorf("Stop after the grace period: %v, want nil", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("Stop took %v, want about the 300ms grace period", d)
	}
}

func TestServeRunsUntilTheContextEnds(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	registry := kplugtest.StartRegistry(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- kplug.Serve(ctx, info, &echo{}, kplug.WithSocketDir(dir), kplug.WithHeartbeatInterval(50*time.Millisecond), kplug.WithLogger(kplugtest.Logger(t)))
	}()
	registry.WaitForHeartbeats(t, 2, 5*time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	registry.WaitForUnregisters(t, 1, time.Second)
	if _, err := os.Lstat(filepath.Join(dir, "plugins", "postgresql", "plugin.sock")); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
}

func TestSecondInstanceDoesNotStealALiveSocket(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	first := kplugtest.StartPlugin(t, dir, info, &echo{})
	second, err := kplug.NewServer(info, &echo{}, kplug.WithSocketDir(dir), kplug.WithLogger(kplugtest.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	err = second.Start()
	if !errors.Is(err, kplug.ErrSocketInUse) || !strings.Contains(err.Error(), first.SocketPath()) {
		t.Fatalf("second Start: %v, want ErrSocketInUse naming the path", err)
	}
	if err := second.Stop(ctxFor(t, time.Second)); err != nil {
		t.Errorf("Stop after a failed Start: %v", err)
	}
	if _, err := kplugtest.Dial(t, first.SocketPath()).Probe(ctxFor(t, 2*time.Second), &kplugv1.ProbeRequest{}); err != nil {
		t.Errorf("the first instance lost its socket: %v", err)
	}
}

func TestAServerStartsOverAStaleSocketAndNotOverAFile(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	crashed, err := kplug.NewServer(info, &echo{}, kplug.WithSocketDir(dir), kplug.WithLogger(kplugtest.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	path := crashed.SocketPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := crashed.Start(); !errors.Is(err, kplug.ErrNotASocket) {
		t.Fatalf("Start over a file: %v, want ErrNotASocket", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("the file was touched")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// A plugin killed with SIGKILL leaves its socket file behind.
	killed, _ := startProcess(t, "KPLUG_TEST_PLUGIN=slow", "KPLUG_SOCKET_DIR="+dir)
	eventually(t, 10*time.Second, "the killed plugin's socket", func() bool {
		_, err := os.Lstat(filepath.Join(dir, "plugins", "slow", "plugin.sock"))
		return err == nil
	})
	_ = killed.Process.Kill()
	_ = killed.Wait()
	stale := kplugtest.StartPlugin(t, dir, kplug.Info{Name: "slow", Version: "2"}, &echo{})
	r, err := kplugtest.Dial(t, stale.SocketPath()).GetInfo(ctxFor(t, 2*time.Second), &kplugv1.GetInfoRequest{})
	if err != nil || r.GetVersion() != "2" {
		t.Errorf("the new instance does not serve the path: %v %v", r, err)
	}
}

func TestEnvironmentConfiguresTheServer(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	t.Setenv("KPLUG_SOCKET_DIR", dir)
	t.Setenv("KPLUG_HEARTBEAT_INTERVAL", "0.25")
	server, err := kplug.NewServer(info, &echo{})
	if err != nil {
		t.Fatal(err)
	}
	if server.SocketPath() != filepath.Join(dir, "plugins", "postgresql", "plugin.sock") || server.HeartbeatInterval() != 250*time.Millisecond {
		t.Errorf("from the environment: %s, %v", server.SocketPath(), server.HeartbeatInterval())
	}
	// Options win over the environment.
	server, err = kplug.NewServer(info, &echo{}, kplug.WithSocketDir("/elsewhere"), kplug.WithHeartbeatInterval(time.Second))
	if err != nil || server.SocketPath() != "/elsewhere/plugins/postgresql/plugin.sock" || server.HeartbeatInterval() != time.Second {
		t.Errorf("options: %v, %v", server, err)
	}
	// Empty or unset: the defaults.
	t.Setenv("KPLUG_SOCKET_DIR", "")
	t.Setenv("KPLUG_HEARTBEAT_INTERVAL", "")
	server, err = kplug.NewServer(info, &echo{})
	if err != nil || server.SocketPath() != "/var/run/kplug/plugins/postgresql/plugin.sock" || server.HeartbeatInterval() != 5*time.Second {
		t.Errorf("defaults: %v, %v", server, err)
	}
	// A relative socket dir is made absolute (the socket path in heartbeats stays relative).
	t.Chdir(dir)
	server, err = kplug.NewServer(info, &echo{}, kplug.WithSocketDir("sockets"))
	if err != nil || server.SocketPath() != filepath.Join(dir, "sockets", "plugins", "postgresql", "plugin.sock") {
		t.Errorf("relative: %v, %v", server, err)
	}
}

func TestInvalidSettingsAreStartupErrors(t *testing.T) {
	for _, value := range []string{"soon", "0", "-1", "nan", "NaN", "inf", "1e300"} {
		t.Setenv("KPLUG_HEARTBEAT_INTERVAL", value)
		_, err := kplug.NewServer(info, &echo{})
		if !errors.Is(err, kplug.ErrInvalidConfig) || !strings.Contains(err.Error(), "plugin postgresql: invalid KPLUG_HEARTBEAT_INTERVAL=") {
			t.Errorf("KPLUG_HEARTBEAT_INTERVAL=%s: %v", value, err)
		}
	}
	t.Setenv("KPLUG_HEARTBEAT_INTERVAL", "")
	for _, opt := range []kplug.Option{kplug.WithHeartbeatInterval(0), kplug.WithGracePeriod(-time.Second), kplug.WithSocketDir(""), kplug.WithLogger(nil)} {
		if _, err := kplug.NewServer(info, &echo{}, opt); !errors.Is(err, kplug.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "plugin postgresql: ") {
			t.Errorf("%v", err)
		}
	}
	if _, err := kplug.NewServer(kplug.Info{Name: "Bad_Name"}, &echo{}); !errors.Is(err, kplug.ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := kplug.NewServer(info, nil); !errors.Is(err, kplug.ErrInvalidConfig) {
		t.Errorf("nil plugin: %v", err)
	}
}

func TestStopWithoutGraceStillRemovesTheSocket(t *testing.T) {
	dir := kplugtest.SocketDir(t)
	for i := range 20 {
		server := kplugtest.StartPlugin(t, dir, info, &echo{}, kplug.WithGracePeriod(0))
		if err := server.Stop(ctxFor(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(server.SocketPath()); !os.IsNotExist(err) {
			t.Fatalf("round %d: the socket is still there: %v", i, err)
		}
	}
}
