/**
 * The generated `kplug.v1` messages and grpc-js service definitions, for
 * tests and tools that talk the protocol directly (e.g. a fake operator).
 * Plugins do not need them.
 *
 * @module
 */

export { Duration } from "./gen/google/protobuf/duration.js";
export {
  DefaultRequest,
  DefaultResponse,
  FieldError,
  FinalizeRequest,
  FinalizeResponse,
  GetInfoRequest,
  GetInfoResponse,
  HookRequest,
  HookResponse,
  MutateRequest,
  MutateResponse,
  ObjectStatus,
  PluginClient,
  type PluginServer,
  PluginService,
  ProbeRequest,
  ProbeResponse,
  ReconcileRequest,
  ReconcileResponse,
  ValidateRequest,
  ValidateResponse,
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
  Call,
  CallPolicy,
  Capability,
  Children,
  Condition,
  ConditionStatus,
  Event,
  EventType,
  FailurePolicy,
  GroupKind,
  GroupVersionKind,
  Hook,
  HookBehaviour,
  HookPhase,
  Mutation,
  ObjectRef,
  Offer,
  Operation,
  Outcome,
} from "./gen/kplug/v1/types.js";
