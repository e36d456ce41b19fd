package kplug

import (
	"path/filepath"
	"time"
)

// The protocol's fixed names and numbers, shared by every kplug SDK and the
// operator (see docs/protocol.md in the kplug repository). Their source is
// the Rust crate kplug-proto; rules_internal_test.go checks these values
// against sidecar-sdk/conformance/rules.json, which kplug-proto's own test
// keeps equal to it.
const (
	// Protocol is the protocol this SDK speaks, sent in heartbeats and GetInfo.
	Protocol = "kplug.v1"

	// SocketDirEnv names the environment variable that overrides the socket dir.
	SocketDirEnv = "KPLUG_SOCKET_DIR"
	// DefaultSocketDir is the socket dir when neither [WithSocketDir] nor
	// $KPLUG_SOCKET_DIR says otherwise: the shared emptyDir's mount point.
	DefaultSocketDir = "/var/run/kplug"
	// RegistrySocket is the operator's socket, relative to the socket dir.
	RegistrySocket = "registry.sock"
	// PluginsDir holds one directory per plugin, relative to the socket dir.
	PluginsDir = "plugins"
	// PluginSocket is the plugin's socket in its own directory:
	// plugins/<name>/plugin.sock. A directory per plugin lets it be a
	// volume of its own, writable only by that plugin's container.
	PluginSocket = "plugin.sock"

	// HeartbeatIntervalEnv names the environment variable holding the
	// heartbeat interval in seconds (may be fractional, e.g. "0.5").
	HeartbeatIntervalEnv = "KPLUG_HEARTBEAT_INTERVAL"
	// DefaultHeartbeatInterval is the heartbeat interval until the operator
	// asks for another one.
	DefaultHeartbeatInterval = 5 * time.Second
	// DefaultGracePeriod bounds how long calls in flight may take to finish
	// at shutdown.
	DefaultGracePeriod = 10 * time.Second
	// DefaultRetryAfter is the delay of a RETRY outcome when the plugin has
	// no better idea (the operator's default too).
	DefaultRetryAfter = 10 * time.Second

	// MaxMessageBytes is the largest gRPC message the plugin accepts or
	// sends: Kubernetes objects can be large, and gRPC's 4 MiB default would
	// turn a big object into a transport error.
	MaxMessageBytes = 64 << 20

	// heartbeatTimeout is the deadline of one Heartbeat call.
	heartbeatTimeout = 2 * time.Second
	// unregisterTimeout is the deadline of the Unregister call at shutdown.
	unregisterTimeout = 10 * time.Second
	// backoffInitial is the first wait after a failed heartbeat;
	// backoffFactor multiplies it after each further failure in a row, up
	// to the heartbeat interval; backoffJitter is the largest fraction by
	// which a wait is shortened at random (never lengthened). See
	// [backoffDelay].
	backoffInitial = 100 * time.Millisecond
	backoffFactor  = 2
	backoffJitter  = 0.1
	// maxNameLength is the longest plugin name (a DNS label).
	maxNameLength = 63
	// maxMessageChars is the longest message the operator keeps; a field
	// error's message and value are cut to it.
	maxMessageChars = 1024
	// maxHooks, maxCallPolicies and maxMutations bound what a plugin
	// declares.
	maxHooks        = 16
	maxCallPolicies = 16
	maxMutations    = 16
	// maxFieldErrors and maxWarnings bound an admission answer; past them,
	// the last one kept says how many more there were. maxWarningChars
	// bounds one warning.
	maxFieldErrors  = 64
	maxWarnings     = 16
	maxWarningChars = 256
	// maxPatchBytes bounds a Default or Mutate answer's JSON Patch.
	maxPatchBytes = 256 << 10
	// maxSocketPathBytes is what sockaddr_un.sun_path holds on Linux,
	// without the final NUL.
	maxSocketPathBytes = 107
)

// ReservedStatusKeys are the status keys the operator owns; a plugin status
// that sets one is refused.
var ReservedStatusKeys = []string{"implementation", "plugin", "observedGeneration", "conditions"}

// ReservedConditionTypes are the condition types the operator owns.
var ReservedConditionTypes = []string{"Ready", "PluginAvailable", "ExtensionsResolved", "Reconciled"}

// DefaultPatchPrefixes are the paths a Default patch may change (each, or
// anything below it).
var DefaultPatchPrefixes = []string{"/spec", "/metadata/labels", "/metadata/annotations"}

// socketDirOrigin is where a plugin's socket dir came from, which its
// messages about the socket dir name (rules.json's socket_dir origins).
type socketDirOrigin string

const (
	// originDefault: $KPLUG_SOCKET_DIR is unset or empty.
	originDefault socketDirOrigin = "default"
	// originEnvironment: $KPLUG_SOCKET_DIR.
	originEnvironment socketDirOrigin = "environment"
	// originProgram: [WithSocketDir]; the variable is not read.
	originProgram socketDirOrigin = "program"
)

// said is where the directory came from, for the parentheses of a message.
func (o socketDirOrigin) said() string {
	switch o {
	case originDefault:
		return SocketDirEnv + " is not set; the default is " + DefaultSocketDir
	case originEnvironment:
		return "from " + SocketDirEnv
	}
	return "set by the program; " + SocketDirEnv + " is not read"
}

// fix is what to do when the directory is the wrong one.
func (o socketDirOrigin) fix() string {
	if o == originProgram {
		return "have the program use the directory shared with the operator"
	}
	return "set " + SocketDirEnv + " to the directory shared with the operator"
}

// registryWaitingMessage is what a plugin logs, once at Warn level, while
// registry.sock in its socket dir is missing or refuses connections: where
// it looked, where that came from, and what to do.
func registryWaitingMessage(socketDir string, origin socketDirOrigin) string {
	return "no operator registry at " + filepath.Join(socketDir, RegistrySocket) + " yet (" + origin.said() + "): " +
		origin.fix() + ", unless the operator is still starting; retrying with backoff"
}

// socketDirMissingMessage is the start-up error of a plugin whose socket
// dir does not exist: a plugin never creates it, since it is the volume
// shared with the operator.
func socketDirMissingMessage(socketDir string, origin socketDirOrigin) string {
	return "the socket dir " + socketDir + " does not exist (" + origin.said() + "): " + origin.fix() +
		" (a plugin does not create the socket dir: it is a volume shared with the operator)"
}
