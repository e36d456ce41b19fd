package io.kplug.bench;

import io.kplug.sidecar.GroupKind;
import io.kplug.sidecar.Info;
import io.kplug.sidecar.Kplug;
import io.kplug.sidecar.Offer;
import io.kplug.sidecar.Plugin;
import io.kplug.sidecar.Request;
import io.kplug.sidecar.Response;
import java.util.Map;

/**
 * The Java SDK's side of the polyglot benchmark (sidecar-sdk/benches/polyglot.rs): a plugin served
 * by {@link Kplug#main}, the SDK's normal path, on {@code
 * $KPLUG_SOCKET_DIR/plugins/echo/plugin.sock}. It decodes the object and echoes its spec into the
 * status, as the other SDKs' bench plugins do. Nothing registers it (the benchmark runs no
 * operator): its heartbeats fail and back off in the background, up to one attempt per heartbeat
 * interval.
 */
public final class SdkEcho implements Plugin {
  /** Answers {@code {"echo": spec}}. */
  @Override
  public Response reconcile(Request request) {
    return Response.ok().withStatus(Map.of("echo", request.spec()));
  }

  /** Serves the plugin until SIGTERM. */
  public static void main(String[] args) {
    Kplug.main(
        Info.builder("echo")
            .version("1.0.0")
            .offer(Offer.of(new GroupKind("myorg.org", "DatabaseTable"), "Echo"))
            .build(),
        new SdkEcho());
  }
}
