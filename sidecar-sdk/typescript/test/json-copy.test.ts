// What a plugin's statuses and children become on the wire, and the errors
// for those JSON cannot carry. The SDK encodes each once (response.ts,
// JsonCopy): these tests pin that the bytes, the copies read back and the
// messages are those of JSON.stringify followed by JSON.parse, as a copy made
// the long way round gives them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { HookResponse, InvalidResponseError, proto, Request, Response } from "./sdk.js";

const BASE = {
  apiVersion: "myorg.org/v1alpha1",
  kind: "DatabaseTable",
  metadata: { name: "users", namespace: "shop" },
};
const EXT = {
  apiVersion: "myorg.org/v1alpha1",
  kind: "DatabaseTablePostgreSqlExtension",
  metadata: { name: "users-pg", namespace: "shop" },
};
const request = new Request("PostgreSQL", BASE, [EXT]);
const sent = [request.ref(), [request.ref(EXT)]] as const;

const text = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? []).toString("utf8");

function throwsExactly(fn: () => unknown, message: string | RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof InvalidResponseError, `not an InvalidResponseError: ${String(error)}`);
    if (typeof message === "string") {
      assert.equal(error.message, message);
    } else {
      assert.match(error.message, message);
    }
    return true;
  });
}

class Row {
  id = 7;
  // On the prototype: JSON.stringify does not write it.
  get plugin(): string {
    return `row ${this.id}`;
  }
}

/** Statuses whose JSON takes each of JSON.stringify's turns. */
const statuses: [string, object][] = [
  ["nulls, and strings that read null", { a: null, b: [null, "null"], c: "nullable" }],
  ["numbers", { big: 1e21, small: 5e-7, negativeZero: -0, tenth: 0.1, max: Number.MAX_SAFE_INTEGER }],
  ["text to escape", { quote: '"\\\n\t\u0001', lone: "\ud800", emoji: "🚀", accents: "Grüße" }],
  ["integer-like keys", { b: 1, 2: "two", a: 3, 1: "one" }],
  ["what JSON leaves out", { kept: 1, gone: undefined, fn: () => 1, list: [undefined, () => 1] }],
  ["a toJSON method", { when: new Date(0), custom: { toJSON: () => ({ replaced: true }) } }],
  ["a class instance", new Row()],
  ["a reserved key left out because it is undefined", { phase: "x", plugin: undefined }],
  ["a reserved key that is not enumerable", Object.defineProperty({ phase: "x" }, "conditions", { value: [] })],
  ["a long string", { pad: "x".repeat(100_000) }],
];

describe("A status on the wire", () => {
  for (const [what, status] of statuses) {
    it(`is JSON.stringify's text, read back as JSON.parse's: ${what}`, () => {
      const expected = JSON.stringify(status);
      const response = Response.ok().withStatus(status);
      assert.equal(text(response.toReconcileResponse(...sent).status), expected);
      assert.deepEqual(response.status, JSON.parse(expected));
      const extension = Response.ok().extensionStatus(EXT, status).toReconcileResponse(...sent);
      assert.equal(text(extension.extensionStatuses[0]?.status), expected);
      assert.equal(text(HookResponse.ok().withStatus(status).toHookResponse(...sent).status), expected);
    });
  }

  it("merges top-level keys: a later value takes the earlier key's place", () => {
    const response = Response.ok().withStatus({ a: 1, b: { x: 1 } }).withStatus({ c: 3, b: { y: 2 } });
    assert.equal(text(response.toReconcileResponse(...sent).status), '{"a":1,"b":{"y":2},"c":3}');
    const hook = HookResponse.ok().withStatus({ a: 1, b: 2 }).withStatus({ b: null });
    assert.equal(text(hook.toHookResponse(...sent).status), '{"a":1,"b":null}');
  });

  it("is the copy read back, changed or not", () => {
    // The getters hand out the copy the SDK sends, as they always have: a
    // change to it is sent.
    const response = Response.ok().withStatus({ phase: "Creating" });
    const status = response.status;
    assert.equal(response.status, status, "the same copy each time");
    status!["phase"] = "Ready";
    assert.equal(text(response.toReconcileResponse(...sent).status), '{"phase":"Ready"}');
    status!["ratio"] = Number.NaN;
    throwsExactly(
      () => response.toReconcileResponse(...sent),
      "a value cannot be encoded as JSON: NaN is not a JSON number",
    );

    const withExtension = Response.ok().extensionStatus(EXT, { rows: 1 });
    const item = withExtension.extensionStatuses[0]!;
    (item.status as Record<string, unknown>)["rows"] = 2;
    assert.equal(text(withExtension.toReconcileResponse(...sent).extensionStatuses[0]?.status), '{"rows":2}');

    const hook = HookResponse.ok().withStatus({ step: 1 });
    hook.status!["step"] = 2;
    assert.equal(text(hook.toHookResponse(...sent).status), '{"step":2}');
  });

  it("is not changed by changes to the object passed in", () => {
    const source = { phase: "Creating", nested: { n: 1 } };
    const response = Response.ok().withStatus(source);
    const hook = HookResponse.ok().withStatus(source);
    source.phase = "changed";
    source.nested.n = 2;
    assert.equal(text(response.toReconcileResponse(...sent).status), '{"phase":"Creating","nested":{"n":1}}');
    assert.equal(text(hook.toHookResponse(...sent).status), '{"phase":"Creating","nested":{"n":1}}');
  });
});

describe("A status JSON cannot carry", () => {
  const nonFinite: [string, object, string][] = [
    ["NaN, deep down", { a: { b: [1, { c: Number.NaN }] } }, "NaN"],
    ["Infinity next to a null", { a: null, b: Number.POSITIVE_INFINITY }, "Infinity"],
    ["-Infinity", { a: [Number.NEGATIVE_INFINITY] }, "-Infinity"],
    ["NaN from a toJSON", { a: { toJSON: () => Number.NaN } }, "NaN"],
  ];
  for (const [what, status, shown] of nonFinite) {
    it(`is refused, naming the number: ${what}`, () => {
      throwsExactly(
        () => Response.ok().withStatus(status),
        `status cannot be encoded as JSON: ${shown} is not a JSON number`,
      );
      throwsExactly(
        () => Response.ok().extensionStatus(EXT, status),
        `status of DatabaseTablePostgreSqlExtension shop/users-pg cannot be encoded as JSON: ${shown} is not a JSON number`,
      );
      throwsExactly(() => Response.ok().child({ ...BASE, status }), `a child cannot be encoded as JSON: ${shown} is not a JSON number`);
      throwsExactly(
        () => HookResponse.ok().withStatus(status),
        `a value cannot be encoded as JSON: ${shown} is not a JSON number`,
      );
    });
  }

  it("is refused for the first problem JSON.stringify meets", () => {
    // NaN comes before the cycle, so the NaN is what is named.
    const cycle: Record<string, unknown> = { ratio: Number.NaN };
    cycle["self"] = cycle;
    throwsExactly(() => Response.ok().withStatus(cycle), "status cannot be encoded as JSON: NaN is not a JSON number");
    const cycleFirst: Record<string, unknown> = {};
    cycleFirst["self"] = cycleFirst;
    cycleFirst["ratio"] = Number.NaN;
    throwsExactly(() => Response.ok().withStatus(cycleFirst), /^status cannot be encoded as JSON: Converting circular structure/);
    throwsExactly(
      () => Response.ok().withStatus({ big: 10n }),
      "status cannot be encoded as JSON: Do not know how to serialize a BigInt",
    );
    throwsExactly(
      () =>
        Response.ok().withStatus({
          toJSON() {
            throw new Error("no");
          },
        }),
      "status cannot be encoded as JSON: no",
    );
  });

  it("is refused when it is not an object, saying what it is", () => {
    throwsExactly(() => Response.ok().withStatus({ toJSON: () => [1] }), "status must be a JSON object, got an array");
    throwsExactly(() => Response.ok().withStatus(new Number(1)), "status must be a JSON object, got a number");
    throwsExactly(() => Response.ok().withStatus({ toJSON: () => undefined }), "status must be a JSON object, got object");
    throwsExactly(() => Response.ok().child({ toJSON: () => null }), "a child must be a JSON object (with apiVersion, kind and metadata.name), got null");
    throwsExactly(() => HookResponse.ok().withStatus([1] as object), "status must be a JSON object, got an array");
    throwsExactly(() => HookResponse.ok().withStatus(new String("x")), "status must be a JSON object, got string");
  });

  it("is refused when its JSON sets a key the operator owns, however it got there", () => {
    const reserved = /^status key "plugin" is reserved for the operator/;
    throwsExactly(() => Response.ok().withStatus({ toJSON: () => ({ plugin: "mine" }) }), reserved);
    const inherited = Object.create({ toJSON: () => ({ plugin: "mine" }) }) as object;
    throwsExactly(() => Response.ok().withStatus(inherited), reserved);
    throwsExactly(() => Response.ok().withStatus({ plugin: null }), reserved);
    throwsExactly(
      () => Response.ok().extensionStatus(EXT, { toJSON: () => ({ conditions: [] }) }),
      /^status of DatabaseTablePostgreSqlExtension shop\/users-pg key "conditions" is reserved/,
    );
    // A refused status leaves the one before.
    const response = Response.ok().withStatus({ phase: "x" });
    throwsExactly(() => response.withStatus({ observedGeneration: 2 }), /key "observedGeneration" is reserved/);
    assert.equal(text(response.toReconcileResponse(...sent).status), '{"phase":"x"}');
  });
});

describe("Children on the wire", () => {
  it("are JSON.stringify's text, read back as JSON.parse's", () => {
    const children = statuses.map(([, status]) => ({ ...BASE, kind: "ConfigMap", data: status }));
    const response = Response.ok().withChildren(children);
    const wire = response.toReconcileResponse(...sent).children!;
    assert.deepEqual(wire.objects.map(text), children.map((child) => JSON.stringify(child)));
    assert.deepEqual(response.children, children.map((child) => JSON.parse(JSON.stringify(child)) as unknown));
  });

  it("are the copies read back, changed or not", () => {
    const response = Response.ok().child({ kind: "ConfigMap", data: { a: "1" } });
    const children = response.children!;
    assert.equal(response.children, children, "the same set each time");
    (children[0]!["data"] as Record<string, unknown>)["a"] = "2";
    const wire = response.toReconcileResponse(...sent).children!;
    assert.deepEqual(wire.objects.map(text), ['{"kind":"ConfigMap","data":{"a":"2"}}']);
    // A child added after the set was read is sent after it.
    response.child({ kind: "Secret" });
    assert.deepEqual(
      response.toFinalizeResponse(...sent).children!.objects.map(text),
      ['{"kind":"ConfigMap","data":{"a":"2"}}', '{"kind":"Secret"}'],
    );
  });

  it("keep the wire form of a Reconcile answer's other fields", () => {
    const wire = Response.ok().withStatus({ a: 1 }).child({ kind: "ConfigMap" }).toReconcileResponse(...sent);
    assert.equal(wire.outcome, proto.Outcome.OUTCOME_OK);
    assert.deepEqual([wire.extensionStatuses, wire.conditions, wire.events], [[], [], []]);
  });
});
