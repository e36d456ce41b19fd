/**
 * The rules every kplug SDK shares (docs/protocol.md in the kplug
 * repository), with the values of the Rust crate `kplug-proto`, their
 * source. `test/rules.test.ts` checks them against
 * `sidecar-sdk/conformance/rules.json`, which kplug-proto's own test keeps
 * equal to the Rust code.
 *
 * @module
 */

import { join } from "node:path";

/** The protocol this SDK speaks, sent in heartbeats and `GetInfo`. */
export const PROTOCOL = "kplug.v1";

/** Environment variable naming the socket dir shared with the operator. */
export const SOCKET_DIR_ENV = "KPLUG_SOCKET_DIR";

/** The socket dir when {@link SOCKET_DIR_ENV} is not set: the shared `emptyDir` mount point. */
export const DEFAULT_SOCKET_DIR = "/var/run/kplug";

/** File name of the operator's registry socket inside the socket dir. */
export const REGISTRY_SOCKET = "registry.sock";

/**
 * Where a plugin's socket dir came from, which its messages about it name:
 * `default` (`$KPLUG_SOCKET_DIR` unset or empty), `environment`
 * (`$KPLUG_SOCKET_DIR`) or `program` (the `socketDir` option; the variable
 * is not read).
 */
export type SocketDirOrigin = "default" | "environment" | "program";

function originSaid(origin: SocketDirOrigin): string {
  switch (origin) {
    case "default":
      return `${SOCKET_DIR_ENV} is not set; the default is ${DEFAULT_SOCKET_DIR}`;
    case "environment":
      return `from ${SOCKET_DIR_ENV}`;
    case "program":
      return `set by the program; ${SOCKET_DIR_ENV} is not read`;
  }
}

function originFix(origin: SocketDirOrigin): string {
  return origin === "program"
    ? "have the program use the directory shared with the operator"
    : `set ${SOCKET_DIR_ENV} to the directory shared with the operator`;
}

/**
 * What a plugin logs, once at warn level, while `registry.sock` in its
 * socket dir is missing or refuses connections: where it looked, where that
 * came from, and what to do.
 */
export function registryWaitingMessage(socketDir: string, origin: SocketDirOrigin): string {
  return (
    `no operator registry at ${join(socketDir, REGISTRY_SOCKET)} yet (${originSaid(origin)}): ` +
    `${originFix(origin)}, unless the operator is still starting; retrying with backoff`
  );
}

/**
 * The start-up error of a plugin whose socket dir does not exist: a plugin
 * never creates it, since it is the volume shared with the operator.
 */
export function socketDirMissingMessage(socketDir: string, origin: SocketDirOrigin): string {
  return (
    `the socket dir ${socketDir} does not exist (${originSaid(origin)}): ${originFix(origin)} ` +
    "(a plugin does not create the socket dir: it is a volume shared with the operator)"
  );
}

/** Directory (inside the socket dir) holding one socket per plugin. */
export const PLUGINS_DIR = "plugins";

/**
 * The plugin's socket in its own directory: `plugins/<name>/plugin.sock`. A
 * directory per plugin lets it be a volume of its own, writable only by that
 * plugin's container.
 */
export const PLUGIN_SOCKET = "plugin.sock";

/** Environment variable setting the heartbeat interval, in seconds (may be fractional). */
export const HEARTBEAT_INTERVAL_ENV = "KPLUG_HEARTBEAT_INTERVAL";

/** Heartbeat interval, in seconds, until the operator asks for another. */
export const DEFAULT_HEARTBEAT_INTERVAL_SECONDS = 5;

/** Deadline of one `Heartbeat` call, in seconds. */
export const HEARTBEAT_TIMEOUT_SECONDS = 2;

/** Deadline of the `Unregister` call at shutdown, in seconds. */
export const UNREGISTER_TIMEOUT_SECONDS = 10;

/** First wait after a failed heartbeat, in seconds. */
export const BACKOFF_INITIAL_SECONDS = 0.1;

/** Each further failure in a row multiplies the wait by this, up to the heartbeat interval. */
export const BACKOFF_FACTOR = 2;

/**
 * A wait is shortened at random by up to this fraction, so that plugins
 * restarted together do not retry in lockstep; never lengthened, so the
 * interval caps it.
 */
export const BACKOFF_JITTER = 0.1;

/** How long calls in flight may take to finish at shutdown, in seconds. */
export const DEFAULT_GRACE_SECONDS = 10;

/**
 * The largest request the plugin accepts, in bytes (64 MiB, kplug-proto's
 * `MAX_PLUGIN_MESSAGE_BYTES`): Kubernetes objects can be large, and gRPC's
 * 4 MiB default would turn a big object into a transport error.
 */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** `sockaddr_un.sun_path` holds 108 bytes on Linux, including the final NUL. */
export const MAX_SOCKET_PATH_BYTES = 107;

/** The longest plugin name: a DNS label has at most 63 characters. */
export const MAX_NAME_LENGTH = 63;

/** Status keys the operator owns; a plugin status that sets one is refused. */
export const RESERVED_STATUS_KEYS: readonly string[] = Object.freeze([
  "implementation",
  "plugin",
  "observedGeneration",
  "conditions",
]);

/** Condition types the operator owns; a plugin condition of one of these types is refused. */
export const RESERVED_CONDITION_TYPES: readonly string[] = Object.freeze([
  "Ready",
  "PluginAvailable",
  "ExtensionsResolved",
  "Reconciled",
]);

/** How long `Response.retry()` waits when not told, in seconds (the operator's default too). */
export const DEFAULT_RETRY_AFTER_SECONDS = 10;

/** The longest message the operator keeps; a field error's message and value are cut to it. */
export const MAX_MESSAGE_CHARS = 1024;

/** The most hooks a plugin may declare. */
export const MAX_HOOKS = 16;

/** The most call policies a plugin may declare. */
export const MAX_CALL_POLICIES = 16;

/** The most child kinds one offer may declare. */
export const MAX_CHILD_KINDS_PER_OFFER = 16;

/** The most field errors in one Validate answer; past it, the last one kept says how many more there were. */
export const MAX_FIELD_ERRORS = 64;

/** The most warnings in one Validate, Default or Mutate answer; past it, the last one kept says how many more there were. */
export const MAX_WARNINGS = 16;

/** The longest warning; a longer one is cut, ending with an ellipsis. */
export const MAX_WARNING_CHARS = 256;

/** The largest JSON Patch a Default or Mutate answer may carry, in bytes. */
export const MAX_PATCH_BYTES = 256 * 1024;

/** The most kinds a plugin may declare it mutates (`kplug_proto::limits::MAX_MUTATIONS`). */
export const MAX_MUTATIONS = 16;

/** The paths a Default patch may change (each, or anything below it). */
export const DEFAULT_PATCH_PREFIXES: readonly string[] = Object.freeze([
  "/spec",
  "/metadata/labels",
  "/metadata/annotations",
]);
