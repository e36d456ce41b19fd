// SIGTERM on a real plugin process: Unregister, drain the calls in flight,
// clean up, exit 0.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";

import {
  type Child,
  Dialer,
  exitCode,
  FakeRegistry,
  killChild,
  removeDir,
  startNode,
  tempSocketDir,
} from "./helpers.js";
import { proto } from "./sdk.js";

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "slow-plugin.js");

function nap(seconds: number): proto.ReconcileRequest {
  const object = {
    apiVersion: "test.kplug.dev/v1",
    kind: "Nap",
    metadata: { name: "n", namespace: "default" },
    spec: { sleepSeconds: seconds },
  };
  return { implementation: "Slow", object: Buffer.from(JSON.stringify(object)), extensions: [], children: [] };
}

let dir: string;
let registry: FakeRegistry;
let dialer: Dialer;
let child: Child | undefined;

beforeEach(async () => {
  dir = await tempSocketDir();
  registry = await new FakeRegistry(dir).start();
  dialer = new Dialer();
});

afterEach(async () => {
  if (child) {
    await killChild(child);
    child = undefined;
  }
  dialer.close();
  registry.stop();
  await removeDir(dir);
});

function startPlugin(): Child {
  child = startNode(SCRIPT, { KPLUG_SOCKET_DIR: dir, KPLUG_HEARTBEAT_INTERVAL: "0.2" });
  return child;
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  it(`${signal} unregisters, drains the calls in flight and exits 0`, async () => {
    const plugin = startPlugin();
    await registry.waitFor("heartbeats", 1, 10000);
    const socketPath = join(dir, "plugins", "slow", "plugin.sock");
    const inFlight = dialer.open(socketPath).reconcile(nap(2), 10);
    let finished = false;
    void inFlight.then(() => (finished = true));
    await sleep(300); // the call is running in the plugin
    assert.equal(finished, false);
    const signalledAt = performance.now();
    plugin.process.kill(signal);

    await registry.waitFor("unregisters", 1, 3000);
    const { at, request: unregister } = registry.unregisters[0]!;
    assert.equal(unregister.name, "slow");
    assert.equal(unregister.instanceId, registry.heartbeats[0]?.request.instanceId);
    assert.ok(at - signalledAt < 1500, `Unregister came ${at - signalledAt} ms after ${signal}`);
    assert.equal(finished, false, "Unregister comes first, while the call is still running");

    // New calls are turned away while the old one drains.
    await sleep(200);
    await assert.rejects(
      dialer.open(socketPath).reconcile(nap(0), 2),
      (error: ServiceError) => error.code === GrpcStatus.UNAVAILABLE,
    );

    const response = await inFlight;
    assert.deepEqual([response.outcome, response.message], [proto.Outcome.OUTCOME_OK, "slept"]);

    assert.equal(await exitCode(plugin), 0, plugin.stderr());
    assert.equal(existsSync(socketPath), false);
    const log = plugin.stderr();
    assert.ok(log.includes(`${signal} received; shutting down`), log);
    assert.ok(log.includes("unregistered from the operator"), log);
    assert.ok(!log.includes("    at "), `no stack trace in the log:\n${log}`);
    const heartbeats = registry.heartbeats.length;
    await sleep(400);
    assert.equal(registry.heartbeats.length, heartbeats, `heartbeats stop at ${signal}`);
  });
}

it("a second SIGTERM stops at once, with status 1", async () => {
  const plugin = startPlugin();
  await registry.waitFor("heartbeats", 1, 10000);
  const socketPath = join(dir, "plugins", "slow", "plugin.sock");
  const inFlight = dialer
    .open(socketPath)
    .reconcile(nap(30), 40)
    .then(
      () => undefined,
      (error: unknown) => error as ServiceError,
    );
  await sleep(300);
  plugin.process.kill("SIGTERM");
  await registry.waitFor("unregisters", 1, 3000);
  plugin.process.kill("SIGTERM");
  assert.equal(await exitCode(plugin, 5000), 1, plugin.stderr());
  assert.equal(existsSync(socketPath), false);
  assert.ok((await inFlight) !== undefined, "the call in flight fails");
  assert.ok(plugin.stderr().includes("SIGTERM received again; stopping now"));
});

it("a start-up error exits 1 with a one-line message", async () => {
  await mkdir(join(dir, "plugins", "slow"), { recursive: true });
  await writeFile(join(dir, "plugins", "slow", "plugin.sock"), "not a socket");
  const plugin = startPlugin();
  assert.equal(await exitCode(plugin), 1);
  const log = plugin.stderr();
  assert.ok(log.includes(`plugin slow: ${dir}/plugins/slow/plugin.sock exists and is not a socket`), log);
  assert.ok(!log.includes("    at "), `no stack trace:\n${log}`);
  assert.equal(registry.heartbeats.length, 0);
});
