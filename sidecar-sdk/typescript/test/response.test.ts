import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  InvalidResponseError,
  type ObjectRef,
  proto,
  RESERVED_CONDITION_TYPES,
  RESERVED_STATUS_KEYS,
  Request,
  Response,
} from "./sdk.js";

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

const statusOf = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString("utf8")) as unknown;

function throwsInvalid(fn: () => unknown, text: string): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof InvalidResponseError, `not an InvalidResponseError: ${String(error)}`);
    assert.ok(error.message.includes(text), `${JSON.stringify(error.message)} lacks ${JSON.stringify(text)}`);
    return true;
  });
}

describe("Response outcomes", () => {
  it("ok carries no retry delay", () => {
    const wire = Response.ok("done").toReconcileResponse(...sent);
    assert.equal(wire.outcome, proto.Outcome.OUTCOME_OK);
    assert.equal(wire.message, "done");
    assert.equal(wire.retryAfter, undefined);
    assert.equal(wire.status.length, 0);
    assert.deepEqual([wire.extensionStatuses, wire.conditions, wire.events], [[], [], []]);
  });

  it("retry sends its delay, 10 s by default, explicitly", () => {
    assert.deepEqual(Response.retry().toReconcileResponse(...sent).retryAfter, { seconds: 10, nanos: 0 });
    assert.deepEqual(Response.retry(30, "wait").toReconcileResponse(...sent).retryAfter, {
      seconds: 30,
      nanos: 0,
    });
    assert.deepEqual(Response.retry(1.5).toReconcileResponse(...sent).retryAfter, {
      seconds: 1,
      nanos: 500_000_000,
    });
    assert.deepEqual(Response.retry(0.1).toFinalizeResponse(...sent).retryAfter, {
      seconds: 0,
      nanos: 100_000_000,
    });
    const wire = Response.retry(5, "still dropping").toFinalizeResponse(...sent);
    assert.equal(wire.outcome, proto.Outcome.OUTCOME_RETRY);
    assert.equal(wire.message, "still dropping");
  });

  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    it(`retry refuses a delay of ${bad}`, () => {
      throwsInvalid(() => Response.retry(bad), "retry delay must be a finite number");
    });
  }

  it("failed carries its message; withMessage replaces it", () => {
    const wire = Response.failed("database refused the connection").toReconcileResponse(...sent);
    assert.equal(wire.outcome, proto.Outcome.OUTCOME_FAILED);
    assert.equal(wire.message, "database refused the connection");
    assert.equal(Response.ok().withMessage("later").message, "later");
  });
});

describe("Response statuses", () => {
  it("merges statuses and copies them as compact UTF-8 JSON", () => {
    const status = { phase: "Ready", nested: { list: [1, 2.5, null, true, "x"] } };
    const response = Response.ok().withStatus(status).withStatus({ text: "Grüße 世界 🚀", phase: "Done" });
    status.phase = "changed later";
    const bytes = response.toReconcileResponse(...sent).status;
    const text = Buffer.from(bytes).toString("utf8");
    assert.equal(text, '{"phase":"Done","nested":{"list":[1,2.5,null,true,"x"]},"text":"Grüße 世界 🚀"}');
    assert.equal(Buffer.byteLength(text), bytes.length);
  });

  it("sends an empty status object as {}", () => {
    assert.equal(Buffer.from(Response.ok().withStatus({}).toReconcileResponse(...sent).status).toString(), "{}");
  });

  for (const key of RESERVED_STATUS_KEYS) {
    it(`refuses the operator's status key ${key}`, () => {
      throwsInvalid(() => Response.ok().withStatus({ phase: "x", [key]: 1 }), `status key "${key}" is reserved for the operator`);
      throwsInvalid(
        () => Response.ok().extensionStatus(EXT, { [key]: 1 }),
        `"${key}" is reserved for the operator`,
      );
    });
  }

  const notObjects: [string, unknown, string][] = [
    ["an array", [1, 2], "status must be a JSON object, got an array"],
    ["a string", "Ready", "status must be a JSON object, got a string"],
    ["null", null, "status must be a JSON object, got null"],
    ["undefined", undefined, "status must be a JSON object"],
  ];
  for (const [what, value, message] of notObjects) {
    it(`refuses a status that is ${what}`, () => {
      throwsInvalid(() => Response.ok().withStatus(value as object), message);
    });
  }

  it("refuses what JSON cannot carry", () => {
    throwsInvalid(() => Response.ok().withStatus({ ratio: Number.NaN }), "NaN is not a JSON number");
    throwsInvalid(() => Response.ok().withStatus({ big: 10n }), "cannot be encoded as JSON");
    const cycle: Record<string, unknown> = {};
    cycle["self"] = cycle;
    throwsInvalid(() => Response.ok().withStatus(cycle), "cannot be encoded as JSON");
  });

  it("sends extension statuses for extensions it was sent, merged per target", () => {
    const ref: ObjectRef = { apiVersion: "myorg.org/v1", kind: EXT.kind, namespace: "shop", name: "users-pg" };
    const wire = Response.ok()
      .extensionStatus(EXT, { applied: true })
      .extensionStatus(EXT, { rows: 7 })
      .extensionStatus(ref, { other: "version" })
      .toReconcileResponse(...sent);
    assert.equal(wire.extensionStatuses.length, 2);
    assert.deepEqual(wire.extensionStatuses[0]?.target, {
      apiVersion: "myorg.org/v1alpha1",
      kind: EXT.kind,
      namespace: "shop",
      name: "users-pg",
    });
    assert.deepEqual(statusOf(wire.extensionStatuses[0].status), { applied: true, rows: 7 });
    // Another version of the same group and kind is the same object to the operator.
    assert.deepEqual(wire.extensionStatuses[1]?.target, ref);
  });

  it("refuses an extension status for the base object or an object not sent", () => {
    throwsInvalid(
      () => Response.ok().extensionStatus(BASE, { a: 1 }).toReconcileResponse(...sent),
      "extensionStatus targets the base object DatabaseTable shop/users",
    );
    const stranger = { ...EXT, metadata: { name: "other", namespace: "shop" } };
    throwsInvalid(
      () => Response.ok().extensionStatus(stranger, { a: 1 }).toReconcileResponse(...sent),
      "a status targets DatabaseTablePostgreSqlExtension shop/other (myorg.org/v1alpha1), which was not sent",
    );
    const otherGroup = { ...EXT, apiVersion: "elsewhere.org/v1alpha1" };
    throwsInvalid(
      () => Response.ok().extensionStatus(otherGroup, { a: 1 }).toReconcileResponse(...sent),
      "which was not sent to this plugin",
    );
  });

  it("says what to do when the extension is missing", () => {
    throwsInvalid(
      () => Response.ok().extensionStatus(request.extension("Missing"), { a: 1 }),
      "request.extension(kind) returns undefined when none of that kind was sent",
    );
  });
});

describe("Response conditions and events", () => {
  it("maps true, false and null to True, False and Unknown", () => {
    const wire = Response.ok()
      .condition("TableReady", true, "Created", "the table exists")
      .condition("Partitioned", false, "NoPartitions")
      .condition("Replicated", null)
      .toReconcileResponse(...sent);
    assert.deepEqual(wire.conditions, [
      { type: "TableReady", status: proto.ConditionStatus.CONDITION_STATUS_TRUE, reason: "Created", message: "the table exists" },
      { type: "Partitioned", status: proto.ConditionStatus.CONDITION_STATUS_FALSE, reason: "NoPartitions", message: "" },
      { type: "Replicated", status: proto.ConditionStatus.CONDITION_STATUS_UNKNOWN, reason: "", message: "" },
    ]);
  });

  for (const type of RESERVED_CONDITION_TYPES) {
    it(`refuses the operator's condition type ${type}`, () => {
      throwsInvalid(() => Response.ok().condition(type, true), `condition type "${type}" is reserved for the operator`);
    });
  }

  it("refuses an empty condition type", () => {
    throwsInvalid(() => Response.ok().condition("", true), "condition type is empty");
  });

  it("records Normal and Warning events on the base object or an object sent", () => {
    const wire = Response.ok()
      .event("TableCreated", "created table users")
      .warning("Slow", "slow server")
      .event("Partitioned", "4 partitions", { regarding: EXT })
      .event("Checked", "base, explicitly", { regarding: request.ref(), warning: true })
      .toReconcileResponse(...sent);
    assert.deepEqual(
      wire.events.map((e) => [e.type, e.reason, e.message, e.regarding?.name]),
      [
        [proto.EventType.EVENT_TYPE_NORMAL, "TableCreated", "created table users", undefined],
        [proto.EventType.EVENT_TYPE_WARNING, "Slow", "slow server", undefined],
        [proto.EventType.EVENT_TYPE_NORMAL, "Partitioned", "4 partitions", "users-pg"],
        [proto.EventType.EVENT_TYPE_WARNING, "Checked", "base, explicitly", "users"],
      ],
    );
  });

  it("refuses an event about an object not sent", () => {
    const stranger = { ...EXT, metadata: { name: "other", namespace: "elsewhere" } };
    throwsInvalid(
      () => Response.ok().event("Oops", "x", { regarding: stranger }).toFinalizeResponse(...sent),
      'event "Oops" targets DatabaseTablePostgreSqlExtension elsewhere/other',
    );
  });
});

describe("Finalize responses", () => {
  it("carry the outcome, message, delay and events", () => {
    const wire = Response.ok("dropped").event("Dropped", "dropped table users").toFinalizeResponse(...sent);
    assert.equal(wire.outcome, proto.Outcome.OUTCOME_OK);
    assert.equal(wire.message, "dropped");
    assert.equal(wire.events.length, 1);
  });

  it("refuse statuses and conditions", () => {
    for (const response of [
      Response.ok().withStatus({ a: 1 }),
      Response.ok().extensionStatus(EXT, { a: 1 }),
      Response.ok().condition("Dropped", true),
    ]) {
      throwsInvalid(() => response.toFinalizeResponse(...sent), "a Finalize response carries no status");
    }
  });
});

const CONFIG_MAP = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "users-settings" },
  data: { greeting: "hello, wörld" },
};
const DEPLOYMENT = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "users" } };

const decodedChildren = (children: proto.Children | undefined) =>
  children?.objects.map((c) => JSON.parse(Buffer.from(c).toString("utf8")) as unknown);

describe("Response children", () => {
  it("are sent only when set: unset leaves them, an empty set is still a set", () => {
    const untouched = Response.ok();
    assert.equal(untouched.children, undefined);
    assert.equal(untouched.toReconcileResponse(...sent).children, undefined);
    const empty = Response.ok().withChildren([]);
    assert.deepEqual(empty.children, []);
    assert.deepEqual(empty.toReconcileResponse(...sent).children, { objects: [] });
  });

  it("are added in order, as compact UTF-8 JSON, on RETRY too", () => {
    const response = Response.retry(5, "waiting for the Job").child(CONFIG_MAP).child(DEPLOYMENT);
    assert.deepEqual(response.children, [CONFIG_MAP, DEPLOYMENT]);
    const wire = response.toReconcileResponse(...sent);
    assert.equal(wire.outcome, proto.Outcome.OUTCOME_RETRY);
    assert.equal(Buffer.from(wire.children!.objects[0]!).toString("utf8"), JSON.stringify(CONFIG_MAP));
    assert.deepEqual(decodedChildren(wire.children), [CONFIG_MAP, DEPLOYMENT]);
  });

  it("are copied as JSON; withChildren replaces the set", () => {
    const source = { ...CONFIG_MAP, data: { greeting: "hi" } };
    const response = Response.ok().child(DEPLOYMENT).withChildren([source]);
    source.data.greeting = "changed later";
    assert.deepEqual(response.children, [{ ...CONFIG_MAP, data: { greeting: "hi" } }]);
    // A class instance is sent as JSON.stringify sees it, as for a status.
    class Service {
      apiVersion = "v1";
      kind = "Service";
      metadata = { name: "users" };
    }
    assert.deepEqual(Response.ok().child(new Service()).children, [
      { apiVersion: "v1", kind: "Service", metadata: { name: "users" } },
    ]);
  });

  for (const [what, child] of [
    ["a number", 42],
    ["an array", ["a"]],
    ["a string", "ConfigMap"],
    ["null", null],
    ["undefined", undefined],
  ] as [string, unknown][]) {
    it(`refuse a child that is ${what}`, () => {
      throwsInvalid(() => Response.ok().child(child as object), "a child must be a JSON object");
      const response = Response.ok().child(DEPLOYMENT);
      throwsInvalid(() => response.withChildren([CONFIG_MAP, child as object]), "a child must be a JSON object");
      assert.deepEqual(response.children, [DEPLOYMENT], "a refused set leaves the one before");
    });
  }

  it("refuse a child JSON cannot carry", () => {
    throwsInvalid(() => Response.ok().child({ ...CONFIG_MAP, data: { ratio: NaN } }), "a child cannot be encoded as JSON");
  });

  it("are carried by a Finalize answer", () => {
    const draining = Response.retry(1, "draining").child(CONFIG_MAP).toFinalizeResponse(...sent);
    assert.deepEqual(decodedChildren(draining.children), [CONFIG_MAP]);
    assert.deepEqual(Response.ok().withChildren([]).toFinalizeResponse(...sent).children, { objects: [] });
    assert.equal(Response.ok().toFinalizeResponse(...sent).children, undefined);
  });
});
