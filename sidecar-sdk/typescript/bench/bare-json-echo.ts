// The second baseline of the TypeScript SDK in the polyglot benchmark
// (sidecar-sdk/benches/polyglot.rs): the kplug.v1.Plugin service in bare
// @grpc/grpc-js with the same generated messages and JavaScript's own JSON,
// what a plugin author would write without the SDK. Reconcile decodes the
// object with JSON.parse and answers the status {"echo": spec}, encoded with
// JSON.stringify, as the SDK's echo plugin does. It serves on the Unix socket
// $KPLUG_BENCH_SOCKET until SIGTERM or SIGINT.
//
//     npm run build:test && KPLUG_BENCH_SOCKET=/tmp/bare.sock node build/bench/bare-json-echo.js

import { Server, ServerCredentials, status } from "@grpc/grpc-js";

import { proto } from "../src/index.js";

const socket = process.env["KPLUG_BENCH_SOCKET"];
if (!socket) {
  console.error("bare-json-echo: set KPLUG_BENCH_SOCKET to the Unix socket to serve on");
  process.exit(1);
}

const unimplemented = { code: status.UNIMPLEMENTED, details: "not part of the benchmark" };

const handlers: proto.PluginServer = {
  getInfo(_call, callback) {
    callback(null, proto.GetInfoResponse.fromPartial({}));
  },
  probe(_call, callback) {
    callback(null, { ready: true, message: "" });
  },
  reconcile(call, callback) {
    let object: { spec?: unknown };
    try {
      object = JSON.parse(call.request.object.toString("utf8")) as { spec?: unknown };
    } catch (error) {
      callback({ code: status.INVALID_ARGUMENT, details: `the object is not JSON: ${String(error)}` });
      return;
    }
    callback(null, {
      outcome: proto.Outcome.OUTCOME_OK,
      message: "",
      retryAfter: undefined,
      status: Buffer.from(JSON.stringify({ echo: object.spec })),
      extensionStatuses: [],
      conditions: [],
      events: [],
      children: undefined,
    });
  },
  finalize(_call, callback) {
    callback(unimplemented);
  },
  validate(_call, callback) {
    callback(unimplemented);
  },
  default(_call, callback) {
    callback(unimplemented);
  },
  hook(_call, callback) {
    callback(unimplemented);
  },
  mutate(_call, callback) {
    callback(unimplemented);
  },
};

const server = new Server();
server.addService(proto.PluginService, handlers);
server.bindAsync(`unix:${socket}`, ServerCredentials.createInsecure(), (error) => {
  if (error) {
    console.error(`bare-json-echo: cannot listen on ${socket}: ${error.message}`);
    process.exit(1);
  }
});
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    server.forceShutdown();
    process.exit(0);
  });
}
