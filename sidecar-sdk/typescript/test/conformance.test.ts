// The shared SDK conformance cases (sidecar-sdk/conformance/cases.json),
// against the TypeScript conformance plugin (conformance/plugin.ts) run as a
// real plugin process on a real socket, with a real gRPC client; the same
// runner as sidecar-sdk/python/tests/test_conformance.py.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { type ServiceError, status as grpcStatus } from "@grpc/grpc-js";

import { CASES } from "../conformance/plugin.js";
import {
  type Child,
  Dialer,
  exitCode,
  killChild,
  type PluginStub,
  removeDir,
  startNode,
  tempSocketDir,
  waitUntil,
} from "./helpers.js";
import { type JsonValue, proto } from "./sdk.js";

const MAIN = join(dirname(fileURLToPath(import.meta.url)), "..", "conformance", "main.js");

interface Case {
  name: string;
  request: {
    rpc: "GetInfo" | "Probe" | "Reconcile" | "Finalize" | "Validate" | "Default" | "Hook" | "Mutate";
    implementation?: string;
    operation?: string;
    object?: JsonValue;
    object_raw?: string;
    old_object?: JsonValue;
    live?: JsonValue;
    base?: JsonValue;
    extensions?: JsonValue[];
    children?: JsonValue[];
    hook?: string;
    phase?: string;
    outcome?: string;
    message?: string;
  };
  expect: Record<string, JsonValue>;
}

const { cases } = JSON.parse(readFileSync(CASES, "utf8")) as { cases: Case[] };

const encode = (value: JsonValue) => Buffer.from(JSON.stringify(value), "utf8");

/** The name of a generated enum value without its prefix, e.g. OUTCOME_OK → OK. */
function enumName(names: Record<number, string>, value: number, prefix: string): string {
  return (names[value] ?? `${prefix}UNSPECIFIED`).slice(prefix.length);
}

const capitalized = (text: string) => text.charAt(0) + text.slice(1).toLowerCase();

function refJson(ref: proto.ObjectRef): JsonValue {
  return { apiVersion: ref.apiVersion, kind: ref.kind, namespace: ref.namespace, name: ref.name };
}

/** Status bytes decoded; they must be compact UTF-8 JSON (compared by length, key order is free). */
function statusJson(raw: Uint8Array, name: string): JsonValue {
  if (raw.length === 0) {
    return null;
  }
  const value = JSON.parse(Buffer.from(raw).toString("utf8")) as JsonValue;
  assert.equal(raw.length, Buffer.byteLength(JSON.stringify(value)), `${name}: status is not compact JSON`);
  return value;
}

function responseJson(
  response: proto.ReconcileResponse | proto.FinalizeResponse | proto.HookResponse,
  name: string,
): Record<string, JsonValue> {
  const actual: Record<string, JsonValue> = {
    outcome: enumName(proto.Outcome, response.outcome, "OUTCOME_"),
    message: response.message,
    retry_after_seconds:
      response.retryAfter === undefined ? null : response.retryAfter.seconds + response.retryAfter.nanos / 1e9,
  };
  if ("status" in response) {
    actual["status"] = statusJson(response.status, name);
  }
  if ("conditions" in response) {
    actual["extension_statuses"] = response.extensionStatuses.map((s) => ({
      target: s.target === undefined ? null : refJson(s.target),
      status: statusJson(s.status, name),
    }));
    actual["conditions"] = response.conditions.map((c) => ({
      type: c.type,
      status: capitalized(enumName(proto.ConditionStatus, c.status, "CONDITION_STATUS_")),
      reason: c.reason,
      message: c.message,
    }));
    // Reconcile answers only: the cases compare a Finalize answer's outcome,
    // message, delay and events.
    actual["children"] = childrenJson(response);
  }
  actual["events"] = response.events.map((e) => ({
    type: capitalized(enumName(proto.EventType, e.type, "EVENT_TYPE_")),
    reason: e.reason,
    message: e.message,
    regarding: e.regarding === undefined ? null : refJson(e.regarding),
  }));
  return actual;
}

/**
 * The desired children: null when the answer has no children message (which
 * leaves them as they are), else each decoded, in order.
 */
function childrenJson(response: proto.ReconcileResponse): JsonValue {
  if (response.children === undefined) {
    return null;
  }
  return response.children.objects.map((child) => JSON.parse(Buffer.from(child).toString("utf8")) as JsonValue);
}

function infoJson(info: proto.GetInfoResponse): JsonValue {
  return {
    name: info.name,
    version: info.version,
    protocol: info.protocol,
    description: info.description,
    offers: info.offers.map((o) => ({
      base: { group: o.base?.group ?? "", kind: o.base?.kind ?? "" },
      implementation: o.implementation,
      extensions: o.extensions.map((e) => ({ group: e.group, kind: e.kind })),
      children: o.children.map((c) => ({ group: c.group, version: c.version, kind: c.kind })),
    })),
    capabilities: info.capabilities.map((c) => enumName(proto.Capability, c, "CAPABILITY_")),
    hooks: info.hooks.map((h) => ({
      name: h.name,
      base: { group: h.base?.group ?? "", kind: h.base?.kind ?? "" },
      phase: enumName(proto.HookPhase, h.phase, "HOOK_PHASE_"),
      behaviour: enumName(proto.HookBehaviour, h.behaviour, "HOOK_BEHAVIOUR_"),
      order: h.order,
    })),
    call_policies: info.callPolicies.map((p) => ({
      call: enumName(proto.Call, p.call, "CALL_"),
      deadline_seconds: p.deadline === undefined ? null : p.deadline.seconds + p.deadline.nanos / 1e9,
      failure_policy: enumName(proto.FailurePolicy, p.failurePolicy, "FAILURE_POLICY_"),
    })),
    mutations: info.mutations.map((m) => ({
      group: m.kind?.group ?? "",
      version: m.kind?.version ?? "",
      kind: m.kind?.kind ?? "",
    })),
  };
}

/** A generated enum's values from their names without prefix, e.g. CREATE → OPERATION_CREATE. */
function operationOf(name = "UNSPECIFIED"): proto.Operation {
  assert.ok(`OPERATION_${name}` in proto.Operation, name);
  return proto.Operation[`OPERATION_${name}` as keyof typeof proto.Operation];
}

function phaseOf(name = "UNSPECIFIED"): proto.HookPhase {
  assert.ok(`HOOK_PHASE_${name}` in proto.HookPhase, name);
  return proto.HookPhase[`HOOK_PHASE_${name}` as keyof typeof proto.HookPhase];
}

function outcomeOf(name = "UNSPECIFIED"): proto.Outcome {
  assert.ok(`OUTCOME_${name}` in proto.Outcome, name);
  return proto.Outcome[`OUTCOME_${name}` as keyof typeof proto.Outcome];
}

/** A Validate or Default answer in the cases' shape, or the gRPC error: {grpc_code, message}. */
async function admissionJson(stub: PluginStub, request: Case["request"]): Promise<Record<string, JsonValue>> {
  const wire = {
    implementation: request.implementation ?? "",
    operation: operationOf(request.operation),
    object: objectBytes(request),
    oldObject: request.old_object === undefined ? Buffer.alloc(0) : encode(request.old_object),
  };
  try {
    if (request.rpc === "Validate") {
      const verdict = await stub.validate(wire);
      return {
        errors: verdict.errors.map((e) => ({ path: e.path, value: e.value, message: e.message })),
        warnings: verdict.warnings,
      };
    }
    const defaults = await stub.default(wire);
    return { patch: statusJson(defaults.patch, "patch"), warnings: defaults.warnings };
  } catch (error) {
    const e = error as ServiceError;
    return { grpc_code: enumName(grpcStatus, e.code, ""), message: e.details };
  }
}

/** A Mutate answer in the cases' shape ({patch, warnings}), or the gRPC error: {grpc_code, message}. */
async function mutateJson(stub: PluginStub, request: Case["request"]): Promise<Record<string, JsonValue>> {
  // Absent live or base: empty bytes, which the protocol reads as none.
  const optional = (value: JsonValue | undefined) => (value === undefined ? Buffer.alloc(0) : encode(value));
  try {
    const mutation = await stub.mutate({
      implementation: request.implementation ?? "",
      object: objectBytes(request),
      live: optional(request.live),
      base: optional(request.base),
    });
    return { patch: statusJson(mutation.patch, "patch"), warnings: mutation.warnings };
  } catch (error) {
    const e = error as ServiceError;
    return { grpc_code: enumName(grpcStatus, e.code, ""), message: e.details };
  }
}

function objectBytes(request: Case["request"]): Buffer {
  return request.object !== undefined ? encode(request.object) : Buffer.from(request.object_raw ?? "", "utf8");
}

describe("the shared conformance cases", () => {
  let dir: string;
  let plugin: Child;
  let stub: PluginStub;
  const dialer = new Dialer();

  // One conformance plugin process for all cases, which run in file order.
  before(async () => {
    assert.ok(cases.length >= 20, "the case file looks truncated");
    dir = await tempSocketDir();
    plugin = startNode(MAIN, { KPLUG_SOCKET_DIR: dir, KPLUG_HEARTBEAT_INTERVAL: "60" });
    const socket = join(dir, "plugins", "conformance", "plugin.sock");
    await waitUntil(() => existsSync(socket), `${socket} (plugin log:\n${plugin.stderr()})`, 15000);
    stub = dialer.open(socket);
  });

  after(async () => {
    try {
      plugin.process.kill("SIGTERM");
      assert.equal(await exitCode(plugin, 15000), 0, plugin.stderr());
    } finally {
      dialer.close();
      await killChild(plugin);
      await removeDir(dir);
    }
  });

  for (const testCase of cases) {
    it(testCase.name, async () => {
      const { request } = testCase;
      const expected = { ...testCase.expect };
      let actual: JsonValue;
      if (request.rpc === "GetInfo") {
        actual = infoJson(await stub.getInfo());
      } else if (request.rpc === "Probe") {
        const probe = await stub.probe();
        actual = { ready: probe.ready, message: probe.message };
      } else if (request.rpc === "Validate" || request.rpc === "Default") {
        actual = await admissionJson(stub, request);
      } else if (request.rpc === "Mutate") {
        actual = await mutateJson(stub, request);
      } else {
        const wire = {
          implementation: request.implementation ?? "",
          object: objectBytes(request),
          extensions: (request.extensions ?? []).map(encode),
        };
        const children = (request.children ?? []).map(encode);
        const response =
          request.rpc === "Reconcile"
            ? await stub.reconcile({ ...wire, children })
            : request.rpc === "Finalize"
              ? await stub.finalize({ ...wire, children })
              : await stub.hook({
                  ...wire,
                  hook: request.hook ?? "",
                  phase: phaseOf(request.phase),
                  outcome: outcomeOf(request.outcome),
                  message: request.message ?? "",
                });
        actual = responseJson(response, testCase.name);
      }
      if (request.rpc === "Reconcile" && !("children" in expected)) {
        // A Reconcile case that says nothing of children expects none: the
        // answer leaves them as they are.
        expected["children"] = null;
      }
      const contains = expected["message_contains"];
      if (typeof contains === "string" && typeof actual === "object" && actual !== null && !Array.isArray(actual)) {
        delete expected["message_contains"];
        const message = actual["message"];
        assert.ok(typeof message === "string");
        assert.ok(message.includes(contains), `message ${JSON.stringify(message)} lacks ${JSON.stringify(contains)}`);
        delete actual["message"];
      }
      assert.deepEqual(actual, expected);
    });
  }
});
