// The smallest plugin that shows every part of a plugin: greets every
// `Greeting` object by name (a status and an Event), with the punctuation its
// `GreetingHelloExtension` asks for (and tells that extension, in its status,
// which greeting used it), and says goodbye when the object is deleted
// (finalize).
//
// The kind is in examples/hello/crd.yaml; run this plugin next to an
// operator for it (docs/your-own-kind.md shows how to start one):
//     npm run build:test && KPLUG_SOCKET_DIR=/tmp/kplug node build/examples/hello.js
// (in your own project: `import { ... } from "@kplug/sidecar"`).

import { type JsonObject, type JsonValue, type Plugin, Response, run } from "../src/index.js";

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const hello: Plugin = {
  async reconcile(request) {
    const salutation = request.spec["salutation"];
    const extension = request.extension("GreetingHelloExtension");
    const settings = extension?.["spec"];
    const punctuation = isObject(settings) ? settings["punctuation"] : undefined;
    const greeting = `${typeof salutation === "string" ? salutation : "hello"}, ${request.name}${typeof punctuation === "string" ? punctuation : "!"}`;
    const response = Response.ok(`greeted ${request.name}`).withStatus({ greeting }).event("Greeted", greeting);
    return extension ? response.extensionStatus(extension, { lastUsedBy: request.name }) : response;
  },
  // Called before the object is deleted. Hello made nothing to clean up, so
  // it only says goodbye; ok lets the object go.
  async finalize(request) {
    return Response.ok().event("SaidGoodbye", `goodbye, ${request.name}`);
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
