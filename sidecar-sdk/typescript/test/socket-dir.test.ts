// The socket dir, as a new user meets it: a plugin started before its
// operator (or beside the wrong directory) says once, at warn level, where it
// looks for the registry and where that came from; a socket dir that does not
// exist is a start-up error, and is never created; a plugin that stops
// cleanly leaves no socket and no empty directory behind.

import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { CapturingLogger, FakeRegistry, removeDir, tempSocketDir } from "./helpers.js";
import {
  type Plugin,
  type PluginInfo,
  PluginServer,
  registryWaitingMessage,
  Response,
  SOCKET_DIR_ENV,
  socketDirMissingMessage,
  StartupError,
} from "./sdk.js";

const INFO: PluginInfo = {
  name: "quiet",
  version: "1.0.0",
  offers: [{ base: { group: "example.com", kind: "Greeting" }, implementation: "Quiet" }],
};
const quiet: Plugin = { reconcile: () => Response.ok() };

let dir: string;
let logger: CapturingLogger;
const saved = process.env[SOCKET_DIR_ENV];

beforeEach(async () => {
  dir = await tempSocketDir();
  logger = new CapturingLogger();
});

afterEach(async () => {
  if (saved === undefined) {
    Reflect.deleteProperty(process.env, SOCKET_DIR_ENV);
  } else {
    process.env[SOCKET_DIR_ENV] = saved;
  }
  await removeDir(dir);
});

describe("the socket dir", () => {
  for (const origin of ["environment", "program"] as const) {
    it(`without a registry, a warning once naming where it looks (${origin}), then retries at debug`, async () => {
      let server: PluginServer;
      if (origin === "environment") {
        process.env[SOCKET_DIR_ENV] = dir;
        server = new PluginServer(quiet, INFO, { heartbeatIntervalSeconds: 0.2, logger });
      } else {
        Reflect.deleteProperty(process.env, SOCKET_DIR_ENV);
        server = new PluginServer(quiet, INFO, { socketDir: dir, heartbeatIntervalSeconds: 0.2, logger });
      }
      await server.start();
      await sleep(1200); // retries after 0.1, 0.2, 0.2... s
      await server.stop(0);

      const want = registryWaitingMessage(dir, origin);
      const warned = logger.matching(want);
      assert.equal(warned.length, 1, JSON.stringify(logger.lines, null, 1));
      assert.equal(warned[0]?.level, "warn");
      assert.ok(want.includes(join(dir, "registry.sock")), want);
      assert.ok(
        want.includes(origin === "environment" ? "(from KPLUG_SOCKET_DIR)" : "set by the program"),
        want,
      );
      const retries = logger.matching("heartbeat failed");
      assert.ok(retries.length >= 3, JSON.stringify(logger.lines, null, 1));
      assert.ok(retries.every((line) => line.level === "debug"));
      assert.deepEqual(
        logger.lines.filter((line) => line.level === "info" && line.message.includes("registry")),
        [],
      );
    });
  }

  it("a registry that goes away after answering is 'lost', not missing", async () => {
    const registry = await new FakeRegistry(dir).start();
    const server = new PluginServer(quiet, INFO, { socketDir: dir, heartbeatIntervalSeconds: 0.1, logger });
    await server.start();
    await registry.waitFor("heartbeats");
    registry.stop();
    await sleep(500);
    await server.stop(0);
    assert.deepEqual(logger.matching("no operator registry"), []);
    const lost = logger.matching("lost the operator");
    assert.equal(lost.length, 1);
    assert.equal(lost[0]?.level, "warn");
  });

  it("a missing socket dir is a start-up error, and is not created", async () => {
    const missing = join(dir, "sockets");
    process.env[SOCKET_DIR_ENV] = missing;
    const want = `plugin quiet: ${socketDirMissingMessage(missing, "environment")}`;
    await assert.rejects(
      new PluginServer(quiet, INFO, { heartbeatIntervalSeconds: 60, logger }).start(),
      (error: unknown) => error instanceof StartupError && error.message === want,
    );
    await assert.rejects(
      new PluginServer(quiet, INFO, { socketDir: missing, heartbeatIntervalSeconds: 60, logger }).start(),
      (error: unknown) => error instanceof StartupError && error.message.includes("(set by the program;"),
    );
    assert.equal(existsSync(missing), false, "neither the socket dir nor plugins/ is made");

    // plugins/ in an existing socket dir is the plugin's to create.
    const server = new PluginServer(quiet, INFO, { socketDir: dir, heartbeatIntervalSeconds: 60, logger });
    await server.start();
    await server.stop(0);
    assert.ok(statSync(join(dir, "plugins")).isDirectory());
  });

  it("a clean stop removes the socket and the emptied plugin directory", async () => {
    const own = join(dir, "plugins", "quiet");
    let server = new PluginServer(quiet, INFO, { socketDir: dir, heartbeatIntervalSeconds: 60, logger });
    await server.start();
    await server.stop(0);
    assert.equal(existsSync(own), false);
    assert.ok(statSync(join(dir, "plugins")).isDirectory(), "plugins/ is shared: it stays");

    // A directory that holds anything else stays, with what it holds.
    server = new PluginServer(quiet, INFO, { socketDir: dir, heartbeatIntervalSeconds: 60, logger });
    await server.start();
    writeFileSync(join(own, "notes"), "kept");
    await server.stop(0);
    assert.equal(readFileSync(join(own, "notes"), "utf8"), "kept");
    assert.equal(existsSync(server.socketPath), false);
  });
});
