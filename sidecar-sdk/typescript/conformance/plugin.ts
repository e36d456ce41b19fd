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
  type JsonObject,
  type JsonValue,
  type Plugin,
  type PluginInfo,
  type Readiness,
  type Request,
  Response,
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

/** Step 7 of the README: the events. */
function addEvents(response: Response, request: Request, c: JsonObject): void {
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
    }[];
  };
}

/** The plugin's description, as cases.json's "plugin" gives it. */
export function info(): PluginInfo {
  const { plugin } = JSON.parse(readFileSync(CASES, "utf8")) as CasesFile;
  return {
    name: plugin.name,
    version: plugin.version,
    description: plugin.description,
    offers: plugin.offers,
  };
}
