// A mutator: adds a backup agent container to the pod template of every
// Deployment other plugins desire (the operator's admin allows it with
// `--mutators backup=apps/v1/Deployment`). README.md ("Mutate") shows this
// file from its first import; test/backup.test.ts runs it. Serve it with:
//     npm run build:test && KPLUG_SOCKET_DIR=/tmp/kplug node build/examples/backup.js
import { fileURLToPath } from "node:url";

import { type JsonObject, type JsonValue, Mutation, type Plugin, type PluginInfo, Response, run } from "../src/index.js";

export const AGENT = "example.com/backup-agent:1.4";

const asObject = (value: JsonValue | undefined): JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value : {};

export const backup = {
  // Never called: the plugin offers no kind.
  reconcile: () => Response.ok(),
  mutate(call) {
    const containers = asObject(asObject(call.spec["template"])["spec"])["containers"];
    if (Array.isArray(containers) && containers.some((c) => asObject(c)["name"] === "backup")) {
      return Mutation.none().warning(`${call.toString()} has a backup container already`);
    }
    // The base object the Deployment is for names the backups (there is none
    // for an embedding operator's own objects).
    const base = asObject(call.base?.["metadata"])["name"];
    const prefix = `${call.namespace}/${typeof base === "string" ? base : call.name}`;
    return Mutation.none()
      .add("/spec/template/spec/containers/-", { name: "backup", image: AGENT, args: ["--prefix", prefix] })
      .add("/metadata/annotations/backup.example.com~1agent", AGENT);
  },
} satisfies Plugin;

export const info: PluginInfo = {
  name: "backup",
  version: "1.0.0",
  offers: [],
  mutations: [{ apiVersion: "apps/v1", kind: "Deployment" }],
};

// Served when run as a program; a test imports it instead.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  run(backup, info);
}
