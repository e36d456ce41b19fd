/**
 * Write kplug plugins in TypeScript.
 *
 * A plugin is a gRPC server in a sidecar container next to a kplug operator.
 * You implement {@link Plugin}; {@link run} does the rest: it serves
 * `$KPLUG_SOCKET_DIR/plugins/<name>/plugin.sock` (removing a stale socket safely),
 * registers by heartbeat (with backoff, and again after an operator
 * restart), answers `Probe`, decodes objects, builds responses, and on
 * SIGTERM unregisters and drains calls in flight before exiting.
 *
 * ```ts
 * import { type Plugin, Response, run } from "@kplug/sidecar";
 *
 * const hello: Plugin = {
 *   async reconcile(request) {
 *     return Response.ok().withStatus({ greeting: `hello, ${request.name}` });
 *   },
 * };
 *
 * run(hello, {
 *   name: "hello",
 *   version: "1.0.0",
 *   offers: [{ base: { group: "example.com", kind: "Greeting" }, implementation: "Hello" }],
 * });
 * ```
 *
 * The protocol and the behaviour every SDK shares are described in
 * `docs/protocol.md` of the kplug repository.
 *
 * @packageDocumentation
 */

export {
  AdmissionRequest,
  Defaults,
  type FieldError,
  type Operation,
  type PatchOperation,
  Validation,
} from "./admission.js";
export {
  InvalidNameError,
  InvalidRequestError,
  InvalidResponseError,
  KplugError,
  NotASocketError,
  SocketInUseError,
  StartupError,
} from "./errors.js";
export { backoffDelay } from "./heartbeat.js";
export {
  type Call,
  type CallPolicy,
  type FailurePolicy,
  type Hook,
  type HookBehaviour,
  HookCall,
  type HookPhase,
  HookResponse,
} from "./hooks.js";
export { type ChildKind, type GroupKind, type Offer, type PluginInfo, validateName } from "./info.js";
export { describeError, type Logger, type LogLevel, stderrLogger } from "./logger.js";
export { MutateCall, Mutation, type MutationKind } from "./mutate.js";
export type { Plugin, Readiness } from "./plugin.js";
export {
  BACKOFF_FACTOR,
  BACKOFF_INITIAL_SECONDS,
  BACKOFF_JITTER,
  DEFAULT_GRACE_SECONDS,
  DEFAULT_HEARTBEAT_INTERVAL_SECONDS,
  DEFAULT_RETRY_AFTER_SECONDS,
  DEFAULT_SOCKET_DIR,
  HEARTBEAT_INTERVAL_ENV,
  HEARTBEAT_TIMEOUT_SECONDS,
  MAX_MESSAGE_BYTES,
  MAX_NAME_LENGTH,
  PLUGINS_DIR,
  PROTOCOL,
  REGISTRY_SOCKET,
  RESERVED_CONDITION_TYPES,
  RESERVED_STATUS_KEYS,
  SOCKET_DIR_ENV,
  type SocketDirOrigin,
} from "./protocol.js";
export * as proto from "./proto.js";
export {
  type JsonObject,
  type JsonValue,
  type KubeObject,
  type ObjectRef,
  Request,
  refOf,
} from "./request.js";
export {
  type Condition,
  type Event,
  type EventOptions,
  type ObjectStatus,
  type Outcome,
  Response,
  type Target,
} from "./response.js";
export { PluginServer, run, type ServeOptions, serve } from "./server.js";
export { claimSocket, isLive, pluginSocketPath, removePluginDir, SocketFile } from "./socket.js";
export { exportSpans, OTLP_ENDPOINT_ENV } from "./tracing.js";
