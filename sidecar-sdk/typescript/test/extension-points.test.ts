// Admission (Validate, Default), hooks and call policies over a real
// socket: capabilities from the methods a plugin has, the same
// declarations in GetInfo and heartbeats (checked at start-up as the
// operator checks them), and every answer, error and bad input.

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";

import { CapturingLogger, Dialer, FakeRegistry, removeDir, tempSocketDir } from "./helpers.js";
import {
  type AdmissionRequest,
  type CallPolicy,
  Defaults,
  type Hook,
  type HookCall,
  HookResponse,
  InvalidResponseError,
  type Plugin,
  type PluginInfo,
  PluginServer,
  proto,
  Response,
  StartupError,
  Validation,
} from "./sdk.js";

const WIDGET = { group: "example.com", kind: "Widget" };
const HOOKS: Hook[] = [
  { name: "audit", base: WIDGET, phase: "BEFORE_RECONCILE", behaviour: "SYNC_ENFORCE", order: -1 },
  { name: "notify", base: { group: "", kind: "ConfigMap" }, phase: "AFTER_FINALIZE", behaviour: "ASYNC" },
];
const POLICIES: CallPolicy[] = [
  { call: "VALIDATE", deadlineSeconds: 2, failurePolicy: "IGNORE" },
  { call: "HOOK", deadlineSeconds: 0.25 },
  { call: "RECONCILE" },
];
const INFO: PluginInfo = {
  name: "tables",
  version: "1.0.0",
  offers: [{ base: WIDGET, implementation: "Tables" }],
  hooks: HOOKS,
  callPolicies: POLICIES,
};

/** Refuses columns that are not text, defaults the engine, runs hooks; "broken" makes every handler throw. */
class Tables implements Plugin {
  reconcile(): Response {
    return Response.ok();
  }

  validate(request: AdmissionRequest): Validation {
    if (request.name === "broken") {
      throw new Error("the type catalogue is unreachable");
    }
    const verdict = Validation.allowed();
    const columns = request.spec["columns"];
    (Array.isArray(columns) ? columns : []).forEach((column, i) => {
      if (column !== "text") {
        verdict.error(`spec.columns[${i}]`, column, "only text");
      }
    });
    if (request.operation === "UPDATE" && request.oldObject !== undefined) {
      verdict.warning("was updated");
    }
    return verdict;
  }

  async default(request: AdmissionRequest): Promise<Defaults> {
    if (request.name === "broken") {
      throw new Error("defaults unavailable");
    }
    if (request.name === "sneaky") {
      return Defaults.none().add("/status/engine", "InnoDB");
    }
    return Defaults.none().add("/spec/engine", "InnoDB").warning("engine defaulted");
  }

  async hook(call: HookCall): Promise<HookResponse> {
    if (call.request.name === "broken") {
      throw new Error("backup disk full");
    }
    return HookResponse.ok("done")
      .withStatus({ implementation: call.request.implementation, phase: call.phase ?? null })
      .event("Hooked", `after ${call.outcome}: ${call.message}`);
  }
}

const widget = (name: string) =>
  Buffer.from(
    JSON.stringify({
      apiVersion: "example.com/v1",
      kind: "Widget",
      metadata: { name, namespace: "ns" },
      spec: { columns: ["text", "värchar"] },
    }),
  );

let dir: string;
let registry: FakeRegistry;
let dialer: Dialer;
let servers: PluginServer[];

async function start(plugin: Plugin = new Tables(), info: PluginInfo = INFO): Promise<PluginServer> {
  const server = new PluginServer(plugin, info, {
    socketDir: dir,
    heartbeatIntervalSeconds: 60,
    logger: new CapturingLogger(),
  });
  await server.start();
  servers.push(server);
  return server;
}

beforeEach(async () => {
  dir = await tempSocketDir();
  registry = await new FakeRegistry(dir).start();
  dialer = new Dialer();
  servers = [];
});

afterEach(async () => {
  for (const server of servers) {
    await server.stop(0);
  }
  dialer.close();
  registry.stop();
  await removeDir(dir);
});

const rejectsWith = (answer: Promise<unknown>, code: GrpcStatus, details: string) =>
  assert.rejects(answer, (error: ServiceError) => {
    assert.equal(error.code, code);
    assert.ok(error.details.startsWith(details), `${error.details} should start with ${details}`);
    return true;
  });

describe("extension points", () => {
  it("advertise the capabilities of the methods the plugin has", async () => {
    const stub = dialer.open((await start()).socketPath);
    assert.deepEqual((await stub.getInfo()).capabilities, [
      proto.Capability.CAPABILITY_RECONCILE,
      proto.Capability.CAPABILITY_VALIDATE,
      proto.Capability.CAPABILITY_DEFAULT,
      proto.Capability.CAPABILITY_HOOKS,
    ]);
  });

  it("declare the same hooks and call policies in GetInfo and every heartbeat", async () => {
    await start();
    await registry.waitFor("heartbeats");
    const heartbeat = registry.heartbeats[0]!.request;
    const info = registry.handshakes.get(heartbeat.instanceId)?.info;
    assert.ok(info);
    assert.deepEqual(info.hooks, heartbeat.hooks);
    assert.deepEqual(info.callPolicies, heartbeat.callPolicies);
    assert.deepEqual(info.capabilities, heartbeat.capabilities);
    assert.deepEqual(heartbeat.hooks[0], {
      name: "audit",
      base: WIDGET,
      phase: proto.HookPhase.HOOK_PHASE_BEFORE_RECONCILE,
      behaviour: proto.HookBehaviour.HOOK_BEHAVIOUR_SYNC_ENFORCE,
      order: -1,
    });
    assert.deepEqual(heartbeat.callPolicies, [
      {
        call: proto.Call.CALL_VALIDATE,
        deadline: { seconds: 2, nanos: 0 },
        failurePolicy: proto.FailurePolicy.FAILURE_POLICY_IGNORE,
      },
      {
        call: proto.Call.CALL_HOOK,
        deadline: { seconds: 0, nanos: 250_000_000 },
        failurePolicy: proto.FailurePolicy.FAILURE_POLICY_UNSPECIFIED,
      },
      { call: proto.Call.CALL_RECONCILE, deadline: undefined, failurePolicy: proto.FailurePolicy.FAILURE_POLICY_UNSPECIFIED },
    ]);
  });

  it("answer Validate, refuse with field errors, and fail as the protocol says", async () => {
    const stub = dialer.open((await start()).socketPath);
    const request = (object: Buffer, operation = proto.Operation.OPERATION_CREATE, oldObject = Buffer.alloc(0)) => ({
      implementation: "Tables",
      operation,
      object,
      oldObject,
    });
    const verdict = await stub.validate(request(widget("w"), proto.Operation.OPERATION_UPDATE, widget("w")));
    assert.deepEqual(verdict.errors, [{ path: "spec.columns[1]", value: '"värchar"', message: "only text" }]);
    assert.deepEqual(verdict.warnings, ["was updated"]);
    await rejectsWith(stub.validate(request(widget("broken"))), GrpcStatus.INTERNAL, "Error: the type catalogue is unreachable");
    await rejectsWith(stub.validate(request(Buffer.from("{"))), GrpcStatus.INVALID_ARGUMENT, "kplug: the object is not valid JSON: ");
    await rejectsWith(stub.validate(request(Buffer.from("[]"))), GrpcStatus.INVALID_ARGUMENT, "kplug: the object is not a JSON object");
    await rejectsWith(
      stub.validate(request(widget("w"), proto.Operation.OPERATION_UNSPECIFIED)),
      GrpcStatus.INVALID_ARGUMENT,
      "kplug: the admission request's operation 0 is neither CREATE nor UPDATE",
    );
  });

  it("answer Default with a patch, and INTERNAL for a path outside the allowed ones", async () => {
    const stub = dialer.open((await start()).socketPath);
    const request = (name: string) => ({
      implementation: "Tables",
      operation: proto.Operation.OPERATION_CREATE,
      object: widget(name),
      oldObject: Buffer.alloc(0),
    });
    const defaults = await stub.default(request("w"));
    assert.equal(Buffer.from(defaults.patch).toString(), '[{"op":"add","path":"/spec/engine","value":"InnoDB"}]');
    assert.deepEqual(defaults.warnings, ["engine defaulted"]);
    await rejectsWith(stub.default(request("broken")), GrpcStatus.INTERNAL, "Error: defaults unavailable");
    await rejectsWith(
      stub.default(request("sneaky")),
      GrpcStatus.INTERNAL,
      'InvalidResponseError: a default may only change /spec, /metadata/labels and /metadata/annotations; add "/status/engine" is outside them',
    );
  });

  it("answer Hook, with reserved status keys allowed, and FAILED for a throwing hook", async () => {
    const stub = dialer.open((await start()).socketPath);
    const request = (object: Buffer) => ({
      hook: "audit",
      phase: proto.HookPhase.HOOK_PHASE_AFTER_RECONCILE,
      implementation: "Other",
      object,
      extensions: [],
      outcome: proto.Outcome.OUTCOME_FAILED,
      message: "locked",
    });
    const answer = await stub.hook(request(widget("w")));
    assert.equal(answer.outcome, proto.Outcome.OUTCOME_OK);
    assert.deepEqual(JSON.parse(Buffer.from(answer.status).toString()), { implementation: "Other", phase: "AFTER_RECONCILE" });
    assert.equal(answer.events[0]?.message, "after FAILED: locked");
    const failed = await stub.hook(request(widget("broken")));
    assert.equal(failed.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.equal(failed.message, "Error: backup disk full");
    const bad = await stub.hook(request(Buffer.from("nope")));
    assert.equal(bad.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.ok(bad.message.startsWith("kplug: the base object is not valid JSON: "), bad.message);
  });

  it("check the declarations at start-up", () => {
    const cases: [Partial<PluginInfo>, string][] = [
      [{ hooks: [{ ...HOOKS[0]!, name: "Audit" }] }, 'hook "Audit": its name must be a DNS label'],
      [{ hooks: [HOOKS[0]!, HOOKS[0]!] }, 'hook "audit": it is declared twice'],
      [{ hooks: [{ ...HOOKS[0]!, base: { group: "g", kind: "" } }] }, "it names no base kind"],
      [{ hooks: [{ ...HOOKS[0]!, phase: "DURING" as never }] }, 'its phase "DURING" is not one of'],
      [{ hooks: [{ ...HOOKS[0]!, behaviour: "LAZY" as never }] }, 'its behaviour "LAZY" is not one of'],
      [{ hooks: [{ ...HOOKS[0]!, order: 1.5 }] }, "its order must be a 32-bit integer"],
      [
        { hooks: Array.from({ length: 17 }, (_, i) => ({ ...HOOKS[0]!, name: `h${i}` })) },
        "17 hooks are declared; at most 16",
      ],
      [{ callPolicies: [{ call: "HOOK" }, { call: "HOOK" }] }, "call policy for HOOK: declared twice"],
      [{ callPolicies: [{ call: "VALIDATE", deadlineSeconds: 0 }] }, "the deadline must be a positive number"],
      [{ callPolicies: [{ call: "SOMETIMES" as never }] }, "the call is not one of"],
      [{ callPolicies: [{ call: "DEFAULT", failurePolicy: "MAYBE" as never }] }, 'the failure policy "MAYBE" is not'],
    ];
    for (const [change, message] of cases) {
      assert.throws(
        () => new PluginServer(new Tables(), { ...INFO, ...change }, { socketDir: dir }),
        (error: Error) => error instanceof StartupError && error.message.startsWith("plugin tables cannot start: ") && error.message.includes(message),
        message,
      );
    }
    assert.throws(
      () => new PluginServer({ reconcile: () => Response.ok() }, INFO, { socketDir: dir }),
      /declares hooks but does not implement Plugin.hook/,
    );
  });

  it("check the child kinds of each offer at start-up", () => {
    const offer = (children: unknown): Partial<PluginInfo> => ({
      offers: [{ base: WIDGET, implementation: "Tables", children: children as never }],
    });
    const cases: [Partial<PluginInfo>, string][] = [
      [offer([{ apiVersion: "apps/v1", kind: "" }]), 'child kind {"apiVersion":"apps/v1","kind":""} needs an apiVersion'],
      [offer([{ apiVersion: "", kind: "ConfigMap" }]), "needs an apiVersion"],
      [offer([{ apiVersion: "apps/", kind: "Deployment" }]), "needs an apiVersion"],
      [offer([{ apiVersion: "a/b/v1", kind: "Deployment" }]), "needs an apiVersion"],
      [offer([{ group: "apps", version: "v1", kind: "Deployment" }]), "needs an apiVersion"],
      [offer([null]), "child kind null needs an apiVersion"],
      [offer({ apiVersion: "v1", kind: "ConfigMap" }), "children must be an array"],
      [
        offer(Array.from({ length: 17 }, (_, i) => ({ apiVersion: "v1", kind: `Kind${i}` }))),
        'offer "Tables": 17 child kinds are declared; at most 16',
      ],
    ];
    for (const [change, message] of cases) {
      assert.throws(
        () => new PluginServer(new Tables(), { ...INFO, ...change }, { socketDir: dir }),
        (error: Error) => error instanceof StartupError && error.message.startsWith("plugin tables cannot start: ") && error.message.includes(message),
        message,
      );
    }
    const fine = offer([{ apiVersion: "v1", kind: "ConfigMap" }, { apiVersion: "apps/v1", kind: "Deployment" }]);
    assert.doesNotThrow(() => new PluginServer(new Tables(), { ...INFO, ...fine }, { socketDir: dir }));
  });

  it("bound a Validation like every SDK", () => {
    const verdict = Validation.allowed();
    for (let i = 0; i < 100; i++) verdict.error(`spec.x[${i}]`, i, "bad");
    for (let i = 0; i < 20; i++) verdict.warning(`w${i} ${"x".repeat(300)}`);
    const wire = verdict.toValidateResponse();
    assert.equal(wire.errors.length, 64);
    assert.equal(wire.errors[63]?.message, "and 37 more errors");
    assert.equal(wire.warnings.length, 16);
    assert.equal(wire.warnings[15], "and 5 more warnings");
    assert.equal(Array.from(wire.warnings[0]!).length, 256);
    assert.ok(wire.warnings[0]!.endsWith("…"));
    assert.ok(!verdict.allowed);
    assert.ok(Validation.allowed().warning("fine").allowed);
    assert.equal(Validation.allowed().errorAt("a", "y".repeat(2000)).toValidateResponse().errors[0]?.message.length, 1024);
    // A value JSON cannot carry is sent as no value, as the Rust SDK does.
    assert.equal(Validation.allowed().error("a", 1n, "m").errors[0]?.value, "");
  });

  it("refuse defaults outside the allowed paths at once", () => {
    for (const path of ["/status/x", "/metadata/name", "/specx", "spec/x", ""]) {
      assert.throws(() => Defaults.none().add("/spec/a", 1).add(path, 2), (error: Error) =>
        error instanceof InvalidResponseError && error.message.includes(`add ${JSON.stringify(path)} is outside them`),
      );
    }
    const patch = Defaults.none()
      .add("/spec", { a: 1 })
      .replace("/metadata/annotations/a~1b", "c")
      .remove("/metadata/labels/old")
      .toDefaultResponse().patch;
    assert.deepEqual(JSON.parse(Buffer.from(patch).toString()), [
      { op: "add", path: "/spec", value: { a: 1 } },
      { op: "replace", path: "/metadata/annotations/a~1b", value: "c" },
      { op: "remove", path: "/metadata/labels/old" },
    ]);
    assert.equal(Defaults.none().toDefaultResponse().patch.length, 0);
    assert.throws(() => Defaults.none().add("/spec/blob", "x".repeat(262144)).toDefaultResponse(), /at most 262144/);
  });
});
