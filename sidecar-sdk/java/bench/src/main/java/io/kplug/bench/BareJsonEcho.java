package io.kplug.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import kplug.v1.PluginGrpc;
import kplug.v1.PluginOuterClass.GetInfoRequest;
import kplug.v1.PluginOuterClass.GetInfoResponse;
import kplug.v1.PluginOuterClass.ProbeRequest;
import kplug.v1.PluginOuterClass.ProbeResponse;
import kplug.v1.PluginOuterClass.ReconcileRequest;
import kplug.v1.PluginOuterClass.ReconcileResponse;
import kplug.v1.Types.Outcome;

/**
 * The second baseline of the Java SDK in the polyglot benchmark (sidecar-sdk/benches/polyglot.rs):
 * the kplug.v1.Plugin service in bare grpc-java with Jackson's {@link ObjectMapper}, the JSON
 * library of Java's Kubernetes clients, what a plugin author would write without the SDK. Reconcile
 * decodes the object into Jackson's tree and answers the status {@code {"echo": spec}}, encoded by
 * the same mapper, as the SDK's echo plugin does. It serves on the Unix socket {@code
 * $KPLUG_BENCH_SOCKET}.
 */
public final class BareJsonEcho extends PluginGrpc.PluginImplBase {
  /** Thread-safe once configured; one for the process, as Jackson advises. */
  private static final ObjectMapper MAPPER = new ObjectMapper();

  @Override
  public void getInfo(GetInfoRequest request, StreamObserver<GetInfoResponse> response) {
    response.onNext(GetInfoResponse.getDefaultInstance());
    response.onCompleted();
  }

  @Override
  public void probe(ProbeRequest request, StreamObserver<ProbeResponse> response) {
    response.onNext(ProbeResponse.newBuilder().setReady(true).build());
    response.onCompleted();
  }

  /** Decodes the object, answers {@code {"echo": spec}}. */
  @Override
  public void reconcile(ReconcileRequest request, StreamObserver<ReconcileResponse> response) {
    byte[] status;
    try {
      JsonNode object = MAPPER.readTree(request.getObject().newInput());
      ObjectNode echo = MAPPER.createObjectNode();
      echo.set("echo", object.get("spec"));
      status = MAPPER.writeValueAsBytes(echo);
    } catch (IOException e) {
      response.onError(
          Status.INVALID_ARGUMENT
              .withDescription("the object is not JSON: " + e.getMessage())
              .asException());
      return;
    }
    response.onNext(
        ReconcileResponse.newBuilder()
            .setOutcome(Outcome.OUTCOME_OK)
            .setStatus(ByteString.copyFrom(status))
            .build());
    response.onCompleted();
  }

  /** Serves until SIGTERM. */
  public static void main(String[] args) throws IOException, InterruptedException {
    BareServer.serve("bare-json-echo", new BareJsonEcho());
  }
}
