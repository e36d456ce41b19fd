// examples/greeter.ts, the plugin README.md's "Children" section shows, and
// the unit test shown under it: the README's blocks are this file's and the
// example's own text, so that what the page says runs.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { greeter, info } from "../examples/greeter.js";
import { Request } from "./sdk.js";

// build/test/ when run; the sources are two levels up from there.
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The ```ts blocks of README.md's "### <title>" section. */
function readmeBlocks(title: string): string[] {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const start = readme.indexOf(`\n### ${title}\n`);
  assert.ok(start >= 0, `README.md has no "### ${title}" section`);
  const end = readme.indexOf("\n### ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
}

describe("the children example", () => {
  it("is what README.md shows", () => {
    const [plugin, unitTest] = readmeBlocks("Children");
    assert.ok(plugin !== undefined && unitTest !== undefined, "two ts blocks");
    const example = readFileSync(join(ROOT, "examples", "greeter.ts"), "utf8");
    // The page imports the published package where the example imports the source.
    const fromFirstImport = example.slice(example.indexOf("import ")).replace('"../src/index.js"', '"@kplug/sidecar"');
    assert.equal(plugin, fromFirstImport);
    const thisTest = readFileSync(join(ROOT, "test", "greeter.test.ts"), "utf8");
    assert.ok(thisTest.includes(unitTest.replace(/^/gm, "    ").replace(/^ +$/gm, "")), "the unit test is this file's");
  });

  it("declares its child kind and desires its ConfigMap", async () => {
    assert.deepEqual(info.offers[0]?.children, [{ apiVersion: "v1", kind: "ConfigMap" }]);
    const request = new Request(
      "Greeter",
      { apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "world" } },
      [],
      [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "world-greeting" } }],
    );
    const response = await greeter.reconcile(request);
    assert.deepEqual(response.status, { phase: "Ready" });
    assert.deepEqual(response.children, [
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "world-greeting" }, data: { greeting: "hello, world" } },
    ]);
  });

  it("says Creating before the operator made the ConfigMap", async () => {
    const request = new Request("Greeter", { apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "world" } });
    assert.deepEqual((await greeter.reconcile(request)).status, { phase: "Creating" });
  });
});
