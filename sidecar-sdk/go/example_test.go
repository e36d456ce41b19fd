package kplug_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kplug/kplug/sidecar-sdk/go"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
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

// Backup adds a backup sidecar to the Deployments other plugins desire.
type Backup struct{}

func (Backup) Reconcile(context.Context, *kplug.Request) (*kplug.Response, error) {
	return kplug.OK(), nil
}

// Mutate derives the patch from the call alone, so the same call gets the
// same patch: the operator judges drift by the mutated object.
func (Backup) Mutate(_ context.Context, call *kplug.MutateCall) (*kplug.Mutation, error) {
	containers, _ := call.Object.Get("spec", "template", "spec", "containers")
	list, _ := containers.([]any)
	for _, c := range list {
		if c, _ := c.(map[string]any); c["name"] == "backup" {
			return kplug.NoMutation(), nil // already there: nothing to add
		}
	}
	return kplug.NoMutation().
		Add("/spec/template/spec/containers/-", map[string]any{
			"name": "backup", "image": "example.com/backup:1.0",
			"volumeMounts": []any{map[string]any{"name": "data", "mountPath": "/data", "readOnly": true}},
		}).
		Add("/metadata/annotations/backup.example.com~1enabled", "true").
		WithWarning("a backup sidecar was added to " + call.Object.Name()), nil
}

// A mutator: the kinds it patches are declared in Info.Mutations, and
// implementing kplug.Mutator advertises MUTATE.
func ExampleMutator() {
	info := kplug.Info{
		Name: "backup", Version: "1.0.0",
		Mutations: []kplug.GroupVersionKind{kplug.FromAPIVersionAndKind("apps/v1", "Deployment")},
	}
	call, err := kplug.DecodeMutateCall(&kplugv1.MutateRequest{
		Implementation: "PostgreSQL",
		Object:         []byte(`{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "db"}, "spec": {"template": {"spec": {"containers": [{"name": "postgres"}]}}}}`),
	})
	if err != nil {
		panic(err)
	}
	mutation, _ := Backup{}.Mutate(context.Background(), call)
	wire, err := mutation.MutateResponse()
	fmt.Println(info.Mutations[0].APIVersion(), info.Mutations[0].Kind, err)
	fmt.Println(string(wire.GetPatch()))
	fmt.Println(wire.GetWarnings())
	// Output:
	// apps/v1 Deployment <nil>
	// [{"op":"add","path":"/spec/template/spec/containers/-","value":{"image":"example.com/backup:1.0","name":"backup","volumeMounts":[{"mountPath":"/data","name":"data","readOnly":true}]}},{"op":"add","path":"/metadata/annotations/backup.example.com~1enabled","value":"true"}]
	// [a backup sidecar was added to db]
}
