// The smallest useful plugin: greets every `Greeting` object by name, with
// the punctuation its `GreetingHelloExtension` asks for.
//
// The kind is in examples/hello/crd.yaml; docs/your-own-kind.md runs this
// plugin next to the operator:
//     npm run build:test && KPLUG_SOCKET_DIR=/tmp/kplug node build/examples/hello.js
// (in your own project: `import { ... } from "@kplug/sidecar"`).

import { type JsonObject, type JsonValue, type Plugin, Response, run } from "../src/index.js";

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const hello: Plugin = {
  async reconcile(request) {
    const salutation = request.spec["salutation"];
    const settings = request.extension("GreetingHelloExtension")?.["spec"];
    const punctuation = isObject(settings) ? settings["punctuation"] : undefined;
    const greeting = `${typeof salutation === "string" ? salutation : "hello"}, ${request.name}${typeof punctuation === "string" ? punctuation : "!"}`;
    return Response.ok(`greeted ${request.name}`).withStatus({ greeting });
  },
};

run(hello, {
  name: "hello",
  version: "0.1.0",
  description: "greets Greeting objects",
  offers: [
    {
      base: { group: "example.com", kind: "Greeting" },
      implementation: "Hello",
      extensions: [{ group: "example.com", kind: "GreetingHelloExtension" }],
    },
  ],
});
