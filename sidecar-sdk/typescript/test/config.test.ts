import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";

import { backoffDelay, channelOptions, type Plugin, PluginServer, Response, StartupError } from "./sdk.js";

const noop: Plugin = { reconcile: () => Response.ok() };
const INFO = {
  name: "postgresql",
  version: "1",
  offers: [{ base: { group: "x.org", kind: "Thing" }, implementation: "Impl" }],
};
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

const saved = { dir: process.env["KPLUG_SOCKET_DIR"], interval: process.env["KPLUG_HEARTBEAT_INTERVAL"] };
function setEnv(name: string, value: string | undefined): void {
  if (value === undefined) {
    Reflect.deleteProperty(process.env, name);
  } else {
    process.env[name] = value;
  }
}
afterEach(() => {
  setEnv("KPLUG_SOCKET_DIR", saved.dir);
  setEnv("KPLUG_HEARTBEAT_INTERVAL", saved.interval);
});

describe("configuration from the environment", () => {
  it("reads KPLUG_SOCKET_DIR and KPLUG_HEARTBEAT_INTERVAL", () => {
    setEnv("KPLUG_SOCKET_DIR", "/tmp/kplug-env");
    setEnv("KPLUG_HEARTBEAT_INTERVAL", "0.25");
    const server = new PluginServer(noop, INFO, { logger: quiet });
    assert.equal(server.socketPath, "/tmp/kplug-env/plugins/postgresql/plugin.sock");
    assert.equal(server.heartbeatIntervalSeconds, 0.25);
  });

  it("defaults to /var/run/kplug and 5 s", () => {
    setEnv("KPLUG_SOCKET_DIR", undefined);
    setEnv("KPLUG_HEARTBEAT_INTERVAL", undefined);
    const server = new PluginServer(noop, INFO, { logger: quiet });
    assert.equal(server.socketPath, "/var/run/kplug/plugins/postgresql/plugin.sock");
    assert.equal(server.heartbeatIntervalSeconds, 5);
  });

  it("prefers explicit options, and makes the socket dir absolute", () => {
    setEnv("KPLUG_SOCKET_DIR", "/tmp/ignored");
    setEnv("KPLUG_HEARTBEAT_INTERVAL", "soon");
    const server = new PluginServer(noop, INFO, { socketDir: "rel", heartbeatIntervalSeconds: 2, logger: quiet });
    assert.equal(server.socketPath, `${process.cwd()}/rel/plugins/postgresql/plugin.sock`);
    assert.equal(server.heartbeatIntervalSeconds, 2);
  });

  for (const value of ["1e-1", "5", "0.5", ".5", "+2"]) {
    it(`accepts KPLUG_HEARTBEAT_INTERVAL=${value}`, () => {
      setEnv("KPLUG_HEARTBEAT_INTERVAL", value);
      assert.equal(new PluginServer(noop, INFO, { logger: quiet }).heartbeatIntervalSeconds, Number(value));
    });
  }

  for (const value of ["soon", "0", "-1", "nan", "inf", "Infinity", " 5", "0x10", "1e400"]) {
    it(`refuses KPLUG_HEARTBEAT_INTERVAL=${JSON.stringify(value)}`, () => {
      setEnv("KPLUG_HEARTBEAT_INTERVAL", value);
      assert.throws(() => new PluginServer(noop, INFO, { logger: quiet }), (error: unknown) => {
        assert.ok(error instanceof StartupError);
        assert.match(error.message, /^plugin postgresql: invalid KPLUG_HEARTBEAT_INTERVAL=".*": the heartbeat interval is a positive number of seconds/);
        return true;
      });
    });
  }

  it("gives every instance a fresh UUIDv4", () => {
    const a = new PluginServer(noop, INFO, { socketDir: "/tmp/x", logger: quiet });
    const b = new PluginServer(noop, INFO, { socketDir: "/tmp/x", logger: quiet });
    assert.match(a.instanceId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.notEqual(a.instanceId, b.instanceId);
  });
});

describe("heartbeat backoff", () => {
  it("doubles from 100 ms up to the interval", () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, 1, 0)),
      [0.1, 0.2, 0.4, 0.8, 1, 1],
    );
  });

  it("shortens by up to 10 % at random, never lengthens", () => {
    assert.ok(Math.abs(backoffDelay(3, 5, 0.999999) - 0.36) < 1e-6);
    for (let i = 0; i < 1000; i++) {
      const delay = backoffDelay(2, 5, Math.random());
      assert.ok(delay > 0.18 && delay <= 0.2, String(delay));
    }
  });

  it("does not overflow after a long outage", () => {
    assert.equal(backoffDelay(1000, 5, 0), 5);
  });

  it("talks to the registry with a host-name :authority and its own reconnect backoff", () => {
    const options = channelOptions(5);
    assert.equal(options["grpc.default_authority"], "localhost");
    assert.equal(options["grpc.use_local_subchannel_pool"], 1);
    assert.equal(options["grpc.max_reconnect_backoff_ms"], 5000);
  });
});
