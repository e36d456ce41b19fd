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
    });
    assert.equal(response.outcome, proto.Outcome.OUTCOME_OK);
    assert.equal(response.message, "greeted world");
    return JSON.parse(Buffer.from(response.status).toString()) as unknown;
  };
  assert.deepEqual(await greet({}), { greeting: "hello, world!" });
  assert.deepEqual(await greet({ salutation: "bonjour" }), { greeting: "bonjour, world!" });
  const settings = { apiVersion: "example.com/v1", kind: "GreetingHelloExtension", metadata: { name: "world", namespace: "default" }, spec: { punctuation: "?" } };
  assert.deepEqual(await greet({ salutation: "hi" }, [settings]), { greeting: "hi, world?" });

  plugin.process.kill("SIGTERM");
  assert.equal(await exitCode(plugin), 0, plugin.stderr());
  assert.equal(registry.unregisters.length, 1);
});
