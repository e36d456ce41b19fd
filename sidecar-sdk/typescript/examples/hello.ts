// The smallest useful plugin: greets every `Greeting` object by name.
//
// Run it next to an operator managing example.com/v1/Greeting:
//     npm run build:test && KPLUG_SOCKET_DIR=/tmp/kplug node build/examples/hello.js
// (in your own project: `import { ... } from "@kplug/sidecar"`).

import { type Plugin, Response, run } from "../src/index.js";

const hello: Plugin = {
  async reconcile(request) {
    const salutation = request.spec["salutation"];
    const greeting = `${typeof salutation === "string" ? salutation : "hello"}, ${request.name}!`;
    return Response.ok(`greeted ${request.name}`).withStatus({ greeting });
  },
};

run(hello, {
  name: "hello",
  version: "0.1.0",
  description: "greets Greeting objects",
  offers: [{ base: { group: "example.com", kind: "Greeting" }, implementation: "Hello" }],
});
