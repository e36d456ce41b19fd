// The TypeScript SDK's side of the polyglot benchmark
// (sidecar-sdk/benches/polyglot.rs, `make bench`): a plugin served by `run`,
// the SDK's normal path, on $KPLUG_SOCKET_DIR/plugins/echo/plugin.sock. It
// decodes the object and echoes its spec into the status, as the Rust and Go
// SDKs' bench plugins do. Nothing registers it (the benchmark runs no
// operator): its heartbeats fail and back off in the background, up to one
// attempt per heartbeat interval.
//
//     npm run build:test && KPLUG_SOCKET_DIR=/tmp/b node build/bench/sdk-echo.js

import { type Plugin, Response, run } from "../src/index.js";

const echo: Plugin = {
  async reconcile(request) {
    return Response.ok().withStatus({ echo: request.spec });
  },
};

run(echo, {
  name: "echo",
  version: "1.0.0",
  offers: [{ base: { group: "myorg.org", kind: "DatabaseTable" }, implementation: "Echo" }],
});
