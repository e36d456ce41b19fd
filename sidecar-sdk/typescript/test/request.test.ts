import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { InvalidRequestError, Request } from "./sdk.js";

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

const BASE = {
  apiVersion: "myorg.org/v1alpha1",
  kind: "DatabaseTable",
  metadata: {
    name: "users",
    namespace: "shop",
    generation: 3,
    deletionTimestamp: "2026-01-01T00:00:00Z",
  },
  spec: { columns: ["id"] },
};
const EXTENSION = {
  apiVersion: "myorg.org/v1alpha1",
  kind: "DatabaseTablePostgreSqlExtension",
  metadata: { name: "users-pg", namespace: "shop" },
  spec: { partitionBy: "id" },
};

describe("Request.decode", () => {
  it("decodes the base object and the extensions, in order", () => {
    const other = { ...EXTENSION, kind: "Other", metadata: { name: "o", namespace: "shop" } };
    const request = Request.decode("PostgreSQL", json(BASE), [json(EXTENSION), json(other), json(EXTENSION)]);
    assert.equal(request.implementation, "PostgreSQL");
    assert.deepEqual(request.object, BASE);
    assert.deepEqual(request.extensions, [EXTENSION, other, EXTENSION]);
    assert.equal(request.name, "users");
    assert.equal(request.namespace, "shop");
    assert.equal(request.generation, 3);
    assert.equal(request.deleting, true);
    assert.deepEqual(request.spec, { columns: ["id"] });
    assert.deepEqual(request.metadata, BASE.metadata);
    assert.deepEqual(request.extension("DatabaseTablePostgreSqlExtension"), EXTENSION);
    assert.equal(request.extension("Missing"), undefined);
    assert.equal(request.extensionsOf("DatabaseTablePostgreSqlExtension").length, 2);
    assert.deepEqual(request.ref(), {
      apiVersion: "myorg.org/v1alpha1",
      kind: "DatabaseTable",
      namespace: "shop",
      name: "users",
    });
    assert.deepEqual(request.ref(other), {
      apiVersion: "myorg.org/v1alpha1",
      kind: "Other",
      namespace: "shop",
      name: "o",
    });
    assert.equal(request.toString(), "DatabaseTable shop/users");
  });

  it("gives empty defaults for what is absent or of the wrong type", () => {
    const request = Request.decode("X", json({ metadata: { name: 7, generation: "3" }, spec: [1] }), []);
    assert.equal(request.name, "");
    assert.equal(request.namespace, "");
    assert.equal(request.generation, 0);
    assert.equal(request.deleting, false);
    assert.deepEqual(request.spec, {});
    assert.equal(request.toString(), " ");
    const bare = Request.decode("X", json({}), []);
    assert.deepEqual(bare.metadata, {});
    assert.deepEqual(bare.ref(), { apiVersion: "", kind: "", namespace: "", name: "" });
  });

  it("keeps non-ASCII text and large objects intact", () => {
    const data = "Grüße, 世界! 🚀 «ñ» \"quoted\" \\ tab\t\n".repeat(5000);
    const object = { metadata: { name: "widget-ünïcødé-名前", namespace: "ns-🚀" }, spec: { data } };
    const request = Request.decode("X", json(object), []);
    assert.equal(request.name, "widget-ünïcødé-名前");
    assert.equal(request.namespace, "ns-🚀");
    assert.equal(request.spec["data"], data);
  });

  const invalid: [string, Buffer, string][] = [
    ["truncated JSON", Buffer.from('{"kind": '), "kplug: the base object is not valid JSON: "],
    ["NaN", Buffer.from('{"a": NaN}'), "kplug: the base object is not valid JSON: "],
    ["Infinity", Buffer.from('{"a": Infinity}'), "kplug: the base object is not valid JSON: "],
    ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), "kplug: the base object is not valid JSON: "],
    ["a byte order mark", Buffer.from("\ufeff{}"), "kplug: the base object is not valid JSON: "],
    ["empty bytes", Buffer.alloc(0), "kplug: the base object is not valid JSON: "],
  ];
  for (const [what, bytes, prefix] of invalid) {
    it(`refuses ${what} in the base object`, () => {
      assert.throws(
        () => Request.decode("X", bytes, []),
        (error: unknown) =>
          error instanceof InvalidRequestError &&
          error.message.startsWith(prefix) &&
          error.message.length > prefix.length,
      );
    });
  }

  for (const value of [[1, 2, 3], "text", 42, null, true]) {
    it(`refuses a base object that is ${JSON.stringify(value)}`, () => {
      assert.throws(() => Request.decode("X", json(value), []), {
        name: "InvalidRequestError",
        message: "kplug: the base object is not a JSON object",
      });
    });
  }

  it("names the extension that is wrong, counting from 0", () => {
    assert.throws(() => Request.decode("X", json(BASE), [json(EXTENSION), json("just a string")]), {
      message: "kplug: extension #1 is not a JSON object",
    });
    assert.throws(() => Request.decode("X", json(BASE), [Buffer.from("{oops")]), (error: unknown) =>
      (error as Error).message.startsWith("kplug: extension #0 is not valid JSON: "),
    );
  });
});

const SETTINGS = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "users-settings", namespace: "shop" },
  data: { greeting: "hello, wörld" },
};
const SERVER = {
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "users-server", namespace: "shop" },
  status: { readyReplicas: 2 },
};

describe("Request children", () => {
  it("decodes the observed children, in order, apart from the extensions", () => {
    const request = Request.decode("PostgreSQL", json(BASE), [json(EXTENSION)], [json(SETTINGS), json(SERVER)]);
    assert.deepEqual(request.children, [SETTINGS, SERVER]);
    assert.deepEqual(request.extensions, [EXTENSION]);
    assert.deepEqual(request.child("Deployment", "users-server"), SERVER);
    assert.equal(request.child("Deployment", "users-settings"), undefined); // the name of another kind
    assert.equal(request.child("Service", "users-server"), undefined);
    assert.deepEqual(request.childrenOf("ConfigMap"), [SETTINGS]);
    assert.deepEqual(request.childrenOf("Secret"), []);
  });

  it("has none when none are sent", () => {
    assert.deepEqual(Request.decode("PostgreSQL", json(BASE), []).children, []);
    assert.deepEqual(new Request("PostgreSQL", BASE).children, []);
  });

  it("names the observed child that is wrong, counting from 0", () => {
    assert.throws(() => Request.decode("X", json(BASE), [], [json(SETTINGS), json([1])]), {
      name: "InvalidRequestError",
      message: "kplug: child #1 is not a JSON object",
    });
    for (const bytes of [Buffer.from("{oops"), Buffer.from('{"a": Infinity}')]) {
      assert.throws(() => Request.decode("X", json(BASE), [], [bytes]), (error: unknown) =>
        error instanceof InvalidRequestError && error.message.startsWith("kplug: child #0 is not valid JSON: "),
      );
    }
  });

  it("can be built with observed children for a plugin's own tests", () => {
    const request = new Request("PostgreSQL", BASE, [], [SETTINGS]);
    assert.deepEqual(request.child("ConfigMap", "users-settings"), SETTINGS);
  });
});
