package kplug_test

// The shared SDK conformance cases (sidecar-sdk/conformance/cases.json),
// against the Go conformance plugin (internal/conformance) run as a real
// plugin process on a real socket, with a real gRPC client: the Go twin of
// sidecar-sdk/python/tests/test_conformance.py. The plugin's behaviour and
// the cases' format are specified in sidecar-sdk/conformance/README.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugtest"
	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

const casesFile = "../conformance/cases.json"

type conformanceCase struct {
	Name    string                     `json:"name"`
	Request map[string]json.RawMessage `json:"request"`
	Expect  map[string]any             `json:"expect"`
}

func TestConformance(t *testing.T) {
	data, err := os.ReadFile(casesFile)
	if err != nil {
		t.Fatalf("the shared cases: %v", err)
	}
	var document struct {
		Cases []conformanceCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &document); err != nil {
		t.Fatalf("%s: %v", casesFile, err)
	}
	if len(document.Cases) < 20 {
		t.Fatalf("%s has %d cases; the file looks truncated", casesFile, len(document.Cases))
	}

	// One plugin process for all cases, which run in file order (the
	// setReadiness cases change what later Probe cases see).
	dir := kplugtest.SocketDir(t)
	process, stderr := startProcess(t, "KPLUG_TEST_PLUGIN=conformance", "KPLUG_SOCKET_DIR="+dir, "KPLUG_HEARTBEAT_INTERVAL=60")
	socket := filepath.Join(dir, "plugins", "conformance", "plugin.sock")
	eventually(t, 15*time.Second, "the conformance plugin's socket", func() bool {
		info, err := os.Lstat(socket)
		return err == nil && info.Mode().Type() == os.ModeSocket
	})
	client := kplugtest.Dial(t, socket)

	passed := 0
	for _, c := range document.Cases {
		if !t.Run(c.Name, func(t *testing.T) { runCase(t, client, c) }) {
			continue
		}
		passed++
	}
	t.Logf("%d/%d shared cases passed", passed, len(document.Cases))

	if err := process.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, process, 15*time.Second); code != 0 {
		t.Errorf("the conformance plugin exited with %d after SIGTERM:\n%s", code, stderr)
	}
}

func runCase(t *testing.T, client kplugv1.PluginClient, c conformanceCase) {
	var rpc string
	mustUnmarshal(t, c.Request["rpc"], &rpc)
	expect := c.Expect
	var actual map[string]any
	ctx := ctxFor(t, 5*time.Second)
	switch rpc {
	case "GetInfo":
		r, err := client.GetInfo(ctx, &kplugv1.GetInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		actual = infoJSON(r)
	case "Probe":
		r, err := client.Probe(ctx, &kplugv1.ProbeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		actual = map[string]any{"ready": r.GetReady(), "message": r.GetMessage()}
	case "Reconcile", "Finalize", "Hook":
		implementation, object, extensions := encodeRequest(t, c.Request)
		var response proto.Message
		var err error
		switch rpc {
		case "Reconcile":
			children := encodeList(t, c.Request["children"])
			response, err = client.Reconcile(ctx, &kplugv1.ReconcileRequest{Implementation: implementation, Object: object, Extensions: extensions, Children: children})
		case "Finalize":
			response, err = client.Finalize(ctx, &kplugv1.FinalizeRequest{Implementation: implementation, Object: object, Extensions: extensions})
		default:
			var hook, phase, outcome, message string
			mustUnmarshal(t, c.Request["hook"], &hook)
			mustUnmarshal(t, c.Request["phase"], &phase)
			mustUnmarshal(t, c.Request["outcome"], &outcome)
			mustUnmarshal(t, c.Request["message"], &message)
			response, err = client.Hook(ctx, &kplugv1.HookRequest{
				Hook: hook, Phase: kplugv1.HookPhase(kplugv1.HookPhase_value["HOOK_PHASE_"+phase]),
				Implementation: implementation, Object: object, Extensions: extensions,
				Outcome: kplugv1.Outcome(kplugv1.Outcome_value["OUTCOME_"+outcome]), Message: message,
			})
		}
		if err != nil {
			t.Fatalf("a gRPC error instead of a response: %v", err)
		}
		actual = responseJSON(t, response)
	case "Validate", "Default":
		actual = admissionJSON(t, ctx, client, rpc, c.Request)
	case "Mutate":
		actual = mutateJSON(t, ctx, client, c.Request)
	default:
		t.Fatalf("unknown rpc %q", rpc)
	}
	if _, ok := c.Expect["children"]; rpc == "Reconcile" && !ok {
		// A Reconcile case that says nothing of children expects none: the
		// answer leaves them as they are.
		expect = maps.Clone(expect)
		expect["children"] = nil
	}
	if _, ok := c.Expect["message_contains"]; ok {
		expect = maps.Clone(expect)
		part, _ := expect["message_contains"].(string)
		delete(expect, "message_contains")
		if message, _ := actual["message"].(string); !strings.Contains(message, part) {
			t.Errorf("message %q should contain %q", message, part)
		}
		delete(actual, "message")
	}
	// JSON values compare by value: both sides through encoding/json.
	if got, want := normalize(t, actual), normalize(t, expect); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %s\nwant %s", mustMarshal(t, got), mustMarshal(t, want))
	}
}

// admissionJSON is a Validate or Default answer in the cases' shape, or
// the gRPC error: {grpc_code, message}.
func admissionJSON(t *testing.T, ctx context.Context, client kplugv1.PluginClient, rpc string, request map[string]json.RawMessage) map[string]any {
	implementation, object, _ := encodeRequest(t, request)
	var operation string
	mustUnmarshal(t, request["operation"], &operation)
	op := kplugv1.Operation(kplugv1.Operation_value["OPERATION_"+operation])
	var old []byte
	if raw, ok := request["old_object"]; ok {
		old = reencode(t, raw)
	}
	var actual map[string]any
	var err error
	if rpc == "Validate" {
		var r *kplugv1.ValidateResponse
		r, err = client.Validate(ctx, &kplugv1.ValidateRequest{Implementation: implementation, Operation: op, Object: object, OldObject: old})
		if err == nil {
			errors := []any{}
			for _, e := range r.GetErrors() {
				errors = append(errors, map[string]any{"path": e.GetPath(), "value": e.GetValue(), "message": e.GetMessage()})
			}
			actual = map[string]any{"errors": errors, "warnings": strs(r.GetWarnings())}
		}
	} else {
		var r *kplugv1.DefaultResponse
		r, err = client.Default(ctx, &kplugv1.DefaultRequest{Implementation: implementation, Operation: op, Object: object, OldObject: old})
		if err == nil {
			actual = map[string]any{"patch": statusJSON(t, r.GetPatch()), "warnings": strs(r.GetWarnings())}
		}
	}
	if err != nil {
		s := status.Convert(err)
		actual = map[string]any{"grpc_code": codeName(s.Code().String()), "message": s.Message()}
	}
	return actual
}

// mutateJSON is a Mutate answer in the cases' shape, {patch, warnings},
// or the gRPC error: {grpc_code, message}. live and base are sent only
// when the case has them (empty bytes are the protocol's "none").
func mutateJSON(t *testing.T, ctx context.Context, client kplugv1.PluginClient, request map[string]json.RawMessage) map[string]any {
	implementation, object, _ := encodeRequest(t, request)
	in := &kplugv1.MutateRequest{Implementation: implementation, Object: object}
	if raw, ok := request["live"]; ok {
		in.Live = reencode(t, raw)
	}
	if raw, ok := request["base"]; ok {
		in.Base = reencode(t, raw)
	}
	r, err := client.Mutate(ctx, in)
	if err != nil {
		s := status.Convert(err)
		return map[string]any{"grpc_code": codeName(s.Code().String()), "message": s.Message()}
	}
	return map[string]any{"patch": statusJSON(t, r.GetPatch()), "warnings": strs(r.GetWarnings())}
}

// codeName is a gRPC code's name as the cases write it: InvalidArgument
// is INVALID_ARGUMENT.
func codeName(camel string) string {
	var b strings.Builder
	for i, r := range camel {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

func strs(items []string) []any {
	out := []any{}
	for _, s := range items {
		out = append(out, s)
	}
	return out
}

func seconds(d *durationpb.Duration) any {
	if d == nil {
		return nil
	}
	return float64(d.GetSeconds()) + float64(d.GetNanos())/1e9
}

// encodeRequest JSON-encodes the case's object (or takes object_raw as-is)
// and extensions, as the operator would send them.
func encodeRequest(t *testing.T, request map[string]json.RawMessage) (string, []byte, [][]byte) {
	var implementation string
	mustUnmarshal(t, request["implementation"], &implementation)
	var object []byte
	if raw, ok := request["object_raw"]; ok {
		var s string
		mustUnmarshal(t, raw, &s)
		object = []byte(s)
	} else {
		object = reencode(t, request["object"])
	}
	return implementation, object, encodeList(t, request["extensions"])
}

// encodeList JSON-encodes each value of a list (absent: none).
func encodeList(t *testing.T, raw json.RawMessage) [][]byte {
	var values []json.RawMessage
	if raw != nil {
		mustUnmarshal(t, raw, &values)
	}
	encoded := make([][]byte, 0, len(values))
	for _, v := range values {
		encoded = append(encoded, reencode(t, v))
	}
	return encoded
}

// reencode is a JSON value as UTF-8 JSON (the file's text may use \u escapes).
func reencode(t *testing.T, raw json.RawMessage) []byte {
	var v any
	mustUnmarshal(t, raw, &v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

func infoJSON(r *kplugv1.GetInfoResponse) map[string]any {
	offers := []any{}
	for _, o := range r.GetOffers() {
		extensions := []any{}
		for _, e := range o.GetExtensions() {
			extensions = append(extensions, map[string]any{"group": e.GetGroup(), "kind": e.GetKind()})
		}
		children := []any{}
		for _, c := range o.GetChildren() {
			children = append(children, map[string]any{"group": c.GetGroup(), "version": c.GetVersion(), "kind": c.GetKind()})
		}
		offers = append(offers, map[string]any{
			"base":           map[string]any{"group": o.GetBase().GetGroup(), "kind": o.GetBase().GetKind()},
			"implementation": o.GetImplementation(),
			"extensions":     extensions,
			"children":       children,
		})
	}
	capabilities := []any{}
	for _, c := range r.GetCapabilities() {
		capabilities = append(capabilities, strings.TrimPrefix(c.String(), "CAPABILITY_"))
	}
	hooks := []any{}
	for _, h := range r.GetHooks() {
		hooks = append(hooks, map[string]any{
			"name": h.GetName(), "base": map[string]any{"group": h.GetBase().GetGroup(), "kind": h.GetBase().GetKind()},
			"phase":     strings.TrimPrefix(h.GetPhase().String(), "HOOK_PHASE_"),
			"behaviour": strings.TrimPrefix(h.GetBehaviour().String(), "HOOK_BEHAVIOUR_"),
			"order":     h.GetOrder(),
		})
	}
	policies := []any{}
	for _, p := range r.GetCallPolicies() {
		policies = append(policies, map[string]any{
			"call":             strings.TrimPrefix(p.GetCall().String(), "CALL_"),
			"deadline_seconds": seconds(p.GetDeadline()),
			"failure_policy":   strings.TrimPrefix(p.GetFailurePolicy().String(), "FAILURE_POLICY_"),
		})
	}
	mutations := []any{}
	for _, m := range r.GetMutations() {
		k := m.GetKind()
		mutations = append(mutations, map[string]any{"group": k.GetGroup(), "version": k.GetVersion(), "kind": k.GetKind()})
	}
	return map[string]any{
		"name": r.GetName(), "version": r.GetVersion(), "protocol": r.GetProtocol(), "description": r.GetDescription(),
		"offers": offers, "capabilities": capabilities, "hooks": hooks, "call_policies": policies, "mutations": mutations,
	}
}

// responseJSON is a Reconcile, Finalize or Hook response in the cases' shape.
func responseJSON(t *testing.T, response proto.Message) map[string]any {
	type common interface {
		GetOutcome() kplugv1.Outcome
		GetMessage() string
		GetEvents() []*kplugv1.Event
	}
	r := response.(common)
	var retryAfter any
	switch m := response.(type) {
	case *kplugv1.ReconcileResponse:
		if m.RetryAfter != nil {
			retryAfter = float64(m.GetRetryAfter().GetSeconds()) + float64(m.GetRetryAfter().GetNanos())/1e9
		}
	case *kplugv1.FinalizeResponse:
		if m.RetryAfter != nil {
			retryAfter = float64(m.GetRetryAfter().GetSeconds()) + float64(m.GetRetryAfter().GetNanos())/1e9
		}
	case *kplugv1.HookResponse:
		retryAfter = seconds(m.GetRetryAfter())
	}
	events := []any{}
	for _, e := range r.GetEvents() {
		var regarding any
		if e.Regarding != nil {
			regarding = refJSON(e.GetRegarding())
		}
		events = append(events, map[string]any{
			"type":   titleCase(strings.TrimPrefix(e.GetType().String(), "EVENT_TYPE_")),
			"reason": e.GetReason(), "message": e.GetMessage(), "regarding": regarding,
		})
	}
	actual := map[string]any{
		"outcome":             strings.TrimPrefix(r.GetOutcome().String(), "OUTCOME_"),
		"message":             r.GetMessage(),
		"retry_after_seconds": retryAfter,
		"events":              events,
	}
	if m, ok := response.(*kplugv1.HookResponse); ok {
		actual["status"] = statusJSON(t, m.GetStatus())
	}
	if m, ok := response.(*kplugv1.ReconcileResponse); ok {
		actual["status"] = statusJSON(t, m.GetStatus())
		statuses := []any{}
		for _, s := range m.GetExtensionStatuses() {
			statuses = append(statuses, map[string]any{"target": refJSON(s.GetTarget()), "status": statusJSON(t, s.GetStatus())})
		}
		actual["extension_statuses"] = statuses
		conditions := []any{}
		for _, c := range m.GetConditions() {
			conditions = append(conditions, map[string]any{
				"type":   c.GetType(),
				"status": titleCase(strings.TrimPrefix(c.GetStatus().String(), "CONDITION_STATUS_")),
				"reason": c.GetReason(), "message": c.GetMessage(),
			})
		}
		actual["conditions"] = conditions
		actual["children"] = childrenJSON(t, m.GetChildren())
	}
	return actual
}

// childrenJSON is a response's children as the cases write them: nil when
// the answer carries no children message, else each child decoded.
func childrenJSON(t *testing.T, children *kplugv1.Children) any {
	t.Helper()
	if children == nil {
		return nil
	}
	decoded := []any{}
	for _, c := range children.GetObjects() {
		var v any
		mustUnmarshal(t, c, &v)
		decoded = append(decoded, v)
	}
	return decoded
}

func refJSON(r *kplugv1.ObjectRef) map[string]any {
	return map[string]any{"apiVersion": r.GetApiVersion(), "kind": r.GetKind(), "namespace": r.GetNamespace(), "name": r.GetName()}
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return s[:1] + strings.ToLower(s[1:])
}

// statusJSON decodes status bytes (nil when empty), checking that they are
// compact JSON: no whitespace outside strings, and non-ASCII characters as
// UTF-8, not \u escapes.
func statusJSON(t *testing.T, raw []byte) any {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		t.Fatalf("status is not JSON: %v: %q", err, raw)
	}
	if compact.Len() != len(raw) {
		t.Errorf("status is not compact JSON: %.200q", raw)
	}
	if escapes := needlessEscapes(raw); len(escapes) > 0 {
		t.Errorf("status escapes characters that UTF-8 JSON carries as they are: %q", escapes)
	}
	var v any
	mustUnmarshal(t, raw, &v)
	return v
}

// needlessEscapes lists the \uXXXX escapes of characters other than control
// characters (which must be escaped) in valid JSON.
func needlessEscapes(raw []byte) []string {
	var found []string
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			if raw[i+1] == 'u' {
				if code, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 32); err == nil && code >= 0x20 {
					found = append(found, string(raw[i:i+6]))
				}
			}
			i++
		}
	}
	return found
}

func normalize(t *testing.T, v any) any {
	t.Helper()
	var out any
	mustUnmarshal(t, mustMarshal(t, v), &out)
	return out
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v: %.200s", err, data)
	}
}

func TestNeedlessEscapesFindsThem(t *testing.T) {
	for in, want := range map[string]int{
		`{"a":"\u00e9"}`:       1,
		`{"a":"\u0001\n\t"}`:   0,
		`{"a":"\\u00e9"}`:      0,
		`{"\u2028":"\u4e16x"}`: 2,
		`{"a":"é 世界"}`:         0,
	} {
		if got := needlessEscapes([]byte(in)); len(got) != want {
			t.Errorf("needlessEscapes(%s) = %q, want %d", in, got, want)
		}
	}
}
