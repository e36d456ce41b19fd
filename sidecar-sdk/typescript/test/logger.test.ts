// The SDK's logging of each call: stderrLogger's levels, and the debug line
// of each Reconcile, which the SDK builds only for a logger that may write it.
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { Metadata, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";

import { CapturingLogger } from "./helpers.js";
import { type Logger, pluginHandlers, type Plugin, proto, Response, stderrLogger } from "./sdk.js";

const echo: Plugin = {
  async reconcile(request) {
    return Response.ok().withStatus({ echo: request.spec });
  },
};
const info = {
  name: "echo",
  version: "1.0.0",
  offers: [{ base: { group: "myorg.org", kind: "DatabaseTable" }, implementation: "Echo" }],
};
const OBJECT = {
  apiVersion: "myorg.org/v1alpha1",
  kind: "DatabaseTable",
  metadata: { name: "users", namespace: "shop" },
  spec: { columns: 3 },
};

/** One Reconcile of OBJECT through the service's handler, as grpc-js calls it. */
function reconcile(logger: Logger): Promise<proto.ReconcileResponse> {
  const request: proto.ReconcileRequest = {
    implementation: "Echo",
    object: Buffer.from(JSON.stringify(OBJECT)),
    extensions: [],
    children: [],
  };
  const call = { request, metadata: new Metadata() } as unknown as ServerUnaryCall<
    proto.ReconcileRequest,
    proto.ReconcileResponse
  >;
  return new Promise((resolve, reject) => {
    const callback: sendUnaryData<proto.ReconcileResponse> = (error, response) => {
      if (error || !response) {
        reject(new Error(`Reconcile failed: ${error?.details ?? "no response"}`));
      } else {
        resolve(response);
      }
    };
    pluginHandlers(echo, info, logger).reconcile(call, callback);
  });
}

describe("stderrLogger", () => {
  let written: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  beforeEach(() => {
    written = [];
    process.stderr.write = (text: string) => {
      written.push(text);
      return true;
    };
  });
  afterEach(() => {
    process.stderr.write = write;
  });

  it("writes its level and those above, and drops those below", () => {
    const logger = stderrLogger("warn");
    logger.debug("d");
    logger.info("i");
    logger.warn("w");
    logger.error("e");
    assert.deepEqual(
      written.map((line) => line.replace(/^\S+ /, "")),
      ["WARN kplug: w\n", "ERROR kplug: e\n"],
    );
    assert.match(written[0] ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARN/);
  });

  it("writes each Reconcile's debug line at debug level, and nothing at info", async () => {
    const response = await reconcile(stderrLogger("debug"));
    assert.equal(response.outcome, proto.Outcome.OUTCOME_OK);
    assert.deepEqual(
      written.map((line) => line.replace(/^\S+ /, "")),
      ["DEBUG kplug: plugin echo: reconcile DatabaseTable shop/users\n"],
    );
    written = [];
    const quiet = await reconcile(stderrLogger());
    assert.equal(Buffer.from(quiet.status).toString(), '{"echo":{"columns":3}}');
    assert.deepEqual(written, []);
  });
});

describe("A plugin's own logger", () => {
  it("is given each Reconcile's debug line", async () => {
    const logger = new CapturingLogger();
    await reconcile(logger);
    assert.deepEqual(logger.lines, [{ level: "debug", message: "plugin echo: reconcile DatabaseTable shop/users" }]);
  });
});
