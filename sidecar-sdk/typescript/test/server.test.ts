// A plugin served in-process on a real socket, registered with a fake
// operator registry (real grpc-js, real Unix sockets).

import assert from "node:assert/strict";
import { existsSync, lstatSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";

import {
  CapturingLogger,
  Dialer,
  FakeRegistry,
  removeDir,
  tempSocketDir,
  unary,
  waitUntil,
} from "./helpers.js";
import {
  type Offer,
  type Plugin,
  type PluginInfo,
  PluginServer,
  proto,
  type Readiness,
  type Request,
  Response,
} from "./sdk.js";

const OFFER: Offer = {
  base: { group: "myorg.org", kind: "DatabaseTable" },
  implementation: "PostgreSQL",
  extensions: [{ group: "myorg.org", kind: "DatabaseTablePostgreSqlExtension" }],
};
const INFO: PluginInfo = { name: "postgresql", version: "1.4.2", offers: [OFFER], description: "Tables in PostgreSQL" };
const BASE = {
  apiVersion: "myorg.org/v1alpha1",
  kind: "DatabaseTable",
  metadata: { name: "users", namespace: "shop", generation: 2 },
  spec: {},
};

/** Answers with what it was sent; switchable readiness. */
class Echo implements Plugin {
  readiness: Readiness | boolean = { ready: true };
  reconcile(request: Request): Response {
    return Response.ok(`reconciled ${request.toString()}`).withStatus({ spec: request.spec });
  }
  ready(): Readiness | boolean {
    return this.readiness;
  }
}

class Finalizing extends Echo {
  finalize(): Response {
    return Response.ok("dropped");
  }
}

function reconcileRequest(spec: object = {}): proto.ReconcileRequest {
  return {
    implementation: "PostgreSQL",
    object: Buffer.from(JSON.stringify({ ...BASE, spec })),
    extensions: [],
    children: [],
  };
}

const statusOf = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString("utf8")) as unknown;

let dir: string;
let registry: FakeRegistry;
let dialer: Dialer;
let logger: CapturingLogger;
let servers: PluginServer[];

async function start(
  plugin: Plugin = new Echo(),
  info: PluginInfo = INFO,
  heartbeatIntervalSeconds = 0.1,
): Promise<PluginServer> {
  const server = new PluginServer(plugin, info, { socketDir: dir, heartbeatIntervalSeconds, logger });
  await server.start();
  servers.push(server);
  return server;
}

beforeEach(async () => {
  dir = await tempSocketDir();
  registry = await new FakeRegistry(dir).start();
  dialer = new Dialer();
  logger = new CapturingLogger();
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

describe("heartbeats", () => {
  it("describe the plugin, with a host-name :authority", async () => {
    const server = await start();
    await registry.waitFor("heartbeats");
    const { request: heartbeat, authority } = registry.heartbeats[0]!;
    assert.equal(heartbeat.name, "postgresql");
    assert.equal(heartbeat.version, "1.4.2");
    assert.equal(heartbeat.protocol, "kplug.v1");
    assert.equal(heartbeat.socket, "plugins/postgresql/plugin.sock");
    assert.ok(lstatSync(join(dir, heartbeat.socket)).isSocket());
    assert.equal(heartbeat.instanceId, server.instanceId);
    assert.deepEqual(heartbeat.offers, [
      {
        base: { group: "myorg.org", kind: "DatabaseTable" },
        implementation: "PostgreSQL",
        extensions: [{ group: "myorg.org", kind: "DatabaseTablePostgreSqlExtension" }],
        children: [],
      },
    ]);
    assert.deepEqual(heartbeat.capabilities, [proto.Capability.CAPABILITY_RECONCILE]);
    assert.deepEqual(heartbeat.mutations, []);
    assert.equal(authority, "localhost");
  });

  it("start after the plugin serves: the operator's dial-back succeeds", async () => {
    const server = await start();
    await registry.waitFor("heartbeats");
    const handshake = registry.handshakes.get(server.instanceId);
    assert.equal(handshake?.error, undefined);
    assert.equal(handshake?.probe?.ready, true);
  });

  it("agree with GetInfo", async () => {
    await start(new Finalizing());
    await registry.waitFor("heartbeats");
    const { request: heartbeat } = registry.heartbeats[0]!;
    const info = registry.handshakes.get(heartbeat.instanceId)?.info;
    assert.ok(info);
    assert.deepEqual(
      [info.name, info.version, info.protocol, info.description],
      ["postgresql", "1.4.2", "kplug.v1", "Tables in PostgreSQL"],
    );
    assert.deepEqual(info.offers, heartbeat.offers);
    assert.deepEqual(info.capabilities, heartbeat.capabilities);
    assert.deepEqual(info.capabilities, [
      proto.Capability.CAPABILITY_RECONCILE,
      proto.Capability.CAPABILITY_FINALIZE,
    ]);
  });

  it("continue at the interval, for one instance", async () => {
    const server = await start(new Echo(), INFO, 0.1);
    await registry.waitFor("heartbeats", 5, 3000);
    const times = registry.heartbeats.map((h) => h.at);
    const gaps = times.slice(1).map((t, i) => (t - times[i]!) / 1000);
    assert.ok(gaps.every((gap) => gap > 0.08 && gap < 1), String(gaps));
    assert.deepEqual(new Set(registry.heartbeats.map((h) => h.request.instanceId)), new Set([server.instanceId]));
    assert.equal(registry.handshakes.size, 1);
    assert.equal(server.registered, true);
  });

  it("follow the interval the operator asks for", async () => {
    registry.interval = 0.05;
    const server = await start(new Echo(), INFO, 30);
    await registry.waitFor("heartbeats", 4, 2000);
    assert.equal(server.heartbeatIntervalSeconds, 0.05);
  });

  it("go on after a refusal, which is logged once, at error level", async () => {
    registry.accepted = false;
    registry.reason = "protocol kplug.v1 not supported";
    const server = await start(new Echo(), INFO, 0.05);
    await registry.waitFor("heartbeats", 4, 3000);
    const refusals = logger.matching("refused the registration");
    assert.equal(refusals.length, 1);
    assert.equal(refusals[0]?.level, "error");
    assert.ok(refusals[0].message.includes("protocol kplug.v1 not supported"));
    assert.equal(server.registered, false);
  });

  it("register once the operator appears", async () => {
    registry.stop();
    const server = await start(new Echo(), INFO, 1);
    await sleep(300); // the plugin started first, as sidecars often do
    const late = await new FakeRegistry(dir).start();
    try {
      await late.waitFor("heartbeats", 1, 2000);
      assert.equal(late.handshakes.get(server.instanceId)?.error, undefined);
      const waiting = logger.matching(`no operator registry at ${join(dir, "registry.sock")} yet`);
      assert.equal(waiting.length, 1);
      assert.equal(waiting[0]?.level, "warn");
    } finally {
      late.stop();
    }
  });

  it("register again after the operator restarts, with backoff while it is away", async () => {
    const server = await start(new Echo(), INFO, 1);
    await registry.waitFor("heartbeats");
    await waitUntil(() => server.registered, "registered");
    registry.stop();
    // Nobody answers for 3 s: the next heartbeat, 1 s later, fails, then the
    // plugin retries after 0.1, 0.2, 0.4, 0.8 and 1 s (capped at the interval).
    await sleep(3000);
    assert.equal(server.registered, false);
    const restarted = await new FakeRegistry(dir).start();
    try {
      await restarted.waitFor("heartbeats", 1, 3000);
      assert.equal(restarted.heartbeats[0]?.request.instanceId, server.instanceId);
      assert.equal(restarted.handshakes.get(server.instanceId)?.error, undefined, "handshakes again");
      await restarted.waitFor("heartbeats", 2, 3000); // and carries on
    } finally {
      restarted.stop();
    }
    const delays = logger
      .matching("next try in")
      .map((line) => Number(/next try in ([\d.]+)s/.exec(line.message)?.[1]));
    assert.ok(delays.length >= 5, String(delays));
    [0.1, 0.2, 0.4, 0.8, 1].forEach((expected, i) => {
      const delay = delays[i]!;
      // Up to 10 % shorter (jitter), never longer; the log rounds to milliseconds.
      assert.ok(delay >= expected * 0.9 - 0.001 && delay <= expected + 0.001, String(delays));
    });
    assert.equal(logger.matching("lost the operator").length, 1, "not one line per retry");
    assert.equal(logger.matching("lost the operator")[0]?.level, "warn");
    assert.equal(logger.matching("registered with the operator").length, 2);
  });
});

describe("the Plugin service", () => {
  it("answers GetInfo with the FINALIZE capability when asked or when finalize exists", async () => {
    const cases: [Plugin, boolean | undefined, proto.Capability[]][] = [
      [new Echo(), undefined, [proto.Capability.CAPABILITY_RECONCILE]],
      [new Finalizing(), undefined, [proto.Capability.CAPABILITY_RECONCILE, proto.Capability.CAPABILITY_FINALIZE]],
      [new Echo(), true, [proto.Capability.CAPABILITY_RECONCILE, proto.Capability.CAPABILITY_FINALIZE]],
      [new Finalizing(), false, [proto.Capability.CAPABILITY_RECONCILE]],
    ];
    for (const [i, [plugin, finalize, expected]] of cases.entries()) {
      const info: PluginInfo = finalize === undefined ? { ...INFO, name: `caps-${i}` } : { ...INFO, name: `caps-${i}`, finalize };
      const server = await start(plugin, info, 60);
      const response = await dialer.open(server.socketPath).getInfo();
      assert.deepEqual(response.capabilities, expected, `case ${i}`);
    }
  });

  it("answers Probe from the plugin's readiness", async () => {
    const plugin = new Echo();
    const server = await start(plugin, INFO, 60);
    const stub = dialer.open(server.socketPath);
    const probe = async () => {
      const response = await stub.probe();
      return [response.ready, response.message];
    };
    assert.deepEqual(await probe(), [true, ""]);
    plugin.readiness = { ready: false, message: "database unreachable" };
    assert.deepEqual(await probe(), [false, "database unreachable"]);
    plugin.readiness = true;
    assert.deepEqual(await probe(), [true, ""]);
    plugin.readiness = false;
    assert.deepEqual(await probe(), [false, ""]);
  });

  it("answers not ready when ready() throws", async () => {
    const plugin: Plugin = {
      reconcile: () => Response.ok(),
      ready: async () => {
        throw new Error("no route to database");
      },
    };
    const server = await start(plugin, INFO, 60);
    const response = await dialer.open(server.socketPath).probe();
    assert.deepEqual([response.ready, response.message], [false, "Error: no route to database"]);
  });

  it("is ready by default", async () => {
    const server = await start({ reconcile: () => Response.ok() }, INFO, 60);
    assert.equal((await dialer.open(server.socketPath).probe()).ready, true);
  });

  it("answers Validate, Default, Hook and Mutate with UNIMPLEMENTED when it has none of their methods, advertising none", async () => {
    const server = await start(new Echo(), INFO, 60);
    const stub = dialer.open(server.socketPath);
    const info = await stub.getInfo();
    assert.deepEqual(info.hooks, []);
    assert.deepEqual(info.callPolicies, []);
    assert.deepEqual(info.mutations, []);
    for (const capability of [
      proto.Capability.CAPABILITY_VALIDATE,
      proto.Capability.CAPABILITY_DEFAULT,
      proto.Capability.CAPABILITY_HOOKS,
      proto.Capability.CAPABILITY_CHILDREN,
      proto.Capability.CAPABILITY_MUTATE,
    ]) {
      assert.ok(!info.capabilities.includes(capability), `${capability}`);
    }
    const admission = {
      implementation: "PostgreSQL",
      operation: proto.Operation.OPERATION_CREATE,
      object: Buffer.from(JSON.stringify(BASE)),
      oldObject: Buffer.alloc(0),
    };
    const calls: [string, Promise<unknown>][] = [
      ["Validate", unary((done) => stub.client.validate(admission, done))],
      ["Default", unary((done) => stub.client.default(admission, done))],
      [
        "Hook",
        unary((done) =>
          stub.client.hook(
            {
              hook: "h",
              phase: proto.HookPhase.HOOK_PHASE_BEFORE_RECONCILE,
              implementation: "PostgreSQL",
              object: Buffer.from(JSON.stringify(BASE)),
              extensions: [],
              outcome: proto.Outcome.OUTCOME_UNSPECIFIED,
              message: "",
            },
            done,
          ),
        ),
      ],
      [
        "Mutate",
        unary((done) =>
          stub.client.mutate(
            { object: Buffer.from(JSON.stringify(BASE)), live: Buffer.alloc(0), base: Buffer.alloc(0), implementation: "" },
            done,
          ),
        ),
      ],
    ];
    for (const [call, answer] of calls) {
      await assert.rejects(
        answer,
        (error: ServiceError) =>
          error.code === GrpcStatus.UNIMPLEMENTED && error.details === `plugin postgresql does not implement ${call}`,
        call,
      );
    }
  });

  it("round-trips a Reconcile", async () => {
    const server = await start(new Echo(), INFO, 60);
    const response = await dialer.open(server.socketPath).reconcile(reconcileRequest({ columns: ["id"] }));
    assert.equal(response.outcome, proto.Outcome.OUTCOME_OK);
    assert.equal(response.message, "reconciled DatabaseTable shop/users");
    assert.deepEqual(statusOf(response.status), { spec: { columns: ["id"] } });
  });

  it("turns a handler error into FAILED, logs it and keeps serving", async () => {
    const plugin: Plugin = {
      reconcile: async () => {
        throw new TypeError("serverName is undefined");
      },
    };
    const server = await start(plugin, INFO, 60);
    const stub = dialer.open(server.socketPath);
    const response = await stub.reconcile(reconcileRequest());
    assert.equal(response.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.equal(response.message, "TypeError: serverName is undefined");
    assert.equal(response.status.length, 0);
    const [logged] = logger.matching("reconcile of DatabaseTable shop/users failed");
    assert.equal(logged?.level, "error");
    assert.ok(logged.message.includes("TypeError: serverName is undefined\n    at "), "with the stack");
    assert.equal((await stub.probe()).ready, true);
  });

  it("turns a synchronous throw and a thrown non-Error into FAILED", async () => {
    let thrown: unknown = new RangeError("sync");
    const plugin: Plugin = {
      reconcile: () => {
        throw thrown;
      },
    };
    const server = await start(plugin, INFO, 60);
    const stub = dialer.open(server.socketPath);
    assert.equal((await stub.reconcile(reconcileRequest())).message, "RangeError: sync");
    thrown = "just a string";
    assert.equal((await stub.reconcile(reconcileRequest())).message, "just a string");
  });

  it("turns a wrong return value into FAILED", async () => {
    const plugin = { reconcile: async () => undefined } as unknown as Plugin;
    const server = await start(plugin, INFO, 60);
    const response = await dialer.open(server.socketPath).reconcile(reconcileRequest());
    assert.equal(response.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.equal(response.message, "TypeError: reconcile() must return a Response, got undefined");
  });

  it("turns a reserved status key into FAILED with nothing else", async () => {
    const plugin: Plugin = {
      reconcile: (request) => Response.ok().event("E", "e").withStatus({ observedGeneration: request.generation }),
    };
    const server = await start(plugin, INFO, 60);
    const response = await dialer.open(server.socketPath).reconcile(reconcileRequest());
    assert.equal(response.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.ok(
      response.message.startsWith('InvalidResponseError: status key "observedGeneration" is reserved for the operator'),
      response.message,
    );
    assert.equal(response.status.length, 0);
    assert.deepEqual(response.events, []);
  });

  it("answers invalid JSON with FAILED without calling the handler", async () => {
    let called = false;
    const plugin: Plugin = {
      reconcile: () => {
        called = true;
        return Response.ok();
      },
    };
    const server = await start(plugin, INFO, 60);
    const response = await dialer
      .open(server.socketPath)
      .reconcile({ implementation: "PostgreSQL", object: Buffer.from("{oops"), extensions: [], children: [] });
    assert.equal(response.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.ok(response.message.startsWith("kplug: the base object is not valid JSON: "), response.message);
    assert.equal(called, false);
  });

  it("answers Finalize with done by default", async () => {
    const server = await start(new Echo(), INFO, 60);
    const response = await dialer
      .open(server.socketPath)
      .finalize({ implementation: "PostgreSQL", object: Buffer.from(JSON.stringify(BASE)), extensions: [], children: [] });
    assert.equal(response.outcome, proto.Outcome.OUTCOME_OK);
  });

  it("runs calls concurrently", async () => {
    const plugin: Plugin = {
      async reconcile() {
        await sleep(400);
        return Response.ok("slept");
      },
    };
    const server = await start(plugin, INFO, 60);
    const stub = dialer.open(server.socketPath);
    const started = performance.now();
    const responses = await Promise.all([1, 2, 3, 4].map(() => stub.reconcile(reconcileRequest())));
    const elapsed = performance.now() - started;
    assert.ok(elapsed < 1000, `four 400 ms calls took ${elapsed} ms`);
    assert.deepEqual(responses.map((r) => r.message), ["slept", "slept", "slept", "slept"]);
  });

  it("accepts objects larger than gRPC's 4 MiB default", async () => {
    const server = await start(new Echo(), INFO, 60);
    const big = "x".repeat(6 * 1024 * 1024);
    const response = await dialer.open(server.socketPath).reconcile(reconcileRequest({ big }), 20);
    assert.equal(response.outcome, proto.Outcome.OUTCOME_OK);
    assert.deepEqual(statusOf(response.status), { spec: { big } });
  });
});

const CHILD_OFFER: Offer = {
  base: { group: "myorg.org", kind: "DatabaseTable" },
  implementation: "PostgreSQL",
  children: [
    { apiVersion: "v1", kind: "ConfigMap" },
    { apiVersion: "apps/v1", kind: "Deployment" },
  ],
};
const PARENT_INFO: PluginInfo = { name: "parent", version: "1", offers: [CHILD_OFFER] };
const SETTINGS = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "users-settings" } };

/** Desires one ConfigMap per table, and reports the Deployments it observes. */
class Parent implements Plugin {
  reconcile(request: Request): Response {
    const deployments = request.childrenOf("Deployment").map((d) => request.ref(d).name);
    return Response.ok()
      .withStatus({ deployments })
      .child({ ...SETTINGS, metadata: { name: `${request.name}-settings` }, data: { table: request.name } });
  }

  finalize(request: Request): Response {
    // Keeps the children while clean-up goes on; the empty set once it is done.
    if (request.child("ConfigMap", "users-settings") !== undefined) {
      return Response.retry(1, "draining").withChildren(request.children);
    }
    return Response.ok().withChildren([]);
  }
}

const childrenOf = (children: proto.Children | undefined) =>
  children?.objects.map((c) => JSON.parse(Buffer.from(c).toString("utf8")) as unknown);

describe("children", () => {
  it("are advertised with CHILDREN, last, in heartbeats and GetInfo", async () => {
    await start(new Parent(), PARENT_INFO);
    await registry.waitFor("heartbeats");
    const { request: heartbeat } = registry.heartbeats[0]!;
    const info = registry.handshakes.get(heartbeat.instanceId)?.info;
    assert.ok(info);
    const expected = [
      proto.Capability.CAPABILITY_RECONCILE,
      proto.Capability.CAPABILITY_FINALIZE,
      proto.Capability.CAPABILITY_CHILDREN,
    ];
    assert.deepEqual(heartbeat.capabilities, expected);
    assert.deepEqual(info.capabilities, expected);
    for (const offers of [heartbeat.offers, info.offers]) {
      assert.deepEqual(offers[0]?.children, [
        { group: "", version: "v1", kind: "ConfigMap" },
        { group: "apps", version: "v1", kind: "Deployment" },
      ]);
    }
    assert.deepEqual(heartbeat.mutations, []);
    assert.deepEqual(info.mutations, []);
  });

  it("go both ways in Reconcile and Finalize", async () => {
    const server = await start(new Parent(), PARENT_INFO, 60);
    const stub = dialer.open(server.socketPath);
    const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "db" } };
    const response = await stub.reconcile({ ...reconcileRequest(), children: [Buffer.from(JSON.stringify(deployment))] });
    assert.equal(response.outcome, proto.Outcome.OUTCOME_OK, response.message);
    assert.deepEqual(statusOf(response.status), { deployments: ["db"] });
    assert.deepEqual(childrenOf(response.children), [
      { ...SETTINGS, data: { table: "users" } },
    ]);

    const finalize = {
      implementation: "PostgreSQL",
      object: Buffer.from(JSON.stringify(BASE)),
      extensions: [],
      children: [Buffer.from(JSON.stringify(SETTINGS))],
    };
    const draining = await stub.finalize(finalize);
    assert.equal(draining.outcome, proto.Outcome.OUTCOME_RETRY);
    assert.deepEqual(childrenOf(draining.children), [SETTINGS]);
    // The empty set is still a set: the message is sent, with no object.
    const done = await stub.finalize({ ...finalize, children: [] });
    assert.equal(done.outcome, proto.Outcome.OUTCOME_OK);
    assert.deepEqual(done.children, { objects: [] });
  });

  it("are left as they are by an answer without them", async () => {
    const server = await start(new Echo(), INFO, 60);
    const response = await dialer.open(server.socketPath).reconcile(reconcileRequest());
    assert.equal(response.outcome, proto.Outcome.OUTCOME_OK);
    assert.equal(response.children, undefined);
  });

  it("that are not JSON objects, observed, fail the call before the handler", async () => {
    let called = false;
    const plugin: Plugin = {
      reconcile: () => {
        called = true;
        return Response.ok();
      },
    };
    const server = await start(plugin, PARENT_INFO, 60);
    const stub = dialer.open(server.socketPath);
    const notAnObject = await stub.reconcile({ ...reconcileRequest(), children: [Buffer.from("{}"), Buffer.from("[1]")] });
    assert.equal(notAnObject.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.equal(notAnObject.message, "kplug: child #1 is not a JSON object");
    const notJson = await stub.reconcile({ ...reconcileRequest(), children: [Buffer.from("{oops")] });
    assert.ok(notJson.message.startsWith("kplug: child #0 is not valid JSON: "), notJson.message);
    assert.equal(notJson.children, undefined);
    assert.equal(called, false);
  });

  it("that are not JSON objects, desired, fail the call with nothing else", async () => {
    const plugin: Plugin = {
      // What plain JavaScript can do: the types would refuse it.
      reconcile: (request) => Response.ok().withStatus({ a: 1 }).withChildren([request.object, 42 as unknown as object]),
    };
    const server = await start(plugin, PARENT_INFO, 60);
    const response = await dialer.open(server.socketPath).reconcile(reconcileRequest());
    assert.equal(response.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.ok(response.message.includes("a child must be a JSON object"), response.message);
    assert.equal(response.status.length, 0);
    assert.equal(response.children, undefined);
  });
});

describe("stop", () => {
  it("unregisters, stops heartbeating and removes the socket", async () => {
    const server = new PluginServer(new Echo(), INFO, { socketDir: dir, heartbeatIntervalSeconds: 0.1, logger });
    servers.push(server); // stopped after the test, even when it fails
    await server.start();
    await registry.waitFor("heartbeats");
    await server.stop();
    assert.equal(registry.unregisters.length, 1);
    const { request: unregister, authority } = registry.unregisters[0]!;
    assert.deepEqual([unregister.name, unregister.instanceId], ["postgresql", server.instanceId]);
    assert.equal(authority, "localhost");
    assert.equal(existsSync(server.socketPath), false);
    assert.equal(logger.matching("unregistered from the operator").length, 1);
    const count = registry.heartbeats.length;
    await sleep(300);
    assert.equal(registry.heartbeats.length, count, "no heartbeat after Unregister");
  });

  it("unregisters first, then refuses new calls while the calls in flight finish", async () => {
    const plugin: Plugin = {
      async reconcile(request) {
        await sleep(Number(request.spec["sleepMs"] ?? 0));
        return Response.ok("slept");
      },
    };
    const server = new PluginServer(plugin, INFO, { socketDir: dir, heartbeatIntervalSeconds: 0.1, logger });
    servers.push(server); // stopped after the test, even when it fails
    await server.start();
    await registry.waitFor("heartbeats");
    const inFlight = dialer.open(server.socketPath).reconcile(reconcileRequest({ sleepMs: 1500 }), 10);
    let finished = false;
    void inFlight.then(() => (finished = true));
    await sleep(200);
    const stopping = server.stop();
    await registry.waitFor("unregisters", 1, 2000);
    assert.equal(finished, false, "Unregister comes first, while the call is still running");
    await sleep(200);
    await assert.rejects(
      dialer.open(server.socketPath).reconcile(reconcileRequest(), 2),
      (error: ServiceError) => error.code === GrpcStatus.UNAVAILABLE,
    );
    const response = await inFlight;
    assert.deepEqual([response.outcome, response.message], [proto.Outcome.OUTCOME_OK, "slept"]);
    await stopping;
    assert.equal(existsSync(server.socketPath), false);
  });

  it("cancels the calls still in flight after the grace period", async () => {
    const plugin: Plugin = {
      async reconcile() {
        await sleep(5000, undefined, { ref: false });
        return Response.ok("too late");
      },
    };
    const server = new PluginServer(plugin, INFO, { socketDir: dir, heartbeatIntervalSeconds: 60, logger });
    servers.push(server); // stopped after the test, even when it fails
    await server.start();
    const inFlight = dialer
      .open(server.socketPath)
      .reconcile(reconcileRequest(), 10)
      .then(
        () => undefined,
        (error: unknown) => error as ServiceError,
      );
    await sleep(200);
    const started = performance.now();
    await server.stop(0.3);
    assert.ok(performance.now() - started < 2000);
    const error = await inFlight;
    assert.ok(error, "the call must fail");
    assert.equal(error.code, GrpcStatus.CANCELLED);
    assert.equal(logger.matching("calls still in flight after the grace period").length, 1);
    assert.equal(existsSync(server.socketPath), false);
  });
});
