// The hello example, run as the plugin process a user would run.

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { after, before, it } from "node:test";
import { fileURLToPath } from "node:url";

import { type Child, Dialer, exitCode, FakeRegistry, killChild, removeDir, startNode, tempSocketDir } from "./helpers.js";
import { proto } from "./sdk.js";

const HELLO = join(dirname(fileURLToPath(import.meta.url)), "..", "examples", "hello.js");

let dir: string;
let registry: FakeRegistry;
let plugin: Child;
const dialer = new Dialer();

before(async () => {
  dir = await tempSocketDir();
  registry = await new FakeRegistry(dir).start();
  plugin = startNode(HELLO, { KPLUG_SOCKET_DIR: dir });
  await registry.waitFor("heartbeats", 1, 10000);
});

after(async () => {
  dialer.close();
  await killChild(plugin);
  registry.stop();
  await removeDir(dir);
});

it("registers, greets, and stops on SIGTERM", async () => {
  const handshake = registry.handshakes.get(registry.heartbeats[0]!.request.instanceId);
  assert.equal(handshake?.error, undefined);
  assert.equal(handshake?.info?.name, "hello");
  assert.equal(handshake.probe?.ready, true);

  const stub = dialer.open(join(dir, "plugins", "hello", "plugin.sock"));
  const greet = async (spec: object, extensions: object[] = []) => {
    const object = { apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "world", namespace: "default" }, spec };
    const response = await stub.reconcile({
      implementation: "Hello",
      object: Buffer.from(JSON.stringify(object)),
      extensions: extensions.map((e) => Buffer.from(JSON.stringify(e))),
      children: [],
    });
    assert.equal(response.outcome, proto.Outcome.OUTCOME_OK);
    assert.equal(response.message, "greeted world");
    const status = JSON.parse(Buffer.from(response.status).toString()) as { greeting: string };
    assert.deepEqual(
      response.events.map((e) => [e.type, e.reason, e.message]),
      [[proto.EventType.EVENT_TYPE_NORMAL, "Greeted", status.greeting]],
    );
    const extensionStatuses = response.extensionStatuses.map((s) => [s.target?.kind, s.target?.name, JSON.parse(Buffer.from(s.status).toString()) as unknown]);
    return { status, extensionStatuses };
  };
  assert.deepEqual(await greet({}), { status: { greeting: "hello, world!" }, extensionStatuses: [] });
  assert.deepEqual(await greet({ salutation: "bonjour" }), { status: { greeting: "bonjour, world!" }, extensionStatuses: [] });
  const settings = { apiVersion: "example.com/v1", kind: "GreetingHelloExtension", metadata: { name: "world", namespace: "default" }, spec: { punctuation: "?" } };
  // The extension is told which greeting used its settings.
  assert.deepEqual(await greet({ salutation: "hi" }, [settings]), {
    status: { greeting: "hi, world?" },
    extensionStatuses: [["GreetingHelloExtension", "world", { lastUsedBy: "world" }]],
  });

  assert.ok(handshake.info.capabilities.includes(proto.Capability.CAPABILITY_FINALIZE), "finalize advertises FINALIZE");
  const bye = await stub.finalize({
    implementation: "Hello",
    object: Buffer.from(JSON.stringify({ apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "world", namespace: "default" }, spec: {} })),
    extensions: [],
    children: [],
  });
  assert.equal(bye.outcome, proto.Outcome.OUTCOME_OK);
  assert.deepEqual(bye.events.map((e) => [e.reason, e.message]), [["SaidGoodbye", "goodbye, world"]]);

  plugin.process.kill("SIGTERM");
  assert.equal(await exitCode(plugin), 0, plugin.stderr());
  assert.equal(registry.unregisters.length, 1);
});
