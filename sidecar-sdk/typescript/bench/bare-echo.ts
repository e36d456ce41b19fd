// The baseline of the TypeScript SDK in the polyglot benchmark
// (sidecar-sdk/benches/polyglot.rs): the kplug.v1.Plugin service in bare
// @grpc/grpc-js, with the same generated messages, answering Reconcile with
// the object's bytes as the status. It serves on the Unix socket
// $KPLUG_BENCH_SOCKET until SIGTERM or SIGINT.
//
//     npm run build:test && KPLUG_BENCH_SOCKET=/tmp/bare.sock node build/bench/bare-echo.js

import { Server, ServerCredentials, status } from "@grpc/grpc-js";

import { proto } from "../src/index.js";

const socket = process.env["KPLUG_BENCH_SOCKET"];
if (!socket) {
  console.error("bare-echo: set KPLUG_BENCH_SOCKET to the Unix socket to serve on");
  process.exit(1);
}

const unimplemented = { code: status.UNIMPLEMENTED, details: "not part of the benchmark" };

const handlers: proto.PluginServer = {
  getInfo(_call, callback) {
    callback(unimplemented);
  },
  probe(_call, callback) {
    callback(null, { ready: true, message: "" });
  },
  reconcile(call, callback) {
    callback(null, {
      outcome: proto.Outcome.OUTCOME_OK,
      message: "",
      retryAfter: undefined,
      status: call.request.object,
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
    console.error(`bare-echo: cannot listen on ${socket}: ${error.message}`);
    process.exit(1);
  }
});
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    server.forceShutdown();
    process.exit(0);
  });
}
