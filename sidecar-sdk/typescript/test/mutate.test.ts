// Mutate: the Mutation builder and its path rule, MutateCall, the MUTATE
// capability and the declared kinds (GetInfo and heartbeats alike, checked
// at start-up), and every answer, error and bad input over a real socket.

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";

import { CapturingLogger, Dialer, FakeRegistry, removeDir, tempSocketDir } from "./helpers.js";
import {
  Defaults,
  InvalidRequestError,
  InvalidResponseError,
  type JsonObject,
  MutateCall,
  Mutation,
  type MutationKind,
  type Plugin,
  type PluginInfo,
  PluginServer,
  proto,
  Response,
  StartupError,
} from "./sdk.js";
import { mutationPathAllowed } from "../src/mutate.js";
import { wireCallPolicy } from "../src/hooks.js";

const DEPLOYMENT: MutationKind = { apiVersion: "apps/v1", kind: "Deployment" };
const SIDECAR = { name: "backup", image: "backup:1" };
const INFO: PluginInfo = { name: "backup", version: "1.0.0", offers: [], mutations: [DEPLOYMENT] };

function deployment(name = "db"): JsonObject {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "ns", labels: { "kplug.io/plugin": "db" } },
    spec: { template: { spec: { containers: [{ name: "db" }] } } },
  };
}

/** Adds a sidecar; the object's name picks a mistake instead. */
class Backup implements Plugin {
  reconcile(): Response {
    return Response.ok();
  }

  mutate(call: MutateCall): Mutation {
    if (call.name === "broken") {
      throw new Error("backup store unreachable");
    }
    if (call.name === "sneaky") {
      return Mutation.none().add("/metadata/labels/kplug.io~1plugin", "backup");
    }
    if (call.name === "confused") {
      return Defaults.none() as unknown as Mutation;
    }
    const live = call.live === undefined ? "none" : new MutateCall("", call.live).name;
    const base = call.base === undefined ? "none" : JSON.stringify(call.base["kind"]);
    return Mutation.none()
      .add("/spec/template/spec/containers/-", SIDECAR)
      .warning(`${call.implementation} ${call.toString()} live=${live} base=${base}`);
  }
}

let dir: string;
let registry: FakeRegistry;
let dialer: Dialer;
let servers: PluginServer[];

async function start(plugin: Plugin = new Backup(), info: PluginInfo = INFO): Promise<PluginServer> {
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

const json = (value: JsonObject) => Buffer.from(JSON.stringify(value));

describe("mutate", () => {
  it("allows the paths the operator allows, and refuses the others at once", () => {
    const paths: [string, boolean][] = [
      ["/spec", true],
      ["/spec/template/spec/containers/-", true],
      ["/metadata/labels/backup", true],
      ["/metadata/annotations/backup.example~1enabled", true],
      // kplug.io/ keys are the operator's; another domain ending in kplug.io is not.
      ["/metadata/labels/kplug.io~1plugin", false],
      ["/metadata/annotations/kplug.io~1intent-hash", false],
      ["/metadata/labels/sub.kplug.io~1x", true],
      // The whole map holds kplug's own labels.
      ["/metadata/labels", false],
      ["/metadata/annotations", false],
      ["/metadata/name", false],
      ["/metadata", false],
      ["/status/ready", false],
      ["/specification", false],
      ["", false],
    ];
    for (const [path, allowed] of paths) {
      assert.equal(mutationPathAllowed(path), allowed, path);
      if (allowed) {
        assert.doesNotThrow(() => Mutation.none().add(path, 1), path);
        continue;
      }
      assert.throws(
        () => Mutation.none().remove(path),
        (error: Error) =>
          error instanceof InvalidResponseError &&
          error.message ===
            "a mutation may only change /spec and single labels and annotations, not kplug.io/ ones; " +
              `remove ${JSON.stringify(path)} is outside them`,
        path,
      );
    }
  });

  it("builds a compact JSON Patch, in order, copying the values", () => {
    const sidecar = { ...SIDECAR };
    const mutation = Mutation.none()
      .add("/spec/template/spec/containers/-", sidecar)
      .replace("/spec/replicas", 2)
      .remove("/metadata/annotations/old")
      .add("/metadata/labels/backup", "jä")
      .warning("a sidecar was added");
    sidecar.image = "changed";
    assert.ok(!mutation.empty);
    const wire = mutation.toMutateResponse();
    assert.equal(
      Buffer.from(wire.patch).toString("utf8"),
      JSON.stringify([
        { op: "add", path: "/spec/template/spec/containers/-", value: SIDECAR },
        { op: "replace", path: "/spec/replicas", value: 2 },
        { op: "remove", path: "/metadata/annotations/old" },
        { op: "add", path: "/metadata/labels/backup", value: "jä" },
      ]),
    );
    assert.deepEqual(wire.warnings, ["a sidecar was added"]);
    assert.deepEqual(mutation.patch[0], { op: "add", path: "/spec/template/spec/containers/-", value: SIDECAR });
    // No operation: no patch at all, which the operator reads as "apply as it is".
    assert.ok(Mutation.none().empty);
    assert.equal(Mutation.none().toMutateResponse().patch.length, 0);
  });

  it("refuses values JSON cannot carry and a patch larger than the operator takes", () => {
    assert.throws(() => Mutation.none().add("/spec/x", 1n as never), /cannot be encoded as JSON/);
    assert.throws(() => Mutation.none().add("/spec/x", undefined as never), /cannot be encoded as JSON/);
    assert.throws(() => Mutation.none().add("/spec/blob", "x".repeat(262144)).toMutateResponse(), /at most 262144 are accepted/);
  });

  it("bounds warnings like admission warnings", () => {
    const mutation = Mutation.none();
    for (let i = 0; i < 20; i++) mutation.warning(`w${i} ${"x".repeat(300)}`);
    const warnings = mutation.toMutateResponse().warnings;
    assert.equal(warnings.length, 16);
    assert.equal(warnings[15], "and 5 more warnings");
    assert.ok(warnings.slice(0, 15).every((w) => Array.from(w).length === 256 && w.endsWith("…")));
  });

  it("decodes a MutateCall, and says which object is not a JSON object", () => {
    const call = MutateCall.decode({
      implementation: "Db",
      object: json(deployment()),
      live: json(deployment()),
      base: json({ kind: "Database" }),
    });
    assert.deepEqual([call.implementation, call.kind, call.name, call.namespace], ["Db", "Deployment", "db", "ns"]);
    assert.deepEqual(call.metadata["labels"], { "kplug.io/plugin": "db" });
    assert.deepEqual((call.spec["template"] as JsonObject)["spec"], { containers: [{ name: "db" }] });
    assert.deepEqual(call.live, deployment());
    assert.deepEqual(call.base, { kind: "Database" });
    assert.equal(call.toString(), "Deployment ns/db");
    const bare = new MutateCall("", { kind: "Deployment", metadata: { name: "own" } });
    assert.deepEqual([bare.live, bare.base, bare.toString()], [undefined, undefined, "Deployment own"]);
    const empty = Buffer.alloc(0);
    for (const [wire, message] of [
      [{ object: Buffer.from("[1]"), live: empty, base: empty }, "kplug: the object is not a JSON object"],
      [{ object: json({}), live: Buffer.from("1"), base: empty }, "kplug: the live object is not a JSON object"],
      [{ object: json({}), live: empty, base: Buffer.from("null") }, "kplug: the base object is not a JSON object"],
    ] as const) {
      assert.throws(
        () => MutateCall.decode({ implementation: "", ...wire }),
        (error: Error) => error instanceof InvalidRequestError && error.message === message,
      );
    }
  });

  it("checks the declared mutations at start-up", () => {
    const cases: [Plugin, unknown, string][] = [
      [{ reconcile: () => Response.ok() }, [DEPLOYMENT], "it declares mutations but does not implement Plugin.mutate"],
      [new Backup(), [], "it implements Plugin.mutate but declares no kind to mutate"],
      [new Backup(), undefined, "it implements Plugin.mutate but declares no kind to mutate"],
      [new Backup(), [{ apiVersion: "apps/v1", kind: "" }], 'mutation {"apiVersion":"apps/v1","kind":""} needs an apiVersion'],
      [new Backup(), [{ apiVersion: "apps/", kind: "Deployment" }], "needs an apiVersion"],
      [new Backup(), [{ group: "apps", version: "v1", kind: "Deployment" }], "needs an apiVersion"],
      [new Backup(), [null], "mutation null needs an apiVersion"],
      [new Backup(), DEPLOYMENT, "mutations must be an array"],
      [
        new Backup(),
        Array.from({ length: 17 }, (_, i) => ({ apiVersion: "v1", kind: `Kind${i}` })),
        "17 mutations are declared; at most 16",
      ],
    ];
    for (const [plugin, mutations, message] of cases) {
      assert.throws(
        () => new PluginServer(plugin, { ...INFO, mutations: mutations as never }, { socketDir: dir }),
        (error: Error) =>
          error instanceof StartupError &&
          error.message.startsWith("plugin backup cannot start: ") &&
          error.message.includes(message),
        message,
      );
    }
  });

  it("takes a call policy for MUTATE", () => {
    assert.deepEqual(wireCallPolicy({ call: "MUTATE", deadlineSeconds: 3 }), {
      call: proto.Call.CALL_MUTATE,
      deadline: { seconds: 3, nanos: 0 },
      failurePolicy: proto.FailurePolicy.FAILURE_POLICY_UNSPECIFIED,
    });
  });

  it("advertises MUTATE last and declares the same kinds in GetInfo and every heartbeat", async () => {
    const offer = {
      base: { group: "example.com", kind: "Widget" },
      implementation: "W",
      children: [{ apiVersion: "apps/v1", kind: "Deployment" }],
    };
    await start(new Backup(), { ...INFO, offers: [offer], mutations: [DEPLOYMENT, { apiVersion: "v1", kind: "ConfigMap" }] });
    await registry.waitFor("heartbeats");
    const heartbeat = registry.heartbeats[0]!.request;
    const info = registry.handshakes.get(heartbeat.instanceId)?.info;
    assert.ok(info);
    for (const declared of [heartbeat, info]) {
      assert.deepEqual(declared.capabilities, [
        proto.Capability.CAPABILITY_RECONCILE,
        proto.Capability.CAPABILITY_CHILDREN,
        proto.Capability.CAPABILITY_MUTATE,
      ]);
      assert.deepEqual(declared.mutations, [
        { kind: { group: "apps", version: "v1", kind: "Deployment" } },
        { kind: { group: "", version: "v1", kind: "ConfigMap" } },
      ]);
    }
  });

  it("answers Mutate with a patch, INTERNAL for a mistake and INVALID_ARGUMENT for bad input", async () => {
    const stub = dialer.open((await start()).socketPath);
    const empty = Buffer.alloc(0);
    const request = (name: string, live?: JsonObject, base?: JsonObject) => ({
      implementation: "Db",
      object: json(deployment(name)),
      live: live === undefined ? empty : json(live),
      base: base === undefined ? empty : json(base),
    });
    const answer = await stub.mutate(request("db", deployment(), { kind: "Db" }));
    assert.deepEqual(JSON.parse(Buffer.from(answer.patch).toString()), [
      { op: "add", path: "/spec/template/spec/containers/-", value: SIDECAR },
    ]);
    assert.deepEqual(answer.warnings, ['Db Deployment ns/db live=db base="Db"']);
    assert.deepEqual((await stub.mutate(request("new"))).warnings, ["Db Deployment ns/new live=none base=none"]);
    await rejectsWith(stub.mutate(request("broken")), GrpcStatus.INTERNAL, "Error: backup store unreachable");
    await rejectsWith(
      stub.mutate(request("sneaky")),
      GrpcStatus.INTERNAL,
      "InvalidResponseError: a mutation may only change /spec and single labels and annotations, not kplug.io/ ones",
    );
    await rejectsWith(stub.mutate(request("confused")), GrpcStatus.INTERNAL, "TypeError: mutate() must return a Mutation, got object");
    const bad = (object: string, live = "", base = "") => ({
      implementation: "",
      object: Buffer.from(object),
      live: Buffer.from(live),
      base: Buffer.from(base),
    });
    await rejectsWith(stub.mutate(bad("{")), GrpcStatus.INVALID_ARGUMENT, "kplug: the object is not valid JSON: ");
    await rejectsWith(stub.mutate(bad("[1]")), GrpcStatus.INVALID_ARGUMENT, "kplug: the object is not a JSON object");
    await rejectsWith(stub.mutate(bad("{}", "1")), GrpcStatus.INVALID_ARGUMENT, "kplug: the live object is not a JSON object");
    await rejectsWith(stub.mutate(bad("{}", "", "null")), GrpcStatus.INVALID_ARGUMENT, "kplug: the base object is not a JSON object");
  });
});
