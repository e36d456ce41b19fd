package kplug

import (
	"context"
	"encoding/hex"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// receiver is a real OTLP/gRPC trace receiver that keeps every span.
type receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans [][4]string // service.name, trace id, parent span id, name
}

func (r *receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, [4]string{service, hex.EncodeToString(s.GetTraceId()), hex.EncodeToString(s.GetParentSpanId()), s.GetName()})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func TestTheHandlerSpanContinuesTheOperatorsTrace(t *testing.T) {
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &receiver{}
	collector := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(collector, rec)
	go func() { _ = collector.Serve(lis) }()
	defer collector.Stop()

	t.Setenv(OTLPEndpointEnv, "http://"+lis.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stop, err := startTracing(ctx, "greeter")
	if err != nil || stop == nil {
		t.Fatalf("startTracing: %v", err)
	}
	info := Info{Name: "greeter", Version: "1.0.0", Offers: []Offer{{Base: GroupKind{Group: "example.com", Kind: "Greeting"}, Implementation: "Hi"}}}
	plugin := ReconcileFunc(func(ctx context.Context, _ *Request) (*Response, error) {
		// A span the handler starts itself is a child of the SDK's.
		_, span := otel.Tracer("greeter").Start(ctx, "say hello")
		span.End()
		return OK(), nil
	})
	dir := t.TempDir()
	s, err := NewServer(info, plugin, WithSocketDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "plugins", "greeter", "plugin.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-"+parent+"-01")
	answer, err := kplugv1.NewPluginClient(conn).Reconcile(call, &kplugv1.ReconcileRequest{
		Implementation: "Hi",
		Object:         []byte(`{"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": "world", "namespace": "default"}}`),
	})
	if err != nil || answer.GetOutcome() != kplugv1.Outcome_OUTCOME_OK {
		t.Fatalf("Reconcile: %v %v", answer, err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stop(ctx); err != nil {
		t.Fatalf("flushing spans: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var handler, own bool
	for _, span := range rec.spans {
		switch {
		case span == [4]string{"greeter", traceID, parent, "plugin handler"}:
			handler = true
		case span[1] == traceID && span[3] == "say hello":
			own = true
		}
	}
	if !handler || !own {
		t.Fatalf("want the handler's span under the operator's and the handler's own under it; got %v", rec.spans)
	}
}

func TestWithoutAnEndpointNothingIsExported(t *testing.T) {
	t.Setenv(OTLPEndpointEnv, "")
	stop, err := startTracing(context.Background(), "greeter")
	if stop != nil || err != nil {
		t.Fatalf("got a stop function %t and error %v; want neither", stop != nil, err)
	}
}
