// examples/backup.ts, the mutator README.md's "Mutate" section shows, and
// the unit test shown under it: the README's blocks are this file's and the
// example's own text, so that what the page says runs.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { AGENT, backup, info } from "../examples/backup.js";
import { MutateCall, Mutation } from "./sdk.js";

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

describe("the mutate example", () => {
  it("is what README.md shows", () => {
    const [plugin, unitTest] = readmeBlocks("Mutate");
    assert.ok(plugin !== undefined && unitTest !== undefined, "two ts blocks");
    const example = readFileSync(join(ROOT, "examples", "backup.ts"), "utf8");
    // The page imports the published package where the example imports the source.
    const fromFirstImport = example.slice(example.indexOf("import ")).replace('"../src/index.js"', '"@kplug/sidecar"');
    assert.equal(plugin, fromFirstImport);
    const thisTest = readFileSync(join(ROOT, "test", "backup.test.ts"), "utf8");
    assert.ok(thisTest.includes(unitTest.replace(/^/gm, "    ").replace(/^ +$/gm, "")), "the unit test is this file's");
  });

  it("declares Deployments and adds the agent to one", () => {
    assert.deepEqual(info.mutations, [{ apiVersion: "apps/v1", kind: "Deployment" }]);
    const call = new MutateCall(
      "PostgreSQL",
      {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "orders-db", namespace: "shop" },
        spec: { template: { spec: { containers: [{ name: "postgres" }] } } },
      },
      undefined,
      { apiVersion: "example.com/v1", kind: "Database", metadata: { name: "orders" } },
    );
    const mutation = backup.mutate(call);
    assert.deepEqual(mutation.patch[0], {
      op: "add",
      path: "/spec/template/spec/containers/-",
      value: { name: "backup", image: AGENT, args: ["--prefix", "shop/orders"] },
    });
  });

  it("leaves a Deployment that has the agent already as it is", () => {
    const call = new MutateCall("PostgreSQL", {
      kind: "Deployment",
      metadata: { name: "db" },
      spec: { template: { spec: { containers: [{ name: "backup" }] } } },
    });
    const mutation = backup.mutate(call);
    assert.ok(mutation instanceof Mutation && mutation.empty);
    assert.deepEqual(mutation.warnings, ["Deployment db has a backup container already"]);
  });
});
