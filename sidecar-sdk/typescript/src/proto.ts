/**
 * The generated `kplug.v1` messages and grpc-js service definitions, for
 * tests and tools that talk the protocol directly (e.g. a fake operator).
 * Plugins do not need them.
 *
 * @module
 */

export { Duration } from "./gen/google/protobuf/duration.js";
export {
  FinalizeRequest,
  FinalizeResponse,
  GetInfoRequest,
  GetInfoResponse,
  ObjectStatus,
  PluginClient,
  type PluginServer,
  PluginService,
  ProbeRequest,
  ProbeResponse,
  ReconcileRequest,
  ReconcileResponse,
} from "./gen/kplug/v1/plugin.js";
export {
  HeartbeatRequest,
  HeartbeatResponse,
  RegistryClient,
  type RegistryServer,
  RegistryService,
  UnregisterRequest,
  UnregisterResponse,
} from "./gen/kplug/v1/registry.js";
export {
  Capability,
  Condition,
  ConditionStatus,
  Event,
  EventType,
  GroupKind,
  ObjectRef,
  Offer,
  Outcome,
} from "./gen/kplug/v1/types.js";
