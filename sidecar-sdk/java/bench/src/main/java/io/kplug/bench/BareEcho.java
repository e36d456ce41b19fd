package io.kplug.bench;

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
 * The baseline of the Java SDK in the polyglot benchmark (sidecar-sdk/benches/polyglot.rs): the
 * kplug.v1.Plugin service in bare grpc-java, with the same generated messages, answering Reconcile
 * with the object's bytes as the status. It serves on the Unix socket {@code $KPLUG_BENCH_SOCKET}.
 */
public final class BareEcho extends PluginGrpc.PluginImplBase {
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

  /** Copies the object's bytes into the status. */
  @Override
  public void reconcile(ReconcileRequest request, StreamObserver<ReconcileResponse> response) {
    response.onNext(
        ReconcileResponse.newBuilder()
            .setOutcome(Outcome.OUTCOME_OK)
            .setStatus(request.getObject())
            .build());
    response.onCompleted();
  }

  /** Serves until SIGTERM. */
  public static void main(String[] args) throws IOException, InterruptedException {
    BareServer.serve("bare-echo", new BareEcho());
  }
}
