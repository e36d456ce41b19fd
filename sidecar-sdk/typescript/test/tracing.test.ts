// A plugin continues the operator's trace: a real OTLP/gRPC receiver, a real plugin server.

import assert from "node:assert/strict";
import { it } from "node:test";

import { Metadata, Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from "@grpc/grpc-js";
import { trace } from "@opentelemetry/api";

import { Dialer, removeDir, tempSocketDir, unary, within } from "./helpers.js";
import { exportSpans, OTLP_ENDPOINT_ENV, PluginServer, proto, Response, type Plugin, type PluginInfo } from "./sdk.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const INFO: PluginInfo = {
  name: "greeter",
  version: "1.0.0",
  offers: [{ base: { group: "example.com", kind: "Greeting" }, implementation: "Hi" }],
};

/**
 * An OTLP trace receiver at the gRPC level: it keeps each
 * ExportTraceServiceRequest as bytes (an empty response is the empty
 * message), and the test looks for the ids and names in them.
 */
async function receiver(): Promise<{ port: number; received: Buffer[]; server: Server }> {
  const received: Buffer[] = [];
  const server = new Server();
  const identity = (b: Buffer): Buffer => b;
  server.addService(
    {
      Export: {
        path: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        requestStream: false,
        responseStream: false,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      },
    },
    {
      Export(call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) {
        received.push(call.request);
        callback(null, Buffer.alloc(0));
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, port) =>
      error ? reject(error) : resolve(port),
    ),
  );
  return { port, received, server };
}

class Greeter implements Plugin {
  async reconcile(): Promise<Response> {
    // A span the handler starts itself is a child of the SDK's.
    trace.getTracer("greeter").startSpan("say hello").end();
    return Response.ok("hello");
  }
}

it("continues the operator's trace in the handler's span", async () => {
  const { port, received, server: collector } = await receiver();
  const stop = exportSpans("greeter", { [OTLP_ENDPOINT_ENV]: `http://127.0.0.1:${port}` });
  assert.ok(stop);
  const dir = await tempSocketDir();
  const plugin = new PluginServer(new Greeter(), INFO, { socketDir: dir, heartbeatIntervalSeconds: 0.1 });
  const dialer = new Dialer();
  try {
    await plugin.start();
    const stub = dialer.open(plugin.socketPath);
    const metadata = new Metadata();
    metadata.set("traceparent", `00-${TRACE}-${PARENT}-01`);
    const object = Buffer.from(
      JSON.stringify({ apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "world", namespace: "default" } }),
    );
    const answer = await unary<proto.ReconcileResponse>((done) =>
      stub.client.reconcile({ implementation: "Hi", object, extensions: [], children: [] }, metadata, within(5), done),
    );
    assert.equal(answer.outcome, proto.Outcome.OUTCOME_OK);
  } finally {
    dialer.close();
    await plugin.stop();
    await stop();
    collector.forceShutdown();
    await removeDir(dir);
  }
  const all = Buffer.concat(received);
  for (const [what, bytes] of [
    ["the operator's trace id", Buffer.from(TRACE, "hex")],
    ["the operator's span as parent", Buffer.from(PARENT, "hex")],
    ["the handler span", Buffer.from("plugin handler")],
    ["the handler's own span", Buffer.from("say hello")],
    ["the plugin as service.name", Buffer.from("greeter")],
  ] as const) {
    assert.ok(all.includes(bytes), `${what} not exported (${all.length} bytes received)`);
  }
});

it("exports nothing without an endpoint", () => {
  assert.equal(exportSpans("greeter", {}), undefined);
});
