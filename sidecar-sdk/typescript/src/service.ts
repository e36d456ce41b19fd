/**
 * The `kplug.v1.Plugin` gRPC service: decodes requests, calls the plugin,
 * encodes responses.
 *
 * Nothing a plugin does turns into a gRPC error: invalid input, a handler
 * error or an invalid response all become `OUTCOME_FAILED` with a message,
 * because the operator shows that message on the resource, where the user
 * looks, while a gRPC error would only be retried.
 *
 * @module
 */

import { type sendUnaryData, type ServerUnaryCall, status } from "@grpc/grpc-js";

import type {
  FinalizeRequest,
  FinalizeResponse,
  GetInfoResponse,
  PluginServer as PluginHandlers,
  ProbeResponse,
  ReconcileRequest,
  ReconcileResponse,
} from "./gen/kplug/v1/plugin.js";
import { Capability, Outcome } from "./gen/kplug/v1/types.js";
import { InvalidRequestError } from "./errors.js";
import { type PluginInfo, wireOffer } from "./info.js";
import { describeError, type Logger } from "./logger.js";
import type { Plugin, Readiness } from "./plugin.js";
import { PROTOCOL } from "./protocol.js";
import { Request } from "./request.js";
import { Response } from "./response.js";
import { inHandlerSpan } from "./tracing.js";

/** RECONCILE always; FINALIZE when `info.finalize` says so, or by default when the plugin has a `finalize` method. */
export function capabilities(plugin: Plugin, info: PluginInfo): Capability[] {
  const finalize = info.finalize ?? typeof plugin.finalize === "function";
  return finalize
    ? [Capability.CAPABILITY_RECONCILE, Capability.CAPABILITY_FINALIZE]
    : [Capability.CAPABILITY_RECONCILE];
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
    hooks: [],
    callPolicies: [],
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
      request = Request.decode(wire.implementation, wire.object, wire.extensions);
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) {
        throw error;
      }
      logger.error(`plugin ${name}: ${error.message}; ${call} not called`);
      return failed(error.message);
    }
    logger.debug(`plugin ${name}: ${call} ${request.toString()}`);
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
  });
  const failedFinalize = (message: string): FinalizeResponse => ({
    outcome: Outcome.OUTCOME_FAILED,
    message,
    retryAfter: undefined,
    events: [],
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
    // This SDK does not serve admission or hooks yet, and advertises none of
    // their capabilities, so the operator never calls these; answered as the
    // protocol says.
    validate(_call, callback) {
      callback({ code: status.UNIMPLEMENTED, details: `plugin ${name} does not implement Validate` });
    },
    default(_call, callback) {
      callback({ code: status.UNIMPLEMENTED, details: `plugin ${name} does not implement Default` });
    },
    hook(_call, callback) {
      callback({ code: status.UNIMPLEMENTED, details: `plugin ${name} does not implement Hook` });
    },
  };
}

function stackOf(error: unknown): string {
  return error instanceof Error && error.stack ? error.stack : describeError(error);
}
