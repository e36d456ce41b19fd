// The TypeScript SDK against the protocol's rules in
// sidecar-sdk/conformance/rules.json: the file the Rust, Python and Go SDKs
// check themselves against too, and which kplug-proto's own test keeps equal
// to the Rust code. One test per rule.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import {
  BACKOFF_FACTOR,
  BACKOFF_INITIAL_SECONDS,
  BACKOFF_JITTER,
  backoffDelay,
  DEFAULT_HEARTBEAT_INTERVAL_SECONDS,
  DEFAULT_SOCKET_DIR,
  HEARTBEAT_INTERVAL_ENV,
  HEARTBEAT_TIMEOUT_SECONDS,
  InvalidNameError,
  InvalidResponseError,
  MAX_MESSAGE_BYTES,
  MAX_NAME_LENGTH,
  type Plugin,
  PluginServer,
  registryWaitingMessage,
  RESERVED_CONDITION_TYPES,
  RESERVED_STATUS_KEYS,
  Response,
  SOCKET_DIR_ENV,
  type SocketDirOrigin,
  socketDirMissingMessage,
  StartupError,
  validateName,
} from "./sdk.js";

// build/test/rules.test.js → sidecar-sdk/conformance/rules.json
const RULES_FILE = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "conformance", "rules.json");

interface Rules {
  plugin_name: { max_length: number; valid: string[]; invalid: { name: string; why: string }[] };
  reserved_status_keys: { reserved: string[]; allowed: string[] };
  reserved_condition_types: { reserved: string[]; allowed: string[] };
  message_limit: { max_plugin_message_bytes: number };
  environment: {
    socket_dir: { variable: string; default: string };
    heartbeat_interval: {
      variable: string;
      default_seconds: number;
      valid: { text: string; seconds: number }[];
      invalid: string[];
    };
  };
  heartbeat_backoff: {
    initial_seconds: number;
    factor: number;
    jitter: number;
    default_cap_seconds: number;
    call_deadline_seconds: number;
    tolerance_seconds: number;
    samples: { attempt: number; cap_seconds: number; unit: number; delay_seconds: number }[];
  };
  socket_dir: {
    samples: { origin: SocketDirOrigin; socket_dir: string; waiting: string; missing: string }[];
  };
}

const { rules } = JSON.parse(readFileSync(RULES_FILE, "utf8")) as { rules: Rules };

const noop: Plugin = { reconcile: () => Response.ok() };
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const info = (name: string) => ({
  name,
  version: "1.0.0",
  offers: [{ base: { group: "example.com", kind: "Greeting" }, implementation: "Echo" }],
});
const EXTENSION = {
  apiVersion: "example.com/v1",
  kind: "GreetingExtension",
  metadata: { name: "e", namespace: "default" },
};

const saved = { dir: process.env[SOCKET_DIR_ENV], interval: process.env[HEARTBEAT_INTERVAL_ENV] };
function setEnv(name: string, value: string | undefined): void {
  if (value === undefined) {
    Reflect.deleteProperty(process.env, name);
  } else {
    process.env[name] = value;
  }
}
afterEach(() => {
  setEnv(SOCKET_DIR_ENV, saved.dir);
  setEnv(HEARTBEAT_INTERVAL_ENV, saved.interval);
});

const checks: { [K in keyof Rules]: (rule: Rules[K]) => void } = {
  plugin_name(rule) {
    assert.equal(MAX_NAME_LENGTH, rule.max_length);
    for (const name of rule.valid) {
      validateName(name);
      new PluginServer(noop, info(name), { socketDir: "/tmp/unused", logger: quiet });
    }
    for (const { name, why } of rule.invalid) {
      assert.throws(
        () => new PluginServer(noop, info(name), { socketDir: "/tmp/unused", logger: quiet }),
        (error: unknown) => error instanceof InvalidNameError && error.message.includes("must be a DNS label"),
        `${JSON.stringify(name)} (${why}) must be refused`,
      );
    }
  },

  reserved_status_keys(rule) {
    assert.deepEqual([...RESERVED_STATUS_KEYS], rule.reserved);
    const reserved = (key: string) => (error: unknown) =>
      error instanceof InvalidResponseError && error.message.includes(`key "${key}" is reserved for the operator`);
    for (const key of rule.reserved) {
      assert.throws(() => Response.ok().withStatus({ [key]: 1 }), reserved(key));
      assert.throws(() => Response.ok().extensionStatus(EXTENSION, { [key]: 1 }), reserved(key));
    }
    for (const key of rule.allowed) {
      const response = Response.ok().withStatus({ [key]: 1 }).extensionStatus(EXTENSION, { [key]: 1 });
      assert.deepEqual(response.status, { [key]: 1 });
    }
  },

  reserved_condition_types(rule) {
    assert.deepEqual([...RESERVED_CONDITION_TYPES], rule.reserved);
    for (const type of rule.reserved) {
      assert.throws(
        () => Response.ok().condition(type, true, "Done"),
        (error: unknown) =>
          error instanceof InvalidResponseError &&
          error.message.includes(`condition type "${type}" is reserved for the operator`),
      );
    }
    for (const type of rule.allowed) {
      assert.equal(Response.ok().condition(type, true, "Done").conditions[0]?.type, type);
    }
  },

  message_limit(rule) {
    // The server passes it to grpc-js as its receive limit.
    assert.equal(MAX_MESSAGE_BYTES, rule.max_plugin_message_bytes);
  },

  environment(rule) {
    const { socket_dir: dir, heartbeat_interval: interval } = rule;
    assert.deepEqual([SOCKET_DIR_ENV, DEFAULT_SOCKET_DIR], [dir.variable, dir.default]);
    assert.deepEqual(
      [HEARTBEAT_INTERVAL_ENV, DEFAULT_HEARTBEAT_INTERVAL_SECONDS],
      [interval.variable, interval.default_seconds],
    );
    const server = () => new PluginServer(noop, info("rules"), { logger: quiet });
    for (const value of [undefined, ""]) {
      setEnv(dir.variable, value);
      setEnv(interval.variable, value);
      assert.equal(server().socketDir, dir.default);
      assert.equal(server().heartbeatIntervalSeconds, interval.default_seconds);
    }
    setEnv(dir.variable, "/tmp/k");
    assert.equal(server().socketPath, "/tmp/k/plugins/rules/plugin.sock");
    for (const { text, seconds } of interval.valid) {
      setEnv(interval.variable, text);
      assert.ok(Math.abs(server().heartbeatIntervalSeconds - seconds) < 1e-9, text);
    }
    for (const text of interval.invalid) {
      setEnv(interval.variable, text);
      assert.throws(
        server,
        (error: unknown) => error instanceof StartupError && error.message.includes(`invalid ${interval.variable}=`),
        `${JSON.stringify(text)} must be refused`,
      );
    }
  },

  heartbeat_backoff(rule) {
    assert.deepEqual(
      [BACKOFF_INITIAL_SECONDS, BACKOFF_FACTOR, BACKOFF_JITTER],
      [rule.initial_seconds, rule.factor, rule.jitter],
    );
    assert.equal(DEFAULT_HEARTBEAT_INTERVAL_SECONDS, rule.default_cap_seconds);
    assert.equal(HEARTBEAT_TIMEOUT_SECONDS, rule.call_deadline_seconds);
    for (const sample of rule.samples) {
      const delay = backoffDelay(sample.attempt, sample.cap_seconds, sample.unit);
      assert.ok(
        Math.abs(delay - sample.delay_seconds) <= rule.tolerance_seconds,
        `${JSON.stringify(sample)}: got ${String(delay)}`,
      );
    }
  },

  socket_dir(rule) {
    assert.deepEqual(
      rule.samples.map((sample) => sample.origin),
      ["default", "environment", "program"],
    );
    for (const sample of rule.samples) {
      assert.equal(registryWaitingMessage(sample.socket_dir, sample.origin), sample.waiting);
      assert.equal(socketDirMissingMessage(sample.socket_dir, sample.origin), sample.missing);
    }
    // Where the server says its socket dir came from.
    const origin = (socketDir?: string) =>
      new PluginServer(noop, info("rules"), { logger: quiet, ...(socketDir ? { socketDir } : {}) }).socketDirOrigin;
    for (const value of [undefined, ""]) {
      setEnv(SOCKET_DIR_ENV, value);
      assert.equal(origin(), "default");
    }
    setEnv(SOCKET_DIR_ENV, "/tmp/k");
    assert.equal(origin(), "environment");
    assert.equal(origin("/tmp/j"), "program");
  },
};

describe("the protocol's rules (conformance/rules.json)", () => {
  it("every rule in the file is checked here", () => {
    assert.deepEqual(Object.keys(rules).sort(), Object.keys(checks).sort());
  });

  for (const name of Object.keys(checks) as (keyof Rules)[]) {
    it(name, () => {
      (checks[name] as (rule: Rules[typeof name]) => void)(rules[name]);
    });
  }
});
