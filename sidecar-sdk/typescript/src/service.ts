/**
 * The `kplug.v1.Plugin` gRPC service: decodes requests, calls the plugin,
 * encodes responses.
 *
 * In Reconcile, Finalize and Hook nothing a plugin does turns into a gRPC
 * error: invalid input, a handler error or an invalid response all become
 * `OUTCOME_FAILED` with a message, because the operator shows that message
 * on the resource, where the user looks, while a gRPC error would only be
 * retried.
 *
 * Validate and Default are the exception (docs/protocol.md, "Admission:
 * Validate and Default"): a handler error or an invalid answer is a gRPC
 * `INTERNAL` error carrying its message, and an object that is not JSON
 * `INVALID_ARGUMENT`, so that the failure policy decides (the operator shows
 * the message to the client). `Mutate` answers alike (docs/protocol.md,
 * "Mutate"): there is no resource to show a message on, and an error makes
 * the operator hold the object until a call succeeds, rather than apply it
 * unmutated. A call the plugin does not implement is `UNIMPLEMENTED`.
 *
 * @module
 */

import { type sendUnaryData, type ServerUnaryCall, type ServiceError, status } from "@grpc/grpc-js";

import { AdmissionRequest, Defaults, Validation } from "./admission.js";
import type {
  DefaultRequest,
  DefaultResponse,
  FinalizeRequest,
  FinalizeResponse,
  GetInfoResponse,
  HookRequest,
  HookResponse as WireHookResponse,
  MutateRequest,
  MutateResponse,
  PluginServer as PluginHandlers,
  ProbeResponse,
  ReconcileRequest,
  ReconcileResponse,
  ValidateRequest,
  ValidateResponse,
} from "./gen/kplug/v1/plugin.js";
import { Capability, Outcome } from "./gen/kplug/v1/types.js";
import { InvalidRequestError } from "./errors.js";
import { HookCall, HookResponse, wireCallPolicy, wireHook } from "./hooks.js";
import { declaresChildren, type PluginInfo, wireOffer } from "./info.js";
import { describeError, type Logger, writes } from "./logger.js";
import { MutateCall, Mutation, wireMutation } from "./mutate.js";
import type { Plugin, Readiness } from "./plugin.js";
import { PROTOCOL } from "./protocol.js";
import { Request } from "./request.js";
import { Response } from "./response.js";
import { inHandlerSpan } from "./tracing.js";

/**
 * RECONCILE always; FINALIZE when `info.finalize` says so, or by default
 * when the plugin has a `finalize` method; VALIDATE, DEFAULT and HOOKS when
 * it has `validate`, `default` and `hook`; CHILDREN when an offer declares
 * child kinds; MUTATE when it has `mutate` (in that order, as every SDK
 * sends them).
 */
export function capabilities(plugin: Plugin, info: PluginInfo): Capability[] {
  const finalize = info.finalize ?? typeof plugin.finalize === "function";
  const optional: [boolean, Capability][] = [
    [finalize, Capability.CAPABILITY_FINALIZE],
    [typeof plugin.validate === "function", Capability.CAPABILITY_VALIDATE],
    [typeof plugin.default === "function", Capability.CAPABILITY_DEFAULT],
    [typeof plugin.hook === "function", Capability.CAPABILITY_HOOKS],
    [declaresChildren(info), Capability.CAPABILITY_CHILDREN],
    [typeof plugin.mutate === "function", Capability.CAPABILITY_MUTATE],
  ];
  return [Capability.CAPABILITY_RECONCILE, ...optional.filter(([wanted]) => wanted).map(([, c]) => c)];
}

/** The hooks, call policies and mutations as `GetInfo` and heartbeats carry them. */
export function declarations(
  info: PluginInfo,
): Pick<GetInfoResponse, "hooks" | "callPolicies" | "mutations"> {
  return {
    hooks: (info.hooks ?? []).map(wireHook),
    callPolicies: (info.callPolicies ?? []).map(wireCallPolicy),
    mutations: (info.mutations ?? []).map(wireMutation),
  };
}

/** A gRPC error for the callback of a unary call. */
function grpcError(code: status, details: string): Partial<ServiceError> {
  return { code, details };
}

type Call = "reconcile" | "finalize";

/** The handlers of the `kplug.v1.Plugin` service for one plugin. */
export function pluginHandlers(plugin: Plugin, info: PluginInfo, logger: Logger): PluginHandlers {
  const name = info.name;
  const getInfo: GetInfoResponse = {
    name,
    version: info.version,
    protocol: PROTOCOL,
    offers: info.offers.map(wireOffer),
    capabilities: capabilities(plugin, info),
    description: info.description ?? "",
    ...declarations(info),
  };

  async function probe(): Promise<ProbeResponse> {
    let readiness: Readiness | boolean;
    try {
      readiness = plugin.ready ? await plugin.ready() : true;
    } catch (error) {
      logger.error(`plugin ${name}: ready() threw; answering not ready: ${stackOf(error)}`);
      return { ready: false, message: describeError(error) };
    }
    // Checked at run time too: plugins may be written in JavaScript.
    const value: unknown = readiness;
    if (typeof value === "boolean") {
      return { ready: value, message: "" };
    }
    const candidate = value as Partial<Readiness> | null | undefined;
    if (typeof candidate?.ready !== "boolean") {
      const message = `ready() must return a Readiness or a boolean, got ${value === null ? "null" : typeof value}`;
      logger.error(`plugin ${name}: ${message}`);
      return { ready: false, message };
    }
    return { ready: candidate.ready, message: typeof candidate.message === "string" ? candidate.message : "" };
  }

  /** Decodes, runs the handler, encodes; every failure becomes a FAILED response. */
  async function handle<T>(
    call: Call,
    wire: ReconcileRequest | FinalizeRequest,
    run: (request: Request) => Response | Promise<Response>,
    encode: (response: Response, request: Request) => T,
    failed: (message: string) => T,
  ): Promise<T> {
    let request: Request;
    try {
      request = Request.decode(wire.implementation, wire.object, wire.extensions, wire.children);
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) {
        throw error;
      }
      logger.error(`plugin ${name}: ${error.message}; ${call} not called`);
      return failed(error.message);
    }
    if (writes(logger, "debug")) {
      logger.debug(`plugin ${name}: ${call} ${request.toString()}`);
    }
    try {
      const response: unknown = await run(request);
      if (!(response instanceof Response)) {
        throw new TypeError(
          `${call}() must return a Response, got ${response === null ? "null" : typeof response}`,
        );
      }
      return encode(response, request);
    } catch (error) {
      logger.error(`plugin ${name}: ${call} of ${request.toString()} failed: ${stackOf(error)}`);
      return failed(describeError(error));
    }
  }

  const failedReconcile = (message: string): ReconcileResponse => ({
    outcome: Outcome.OUTCOME_FAILED,
    message,
    retryAfter: undefined,
    status: Buffer.alloc(0),
    extensionStatuses: [],
    conditions: [],
    events: [],
    children: undefined,
  });
  const failedFinalize = (message: string): FinalizeResponse => ({
    outcome: Outcome.OUTCOME_FAILED,
    message,
    retryAfter: undefined,
    events: [],
    children: undefined,
  });
  const sent = (request: Request) => [request.ref(), request.extensions.map((e) => request.ref(e))] as const;

  return {
    getInfo(_call: ServerUnaryCall<unknown, GetInfoResponse>, callback: sendUnaryData<GetInfoResponse>) {
      callback(null, getInfo);
    },
    probe(_call: ServerUnaryCall<unknown, ProbeResponse>, callback: sendUnaryData<ProbeResponse>) {
      void probe().then((response) => callback(null, response));
    },
    reconcile(
      call: ServerUnaryCall<ReconcileRequest, ReconcileResponse>,
      callback: sendUnaryData<ReconcileResponse>,
    ) {
      void inHandlerSpan(name, "Reconcile", call.metadata, () =>
        handle(
          "reconcile",
          call.request,
          (request) => plugin.reconcile(request),
          (response, request) => response.toReconcileResponse(...sent(request)),
          failedReconcile,
        ),
      ).then(
        (response) => callback(null, response),
        (error: unknown) => callback(null, failedReconcile(describeError(error))),
      );
    },
    finalize(
      call: ServerUnaryCall<FinalizeRequest, FinalizeResponse>,
      callback: sendUnaryData<FinalizeResponse>,
    ) {
      void inHandlerSpan(name, "Finalize", call.metadata, () =>
        handle(
          "finalize",
          call.request,
          (request) => (plugin.finalize ? plugin.finalize(request) : Response.ok()),
          (response, request) => response.toFinalizeResponse(...sent(request)),
          failedFinalize,
        ),
      ).then(
        (response) => callback(null, response),
        (error: unknown) => callback(null, failedFinalize(describeError(error))),
      );
    },
    validate(
      call: ServerUnaryCall<ValidateRequest, ValidateResponse>,
      callback: sendUnaryData<ValidateResponse>,
    ) {
      const validate = plugin.validate?.bind(plugin);
      if (validate === undefined) {
        callback(unimplemented("Validate"));
        return;
      }
      void inHandlerSpan(name, "Validate", call.metadata, () =>
        admit(
          "validate",
          call.request,
          validate,
          (v): v is Validation => v instanceof Validation,
          "Validation",
          (v) => v.toValidateResponse(),
        ),
      ).then(
        ([error, response]) => callback(error, response),
        (error: unknown) => callback(grpcError(status.INTERNAL, describeError(error))),
      );
    },
    default(call: ServerUnaryCall<DefaultRequest, DefaultResponse>, callback: sendUnaryData<DefaultResponse>) {
      const defaults = plugin.default?.bind(plugin);
      if (defaults === undefined) {
        callback(unimplemented("Default"));
        return;
      }
      void inHandlerSpan(name, "Default", call.metadata, () =>
        admit(
          "default",
          call.request,
          defaults,
          (d): d is Defaults => d instanceof Defaults,
          "Defaults",
          (d) => d.toDefaultResponse(),
        ),
      ).then(
        ([error, response]) => callback(error, response),
        (error: unknown) => callback(grpcError(status.INTERNAL, describeError(error))),
      );
    },
    hook(call: ServerUnaryCall<HookRequest, WireHookResponse>, callback: sendUnaryData<WireHookResponse>) {
      const run = plugin.hook?.bind(plugin);
      if (run === undefined) {
        callback(unimplemented("Hook"));
        return;
      }
      void inHandlerSpan(name, "Hook", call.metadata, () => hook(call.request, run)).then(
        (response) => callback(null, response),
        (error: unknown) => callback(null, failedHook(describeError(error))),
      );
    },
    mutate(call: ServerUnaryCall<MutateRequest, MutateResponse>, callback: sendUnaryData<MutateResponse>) {
      const run = plugin.mutate?.bind(plugin);
      if (run === undefined) {
        callback(unimplemented("Mutate"));
        return;
      }
      void inHandlerSpan(name, "Mutate", call.metadata, () => mutate(call.request, run)).then(
        ([error, response]) => callback(error, response),
        (error: unknown) => callback(grpcError(status.INTERNAL, describeError(error))),
      );
    },
  };

  function unimplemented(rpc: string): Partial<ServiceError> {
    // The operator calls only what is advertised: this is a client's mistake.
    return grpcError(status.UNIMPLEMENTED, `plugin ${name} does not implement ${rpc}`);
  }

  /** Decodes, runs an admission handler, encodes; bad input is INVALID_ARGUMENT, every failure INTERNAL. */
  async function admit<A, W>(
    call: "validate" | "default",
    wire: ValidateRequest | DefaultRequest,
    run: (request: AdmissionRequest) => A | Promise<A>,
    isAnswer: (answer: unknown) => answer is A,
    answerType: string,
    encode: (answer: A) => W,
  ): Promise<[Partial<ServiceError> | null, W | undefined]> {
    let request: AdmissionRequest;
    try {
      request = AdmissionRequest.decode(wire.implementation, wire.operation, wire.object, wire.oldObject);
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) {
        throw error;
      }
      logger.error(`plugin ${name}: ${error.message}; ${call} not called`);
      return [grpcError(status.INVALID_ARGUMENT, error.message), undefined];
    }
    try {
      const answer: unknown = await run(request);
      if (!isAnswer(answer)) {
        throw new TypeError(
          `${call}() must return a ${answerType}, got ${answer === null ? "null" : typeof answer}`,
        );
      }
      return [null, encode(answer)];
    } catch (error) {
      logger.error(`plugin ${name}: ${call} of ${request.kind} ${request.name} failed: ${stackOf(error)}`);
      return [grpcError(status.INTERNAL, describeError(error)), undefined];
    }
  }

  /** Decodes, runs the mutator, encodes; bad input is INVALID_ARGUMENT, every failure INTERNAL. */
  async function mutate(
    wire: MutateRequest,
    run: (call: MutateCall) => Mutation | Promise<Mutation>,
  ): Promise<[Partial<ServiceError> | null, MutateResponse | undefined]> {
    let call: MutateCall;
    try {
      call = MutateCall.decode(wire);
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) {
        throw error;
      }
      logger.error(`plugin ${name}: ${error.message}; mutate not called`);
      return [grpcError(status.INVALID_ARGUMENT, error.message), undefined];
    }
    try {
      const mutation: unknown = await run(call);
      if (!(mutation instanceof Mutation)) {
        throw new TypeError(
          `mutate() must return a Mutation, got ${mutation === null ? "null" : typeof mutation}`,
        );
      }
      return [null, mutation.toMutateResponse()];
    } catch (error) {
      logger.error(`plugin ${name}: mutate of ${call.toString()} failed: ${stackOf(error)}`);
      return [grpcError(status.INTERNAL, describeError(error)), undefined];
    }
  }

  /** Decodes, runs the hook, encodes; every failure becomes a FAILED answer. */
  async function hook(
    wire: HookRequest,
    run: (call: HookCall) => HookResponse | Promise<HookResponse>,
  ): Promise<WireHookResponse> {
    let call: HookCall;
    try {
      call = HookCall.decode(wire);
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) {
        throw error;
      }
      logger.error(`plugin ${name}: ${error.message}; hook not called`);
      return failedHook(error.message);
    }
    try {
      const response: unknown = await run(call);
      if (!(response instanceof HookResponse)) {
        throw new TypeError(
          `hook() must return a HookResponse, got ${response === null ? "null" : typeof response}`,
        );
      }
      return response.toHookResponse(...sent(call.request));
    } catch (error) {
      logger.error(`plugin ${name}: hook ${call.hook} of ${call.request.toString()} failed: ${stackOf(error)}`);
      return failedHook(describeError(error));
    }
  }
}

function failedHook(message: string): WireHookResponse {
  return { outcome: Outcome.OUTCOME_FAILED, message, status: Buffer.alloc(0), events: [], retryAfter: undefined };
}

function stackOf(error: unknown): string {
  return error instanceof Error && error.stack ? error.stack : describeError(error);
}
