// A microbenchmark of what a Reconcile call costs in this process, without
// the socket: the request's protobuf decoding, the handler, the response's
// protobuf encoding, as @grpc/grpc-js runs them for each call. Three
// handlers, measured in CPU time per call, in alternating rounds of one run
// so that machine noise hits each alike:
//
// - bare: the baseline of the polyglot benchmark (bench/bare-echo.ts), the
//   object's bytes as the status;
// - json: a hand-written handler that decodes the object with JSON.parse and
//   answers `{"echo": spec}` with JSON.stringify, the least a plugin that
//   reads the object must do;
// - sdk: the SDK's Reconcile handler serving the echo plugin of
//   bench/sdk-echo.ts.
//
// With $KPLUG_BENCH_BASELINE_SDK set to the directory of another build's
// compiled SDK, its handler is measured too, as `sdk-base`: before and
// after in one run. E.g. copy another checkout's build/src to /tmp/base/src,
// with this package.json (for "type": "module") and a symlink to
// node_modules in /tmp/base, and set it to /tmp/base/src.
//
//     npm run build:test && node build/bench/reconcile-path.js
//
// Settings: KPLUG_BENCH_SIZES (default 64,8192), KPLUG_BENCH_CALLS per
// round (default 20000), KPLUG_BENCH_ROUNDS (default 10),
// KPLUG_BENCH_HANDLERS (default all: bare,json,sdk[,sdk-base]).

import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { Metadata, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";

import { type Logger, type Plugin, proto, Response } from "../src/index.js";
import type { PluginInfo } from "../src/info.js";
import { pluginHandlers } from "../src/service.js";

type Handler = (
  call: ServerUnaryCall<proto.ReconcileRequest, proto.ReconcileResponse>,
  callback: sendUnaryData<proto.ReconcileResponse>,
) => void;

/** The echo plugin of bench/sdk-echo.ts, on the SDK whose `Response` is `response`. */
function echoOn(response: typeof Response): Plugin {
  return {
    async reconcile(request) {
      return response.ok().withStatus({ echo: request.spec });
    },
  };
}
const info: PluginInfo = {
  name: "echo",
  version: "1.0.0",
  offers: [{ base: { group: "myorg.org", kind: "DatabaseTable" }, implementation: "Echo" }],
};
const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** An OK answer with `status`, as bench/bare-echo.ts makes it. */
function reply(status: Buffer): proto.ReconcileResponse {
  return {
    outcome: proto.Outcome.OUTCOME_OK,
    message: "",
    retryAfter: undefined,
    status,
    extensionStatuses: [],
    conditions: [],
    events: [],
    children: undefined,
  };
}

const bare: Handler = (call, callback) => {
  callback(null, reply(call.request.object));
};

const utf8 = new TextDecoder("utf-8", { fatal: true });
const json: Handler = (call, callback) => {
  const object = JSON.parse(utf8.decode(call.request.object)) as { spec?: unknown };
  const status = Buffer.from(JSON.stringify({ echo: object.spec }), "utf8");
  callback(null, reply(status));
};

/** The object of sidecar-sdk/benches/echo/mod.rs: a DatabaseTable whose JSON is about `size` bytes. */
function object(size: number): Buffer {
  const obj = {
    apiVersion: "myorg.org/v1alpha1",
    kind: "DatabaseTable",
    metadata: { name: "users", namespace: "default" },
    spec: { pad: "" },
  };
  const base = Buffer.byteLength(JSON.stringify(obj));
  obj.spec.pad = "x".repeat(Math.max(0, size - base));
  return Buffer.from(JSON.stringify(obj));
}

const method = proto.PluginService.reconcile;
const metadata = new Metadata();

/** One call as grpc-js makes it: decode the request, run the handler, encode its answer. */
function once(handler: Handler, wire: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const request = method.requestDeserialize(wire);
    const call = { request, metadata } as unknown as ServerUnaryCall<proto.ReconcileRequest, proto.ReconcileResponse>;
    handler(call, (error, response) => {
      if (error || !response) {
        reject(new Error(`the handler failed: ${error?.details ?? "no response"}`));
        return;
      }
      resolve(method.responseSerialize(response));
    });
  });
}

/**
 * Nanoseconds of CPU time (user and system, all of the process's threads,
 * the garbage collector's too) per call: on a busy machine the time this
 * process was not running is not the handler's.
 */
async function round(handler: Handler, wire: Buffer, calls: number): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    await once(handler, wire);
  }
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / calls;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function main(): Promise<void> {
  const sizes = (process.env["KPLUG_BENCH_SIZES"] ?? "64,8192").split(",").map(Number);
  const calls = Number(process.env["KPLUG_BENCH_CALLS"] ?? 20000);
  const rounds = Number(process.env["KPLUG_BENCH_ROUNDS"] ?? 10);
  const handlers: [string, Handler][] = [
    ["bare", bare],
    ["json", json],
    ["sdk", pluginHandlers(echoOn(Response), info, quiet).reconcile],
  ];
  const baseline = process.env["KPLUG_BENCH_BASELINE_SDK"];
  if (baseline) {
    const load = async (module: string): Promise<unknown> => import(pathToFileURL(join(baseline, module)).href);
    const service = (await load("service.js")) as { pluginHandlers: typeof pluginHandlers };
    const sdk = (await load("index.js")) as { Response: typeof Response };
    handlers.push(["sdk-base", service.pluginHandlers(echoOn(sdk.Response), info, quiet).reconcile]);
  }
  // KPLUG_BENCH_HANDLERS picks some (e.g. `sdk` alone, under --cpu-prof).
  const only = process.env["KPLUG_BENCH_HANDLERS"]?.split(",");
  if (only) {
    handlers.splice(0, handlers.length, ...handlers.filter(([name]) => only.includes(name)));
  }
  for (const size of sizes) {
    const wire = Buffer.from(
      method.requestSerialize({ implementation: "Echo", object: object(size), extensions: [], children: [] }),
    );
    // Every handler answers what the polyglot benchmark checks, then warms up.
    const sent = JSON.parse(object(size).toString()) as { spec: unknown };
    for (const [name, handler] of handlers) {
      const status = Buffer.from(proto.ReconcileResponse.decode(await once(handler, wire)).status).toString();
      const expected = JSON.stringify(name === "bare" ? sent : { echo: sent.spec });
      if (status !== expected) {
        throw new Error(`${name} answered the status ${status.slice(0, 200)}`);
      }
      await round(handler, wire, calls);
    }
    const times = new Map<string, number[]>(handlers.map(([name]) => [name, []]));
    for (let r = 0; r < rounds; r++) {
      for (const [name, handler] of handlers) {
        times.get(name)?.push(await round(handler, wire, calls));
      }
    }
    // Ratios to bare, or to the first handler measured when bare is not.
    const reference = times.has("bare") ? "bare" : (handlers[0]?.[0] ?? "");
    const referenceNs = median(times.get(reference) ?? []);
    console.log(`object of ${size} B (${wire.length} B request), median of ${rounds} rounds of ${calls} calls:`);
    for (const [name, values] of times) {
      const ns = median(values);
      console.log(`  ${name.padEnd(9)} ${(ns / 1000).toFixed(2).padStart(7)} µs CPU/call  ${(ns / referenceNs).toFixed(2)}× ${reference}`);
    }
  }
}

await main();
