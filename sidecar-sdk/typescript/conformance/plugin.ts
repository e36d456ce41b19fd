// The conformance plugin, written with the TypeScript SDK.
//
// Its behaviour is driven by the base object's `spec.conformance`, exactly as
// sidecar-sdk/conformance/README.md specifies, so that every SDK's
// conformance plugin answers the cases in cases.json identically. Run it as
// a plugin process:
//
//     KPLUG_SOCKET_DIR=/tmp/kc node build/conformance/plugin.js

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import {
  type AdmissionRequest,
  type CallPolicy,
  type ChildKind,
  Defaults,
  type Hook,
  type HookCall,
  HookResponse,
  type JsonObject,
  type JsonValue,
  type MutateCall,
  Mutation,
  type MutationKind,
  type Plugin,
  type PluginInfo,
  type Readiness,
  type Request,
  Response,
  Validation,
} from "../src/index.js";

/** cases.json, next to the other SDKs' conformance plugins. */
export const CASES = join(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "..",
  "conformance",
  "cases.json",
);

/** What the "raise" action throws. */
class ConformanceError extends Error {
  override name = "ConformanceError";
}

function object(value: JsonValue | undefined): JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? value : {};
}

function text(value: JsonValue | undefined): string {
  return typeof value === "string" ? value : "";
}

function directives(request: Request): JsonObject {
  return object(request.spec["conformance"]);
}

/** Step 2 of the README: the outcome. */
function outcome(c: JsonObject): Response {
  const action = c["action"] ?? "ok";
  const message = text(c["message"]);
  switch (action) {
    case "ok":
      return Response.ok(message);
    case "retry": {
      const after = c["retryAfterSeconds"];
      return typeof after === "number" ? Response.retry(after, message) : Response.retry(undefined, message);
    }
    case "fail":
      return Response.failed(message);
    case "raise":
      throw new ConformanceError(message);
    default:
      throw new Error(`unknown conformance action ${JSON.stringify(action)}`);
  }
}

/** The README's hook outcome: step 2 with the SDK's hook answer. */
function hookOutcome(c: JsonObject): HookResponse {
  const action = c["action"] ?? "ok";
  const message = text(c["message"]);
  switch (action) {
    case "ok":
      return HookResponse.ok(message);
    case "retry": {
      const after = c["retryAfterSeconds"];
      return typeof after === "number" ? HookResponse.retry(after, message) : HookResponse.retry(undefined, message);
    }
    case "fail":
      return HookResponse.failed(message);
    case "raise":
      throw new ConformanceError(message);
    default:
      throw new Error(`unknown conformance action ${JSON.stringify(action)}`);
  }
}

function strings(value: JsonValue | undefined): string[] {
  return Array.isArray(value) ? value.map((item) => text(item)) : [];
}

/** Step 7 of the README: the events. */
function addEvents(response: Response | HookResponse, request: Request, c: JsonObject): void {
  for (const item of Array.isArray(c["events"]) ? c["events"] : []) {
    const event = object(item);
    const regarding = event["regarding"];
    response.event(text(event["reason"]), text(event["message"]), {
      warning: event["warning"] === true,
      regarding:
        regarding === undefined || regarding === null
          ? undefined
          : regarding === "base"
            ? request.object
            : request.extensions[regarding as number],
    });
  }
}

/** The conformance plugin (README.md beside cases.json). */
export class Conformance implements Plugin {
  #readiness: Readiness = { ready: true, message: "" };

  async reconcile(request: Request): Promise<Response> {
    const c = directives(request);
    if (c["action"] === "setReadiness") {
      this.#readiness = { ready: c["ready"] === true, message: text(c["message"]) };
      return Response.ok("readiness set");
    }
    const response = outcome(c);
    if ("status" in c) {
      response.withStatus(c["status"] as object);
    }
    if (c["echo"] === true) {
      response.withStatus({
        echo: {
          implementation: request.implementation,
          name: request.name,
          namespace: request.namespace,
          generation: request.generation,
          extensions: request.extensions.map(
            (e) => `${text(e["kind"])}/${text(object(e["metadata"])["name"])}`,
          ),
          data: request.spec["data"] ?? null,
        },
      });
    }
    // Step 4b: the observed children, merged into the status after the echo.
    if (c["echoChildren"] === true) {
      response.withStatus({
        observedChildren: request.children.map((child) => `${text(child["kind"])}/${text(object(child["metadata"])["name"])}`),
      });
    }
    // Step 4c: the desired children, each through the SDK's builder (which
    // refuses an item that is not an object).
    const children = c["children"];
    if (Array.isArray(children)) {
      response.withChildren(children as object[]);
    }
    if ("extensionStatus" in c) {
      for (const extension of request.extensions) {
        response.extensionStatus(extension, c["extensionStatus"] as object);
      }
    }
    for (const item of Array.isArray(c["conditions"]) ? c["conditions"] : []) {
      const condition = object(item);
      const status = condition["status"];
      response.condition(
        text(condition["type"]),
        typeof status === "boolean" ? status : null,
        text(condition["reason"]),
        text(condition["message"]),
      );
    }
    addEvents(response, request, c);
    return response;
  }

  async finalize(request: Request): Promise<Response> {
    const c = directives(request);
    const response = outcome(c);
    addEvents(response, request, c);
    return response;
  }

  /** The README's Validate: errors (with or without a value), warnings, echo, and "raise". */
  async validate(request: AdmissionRequest): Promise<Validation> {
    const c = object(request.spec["conformance"]);
    if (c["action"] === "raise") {
      throw new ConformanceError(text(c["message"]));
    }
    const verdict = Validation.allowed();
    for (const item of Array.isArray(c["errors"]) ? c["errors"] : []) {
      const error = object(item);
      if ("value" in error) {
        verdict.error(text(error["path"]), error["value"], text(error["message"]));
      } else {
        verdict.errorAt(text(error["path"]), text(error["message"]));
      }
    }
    for (const warning of strings(c["warnings"])) {
      verdict.warning(warning);
    }
    if (c["echo"] === true) {
      const old = request.oldObject;
      const oldText = old === undefined ? "none" : `${text(old["kind"])}/${text(object(old["metadata"])["name"])}`;
      verdict.warning(`${request.operation} ${request.implementation} ${request.kind}/${request.name} old=${oldText}`);
    }
    return verdict;
  }

  /** The README's Default: patch (through the SDK's builder), warnings, and "raise". */
  async default(request: AdmissionRequest): Promise<Defaults> {
    const c = object(request.spec["conformance"]);
    if (c["action"] === "raise") {
      throw new ConformanceError(text(c["message"]));
    }
    const defaults = Defaults.none();
    for (const item of Array.isArray(c["patch"]) ? c["patch"] : []) {
      const op = object(item);
      const path = text(op["path"]);
      if (op["op"] === "add") {
        defaults.add(path, op["value"] ?? null);
      } else if (op["op"] === "replace") {
        defaults.replace(path, op["value"] ?? null);
      } else {
        defaults.remove(path);
      }
    }
    for (const warning of strings(c["warnings"])) {
      defaults.warning(warning);
    }
    return defaults;
  }

  /**
   * The README's Mutate: patch (through the SDK's builder), warnings, echo
   * and "raise", driven by the *base* object's spec.conformance (the object
   * is the child being mutated, whose spec is not the case's).
   */
  async mutate(call: MutateCall): Promise<Mutation> {
    const c = object(object(call.base?.["spec"])["conformance"]);
    if (c["action"] === "raise") {
      throw new ConformanceError(text(c["message"]));
    }
    const mutation = Mutation.none();
    for (const item of Array.isArray(c["patch"]) ? c["patch"] : []) {
      const op = object(item);
      const path = text(op["path"]);
      if (op["op"] === "add") {
        mutation.add(path, op["value"] ?? null);
      } else if (op["op"] === "replace") {
        mutation.replace(path, op["value"] ?? null);
      } else {
        mutation.remove(path);
      }
    }
    for (const warning of strings(c["warnings"])) {
      mutation.warning(warning);
    }
    if (c["echo"] === true) {
      const live = call.live === undefined ? "none" : text(object(call.live["metadata"])["name"]);
      mutation.warning(`${call.implementation} ${call.kind}/${call.name} live=${live}`);
    }
    return mutation;
  }

  /** The README's Hook: the outcome and events as for Finalize, status (reserved keys allowed) and echo. */
  async hook(call: HookCall): Promise<HookResponse> {
    const { request } = call;
    const c = directives(request);
    const response = hookOutcome(c);
    if ("status" in c) {
      response.withStatus(c["status"] as object);
    }
    if (c["echo"] === true) {
      response.withStatus({
        echo: {
          hook: call.hook,
          phase: call.phase ?? null,
          implementation: request.implementation,
          name: request.name,
          namespace: request.namespace,
          extensions: request.extensions.map((e) => `${text(e["kind"])}/${text(object(e["metadata"])["name"])}`),
          outcome: call.outcome ?? null,
          message: call.message,
        },
      });
    }
    addEvents(response, request, c);
    return response;
  }

  async ready(): Promise<Readiness> {
    return this.#readiness;
  }
}

interface CasesFile {
  plugin: {
    name: string;
    version: string;
    description: string;
    offers: {
      base: { group: string; kind: string };
      implementation: string;
      extensions: { group: string; kind: string }[];
      children: { group: string; version: string; kind: string }[];
    }[];
    hooks: Hook[];
    call_policies: { call: CallPolicy["call"]; deadline_seconds: number | null; failure_policy: string }[];
    mutations: { group: string; version: string; kind: string }[];
  };
}

/** The plugin's description, as cases.json's "plugin" gives it. */
export function info(): PluginInfo {
  const { plugin } = JSON.parse(readFileSync(CASES, "utf8")) as CasesFile;
  return {
    name: plugin.name,
    version: plugin.version,
    description: plugin.description,
    offers: plugin.offers.map((offer) => ({
      base: offer.base,
      implementation: offer.implementation,
      extensions: offer.extensions,
      children: offer.children.map((c): ChildKind => ({ apiVersion: apiVersion(c), kind: c.kind })),
    })),
    hooks: plugin.hooks,
    callPolicies: plugin.call_policies.map((p) => ({
      call: p.call,
      ...(p.deadline_seconds === null ? {} : { deadlineSeconds: p.deadline_seconds }),
      ...(p.failure_policy === "FAIL" || p.failure_policy === "IGNORE" ? { failurePolicy: p.failure_policy } : {}),
    })),
    mutations: plugin.mutations.map((m): MutationKind => ({ apiVersion: apiVersion(m), kind: m.kind })),
  };
}

/** `<group>/<version>`, or `<version>` for the core group. */
function apiVersion(kind: { group: string; version: string }): string {
  return kind.group === "" ? kind.version : `${kind.group}/${kind.version}`;
}
