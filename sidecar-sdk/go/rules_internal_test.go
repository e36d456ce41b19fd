package kplug

// The Go SDK against the protocol's rules in
// sidecar-sdk/conformance/rules.json: the file the Rust, Python and
// TypeScript SDKs check themselves against too, and which kplug-proto's own
// test keeps equal to the Rust code. One subtest per rule.

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

const rulesFile = "../conformance/rules.json"

type nameRule struct {
	MaxLength int      `json:"max_length"`
	Valid     []string `json:"valid"`
	Invalid   []struct {
		Name string `json:"name"`
		Why  string `json:"why"`
	} `json:"invalid"`
}

type reservedRule struct {
	Reserved []string `json:"reserved"`
	Allowed  []string `json:"allowed"`
}

type messageLimitRule struct {
	MaxPluginMessageBytes int `json:"max_plugin_message_bytes"`
}

type environmentRule struct {
	SocketDir struct {
		Variable string `json:"variable"`
		Default  string `json:"default"`
	} `json:"socket_dir"`
	HeartbeatInterval struct {
		Variable       string  `json:"variable"`
		DefaultSeconds float64 `json:"default_seconds"`
		Valid          []struct {
			Text    string  `json:"text"`
			Seconds float64 `json:"seconds"`
		} `json:"valid"`
		Invalid []string `json:"invalid"`
	} `json:"heartbeat_interval"`
}

type socketDirRule struct {
	Samples []struct {
		Origin    socketDirOrigin `json:"origin"`
		SocketDir string          `json:"socket_dir"`
		Waiting   string          `json:"waiting"`
		Missing   string          `json:"missing"`
	} `json:"samples"`
}

type backoffRule struct {
	InitialSeconds      float64 `json:"initial_seconds"`
	Factor              int     `json:"factor"`
	Jitter              float64 `json:"jitter"`
	DefaultCapSeconds   float64 `json:"default_cap_seconds"`
	CallDeadlineSeconds float64 `json:"call_deadline_seconds"`
	ToleranceSeconds    float64 `json:"tolerance_seconds"`
	Samples             []struct {
		Attempt      int     `json:"attempt"`
		CapSeconds   float64 `json:"cap_seconds"`
		Unit         float64 `json:"unit"`
		DelaySeconds float64 `json:"delay_seconds"`
	} `json:"samples"`
}

// decode reads raw into v, failing the test when the rule's shape changed.
func decode(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(string(raw)))
	if err := d.Decode(v); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

var ruleChecks = map[string]func(t *testing.T, raw json.RawMessage){
	"plugin_name": func(t *testing.T, raw json.RawMessage) {
		var rule nameRule
		decode(t, raw, &rule)
		if rule.MaxLength != maxNameLength {
			t.Errorf("max_length %d, the SDK has %d", rule.MaxLength, maxNameLength)
		}
		for _, name := range rule.Valid {
			if err := validateName(name); err != nil {
				t.Errorf("%q refused: %v", name, err)
			}
		}
		for _, c := range rule.Invalid {
			_, err := NewServer(Info{Name: c.Name, Version: "1"}, ReconcileFunc(nil))
			if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "it must be a DNS label") {
				t.Errorf("%q (%s): %v, want ErrInvalidName", c.Name, c.Why, err)
			}
		}
	},
	"reserved_status_keys": func(t *testing.T, raw json.RawMessage) {
		var rule reservedRule
		decode(t, raw, &rule)
		if !slices.Equal(ReservedStatusKeys, rule.Reserved) {
			t.Errorf("ReservedStatusKeys = %q, the rule says %q", ReservedStatusKeys, rule.Reserved)
		}
		extension, err := DecodeObject([]byte(`{"apiVersion": "example.com/v1", "kind": "GreetingExtension", "metadata": {"name": "e", "namespace": "default"}}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range rule.Reserved {
			want := `key "` + key + `" is reserved for the operator`
			for what, r := range map[string]*Response{
				"status":           OK().WithStatus(map[string]any{key: 1}),
				"extension status": OK().WithExtensionStatus(extension, map[string]any{key: 1}),
			} {
				if err := r.Err(); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s with %q: %v, want %q", what, key, err, want)
				}
			}
		}
		for _, key := range rule.Allowed {
			r := OK().WithStatus(map[string]any{key: 1}).WithExtensionStatus(extension, map[string]any{key: 1})
			if err := r.Err(); err != nil {
				t.Errorf("%q refused: %v", key, err)
			}
		}
	},
	"reserved_condition_types": func(t *testing.T, raw json.RawMessage) {
		var rule reservedRule
		decode(t, raw, &rule)
		if !slices.Equal(ReservedConditionTypes, rule.Reserved) {
			t.Errorf("ReservedConditionTypes = %q, the rule says %q", ReservedConditionTypes, rule.Reserved)
		}
		for _, typ := range rule.Reserved {
			want := `condition type "` + typ + `" is reserved for the operator`
			if err := OK().WithCondition(typ, ConditionTrue, "Done", "").Err(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v, want %q", typ, err, want)
			}
		}
		for _, typ := range rule.Allowed {
			if err := OK().WithCondition(typ, ConditionTrue, "Done", "").Err(); err != nil {
				t.Errorf("%q refused: %v", typ, err)
			}
		}
	},
	"message_limit": func(t *testing.T, raw json.RawMessage) {
		var rule messageLimitRule
		decode(t, raw, &rule)
		// The server and the registry client pass MaxMessageBytes to gRPC.
		if rule.MaxPluginMessageBytes != MaxMessageBytes {
			t.Errorf("MaxMessageBytes = %d, the rule says %d", MaxMessageBytes, rule.MaxPluginMessageBytes)
		}
	},
	"environment": func(t *testing.T, raw json.RawMessage) {
		var rule environmentRule
		decode(t, raw, &rule)
		dir, interval := rule.SocketDir, rule.HeartbeatInterval
		if dir.Variable != SocketDirEnv || dir.Default != DefaultSocketDir {
			t.Errorf("socket dir %s=%s, the rule says %s=%s", SocketDirEnv, DefaultSocketDir, dir.Variable, dir.Default)
		}
		if interval.Variable != HeartbeatIntervalEnv || seconds(interval.DefaultSeconds) != DefaultHeartbeatInterval {
			t.Errorf("interval %s (default %v), the rule says %s (default %gs)",
				HeartbeatIntervalEnv, DefaultHeartbeatInterval, interval.Variable, interval.DefaultSeconds)
		}
		server := func() (*Server, error) {
			return NewServer(Info{Name: "rules", Version: "1"}, ReconcileFunc(nil))
		}
		for _, value := range []string{"", dir.Default} {
			t.Setenv(dir.Variable, value)
			t.Setenv(interval.Variable, "")
			s, err := server()
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir.Default, "plugins/rules/plugin.sock"); s.SocketPath() != want {
				t.Errorf("%s=%q: socket %s, want %s", dir.Variable, value, s.SocketPath(), want)
			}
			if s.HeartbeatInterval() != DefaultHeartbeatInterval {
				t.Errorf("no %s: interval %v", interval.Variable, s.HeartbeatInterval())
			}
		}
		t.Setenv(dir.Variable, "/tmp/k")
		if s, err := server(); err != nil || s.SocketPath() != "/tmp/k/plugins/rules/plugin.sock" {
			t.Errorf("%s=/tmp/k: %v %v", dir.Variable, s, err)
		}
		for _, c := range interval.Valid {
			t.Setenv(interval.Variable, c.Text)
			got, err := intervalFromEnv("rules")
			if err != nil || math.Abs(got.Seconds()-c.Seconds) > 1e-9 {
				t.Errorf("%s=%q: %v %v, want %gs", interval.Variable, c.Text, got, err, c.Seconds)
			}
		}
		for _, text := range interval.Invalid {
			t.Setenv(interval.Variable, text)
			if got, err := intervalFromEnv("rules"); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%s=%q: accepted as %v", interval.Variable, text, got)
			}
		}
	},
	"socket_dir": func(t *testing.T, raw json.RawMessage) {
		var rule socketDirRule
		decode(t, raw, &rule)
		var origins []socketDirOrigin
		for _, s := range rule.Samples {
			origins = append(origins, s.Origin)
			if got := registryWaitingMessage(s.SocketDir, s.Origin); got != s.Waiting {
				t.Errorf("registryWaitingMessage(%s, %s) = %q, want %q", s.SocketDir, s.Origin, got, s.Waiting)
			}
			if got := socketDirMissingMessage(s.SocketDir, s.Origin); got != s.Missing {
				t.Errorf("socketDirMissingMessage(%s, %s) = %q, want %q", s.SocketDir, s.Origin, got, s.Missing)
			}
		}
		if want := []socketDirOrigin{originDefault, originEnvironment, originProgram}; !slices.Equal(origins, want) {
			t.Errorf("origins %q, want %q", origins, want)
		}
		// Where the server says its socket dir came from.
		server := func(opts ...Option) *Server {
			s, err := NewServer(Info{Name: "rules", Version: "1"}, ReconcileFunc(nil), opts...)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		t.Setenv(SocketDirEnv, "")
		if o := server().origin; o != originDefault {
			t.Errorf("%s empty: origin %s", SocketDirEnv, o)
		}
		t.Setenv(SocketDirEnv, "/tmp/k")
		if o := server().origin; o != originEnvironment {
			t.Errorf("%s=/tmp/k: origin %s", SocketDirEnv, o)
		}
		if o := server(WithSocketDir("/tmp/j")).origin; o != originProgram {
			t.Errorf("WithSocketDir: origin %s", o)
		}
	},
	"heartbeat_backoff": func(t *testing.T, raw json.RawMessage) {
		var rule backoffRule
		decode(t, raw, &rule)
		if seconds(rule.InitialSeconds) != backoffInitial || rule.Factor != backoffFactor || rule.Jitter != backoffJitter {
			t.Errorf("backoff %v ×%d jitter %g, the rule says %gs ×%d jitter %g",
				backoffInitial, backoffFactor, backoffJitter, rule.InitialSeconds, rule.Factor, rule.Jitter)
		}
		if seconds(rule.DefaultCapSeconds) != DefaultHeartbeatInterval || seconds(rule.CallDeadlineSeconds) != heartbeatTimeout {
			t.Errorf("default cap %v, call deadline %v; the rule says %gs, %gs",
				DefaultHeartbeatInterval, heartbeatTimeout, rule.DefaultCapSeconds, rule.CallDeadlineSeconds)
		}
		for _, s := range rule.Samples {
			got := backoffDelay(s.Attempt, seconds(s.CapSeconds), s.Unit)
			if math.Abs(got.Seconds()-s.DelaySeconds) > rule.ToleranceSeconds {
				t.Errorf("backoffDelay(%d, %gs, %g) = %v, want %gs", s.Attempt, s.CapSeconds, s.Unit, got, s.DelaySeconds)
			}
		}
	},
}

func TestRules(t *testing.T) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var document struct {
		Rules map[string]json.RawMessage `json:"rules"`
	}
	if err := json.Unmarshal(data, &document); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var inFile, checked []string
	for name := range document.Rules {
		inFile = append(inFile, name)
	}
	for name := range ruleChecks {
		checked = append(checked, name)
	}
	sort.Strings(inFile)
	sort.Strings(checked)
	if !slices.Equal(inFile, checked) {
		t.Fatalf("%s has the rules %q, this test checks %q", rulesFile, inFile, checked)
	}
	for _, name := range inFile {
		t.Run(name, func(t *testing.T) { ruleChecks[name](t, document.Rules[name]) })
	}
}
