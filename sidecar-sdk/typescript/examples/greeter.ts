// A plugin with children: keeps a ConfigMap holding the greeting next to
// every `Greeting` object, and says in the Greeting's status whether the
// operator has made it yet. README.md ("Children") shows this file from its
// first import; test/greeter.test.ts runs it. Serve it with:
//     npm run build:test && KPLUG_SOCKET_DIR=/tmp/kplug node build/examples/greeter.js
// (the operator applies ConfigMaps only with `--child-kinds v1/ConfigMap`).

import { fileURLToPath } from "node:url";

import { type Plugin, type PluginInfo, Response, run } from "../src/index.js";

export const greeter: Plugin = {
  async reconcile(request) {
    const name = `${request.name}-greeting`;
    const response = Response.ok().child({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name },
      data: { greeting: `hello, ${request.name}` },
    });
    // The children as the operator last saw them, with their status.
    const phase = request.child("ConfigMap", name) === undefined ? "Creating" : "Ready";
    return response.withStatus({ phase });
  },
};

export const info: PluginInfo = {
  name: "greeter",
  version: "1.0.0",
  offers: [
    {
      base: { group: "example.com", kind: "Greeting" },
      implementation: "Greeter",
      children: [{ apiVersion: "v1", kind: "ConfigMap" }],
    },
  ],
};

// Served when run as a program; a test imports it instead.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  run(greeter, info);
}
