package kplug_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kplug/kplug/sidecar-sdk/go"
)

// A whole plugin: the body of main.
func ExampleMain() {
	kplug.Main(kplug.Info{
		Name:    "hello",
		Version: "1.0.0",
		Offers:  []kplug.Offer{{Base: kplug.GroupKind{Group: "example.com", Kind: "Greeting"}, Implementation: "Hello"}},
	}, kplug.ReconcileFunc(func(ctx context.Context, req *kplug.Request) (*kplug.Response, error) {
		return kplug.OK().WithStatus(map[string]any{"greeting": "hello, " + req.Name()}), nil
	}))
}

// Building a response, and what goes on the wire.
func ExampleResponse() {
	req, _ := kplug.DecodeRequest("PostgreSQL",
		[]byte(`{"apiVersion": "myorg.org/v1", "kind": "DatabaseTable", "metadata": {"name": "users", "namespace": "shop"}}`),
		[]byte(`{"apiVersion": "myorg.org/v1", "kind": "DatabaseTablePostgreSqlExtension", "metadata": {"name": "users-pg", "namespace": "shop"}}`))
	wire := kplug.Retry(30*time.Second).
		WithMessage("waiting for the database").
		WithStatus(map[string]any{"phase": "Pending"}).
		WithExtensionStatus(req.Extension("DatabaseTablePostgreSqlExtension"), map[string]any{"partitions": 0}).
		WithCondition("TableReady", kplug.ConditionFalse, "DatabaseDown", "cannot connect").
		WithWarning("DatabaseDown", "cannot connect to the database").
		ReconcileResponse()
	fmt.Println(wire.GetOutcome(), wire.GetRetryAfter().AsDuration(), wire.GetMessage())
	fmt.Println(string(wire.GetStatus()))
	fmt.Println(wire.GetExtensionStatuses()[0].GetTarget().GetName(), string(wire.GetExtensionStatuses()[0].GetStatus()))
	fmt.Println(wire.GetConditions()[0].GetType(), wire.GetConditions()[0].GetStatus())
	fmt.Println(wire.GetEvents()[0].GetType(), wire.GetEvents()[0].GetReason())
	// Output:
	// OUTCOME_RETRY 30s waiting for the database
	// {"phase":"Pending"}
	// users-pg {"partitions":0}
	// TableReady CONDITION_STATUS_FALSE
	// EVENT_TYPE_WARNING DatabaseDown
}

// A mistake in a response (here a status key the operator owns) turns it
// into a FAILED answer that says what is wrong, shown on the resource.
func ExampleResponse_Err() {
	r := kplug.OK().WithStatus(map[string]any{"observedGeneration": 3})
	fmt.Println(r.Err())
	wire := r.ReconcileResponse()
	fmt.Println(wire.GetOutcome(), len(wire.GetStatus()))
	// Output:
	// status: key "observedGeneration" is reserved for the operator (it owns conditions, implementation, observedGeneration and plugin); report it under another key, or as a condition
	// OUTCOME_FAILED 0
}

// Unit-testing a plugin's Reconcile without a socket.
func ExampleDecodeRequest() {
	plugin := kplug.ReconcileFunc(func(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
		var spec struct {
			Columns []string `json:"columns"`
		}
		if err := req.DecodeSpec(&spec); err != nil {
			return nil, err
		}
		return kplug.OK().WithMessage(fmt.Sprintf("%d columns in %s", len(spec.Columns), req)), nil
	})
	req, err := kplug.DecodeRequest("PostgreSQL", []byte(`{"kind": "DatabaseTable", "metadata": {"name": "users", "namespace": "shop"}, "spec": {"columns": ["id", "name"]}}`))
	if err != nil {
		panic(err)
	}
	resp, err := plugin.Reconcile(context.Background(), req)
	fmt.Println(resp.Outcome(), resp.Message(), err)
	// Output: OK 2 columns in DatabaseTable shop/users <nil>
}

// A plugin that reports not ready while its database is down.
func ExampleReadinessGate() {
	type Plugin struct {
		kplug.ReadinessGate
		kplug.ReconcileFunc
	}
	p := &Plugin{ReconcileFunc: func(context.Context, *kplug.Request) (*kplug.Response, error) { return kplug.OK(), nil }}
	p.SetNotReady("database unreachable")
	fmt.Println(p.Readiness(context.Background()))
	p.SetReady()
	fmt.Println(p.Readiness(context.Background()))
	// Output:
	// {false database unreachable}
	// {true }
}

// Children: the offer declares the kinds, the answer desires the objects,
// and the request carries them as they are now.
func ExampleResponse_WithChild() {
	offer := kplug.Offer{
		Base: kplug.GroupKind{Group: "example.com", Kind: "Greeting"}, Implementation: "Hello",
		Children: []kplug.GroupVersionKind{kplug.FromAPIVersionAndKind("v1", "ConfigMap")},
	}
	plugin := kplug.ReconcileFunc(func(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
		name := "greeting-" + req.Name()
		resp := kplug.OK().WithChild(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name},
			"data":     map[string]any{"greeting": "hello, " + req.Name()},
		})
		if req.Child("ConfigMap", name) == nil {
			resp.WithMessage("creating " + name)
		}
		return resp, nil
	})
	req, _ := kplug.DecodeRequest("Hello", []byte(`{"kind": "Greeting", "metadata": {"name": "world", "namespace": "default"}}`))
	resp, _ := plugin.Reconcile(context.Background(), req)
	wire := resp.ReconcileResponse()
	fmt.Println(offer.Children[0].APIVersion(), wire.GetMessage())
	fmt.Println(string(wire.GetChildren().GetObjects()[0]))
	_ = req.DecodeChildren([]byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "greeting-world"}}`))
	resp, _ = plugin.Reconcile(context.Background(), req)
	fmt.Printf("%q\n", resp.Message())
	// Output:
	// v1 creating greeting-world
	// {"apiVersion":"v1","data":{"greeting":"hello, world"},"kind":"ConfigMap","metadata":{"name":"greeting-world"}}
	// ""
}
