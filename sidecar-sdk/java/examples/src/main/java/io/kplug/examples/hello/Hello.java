package io.kplug.examples.hello;

import io.kplug.sidecar.GroupKind;
import io.kplug.sidecar.Info;
import io.kplug.sidecar.Kplug;
import io.kplug.sidecar.KubeObject;
import io.kplug.sidecar.Offer;
import io.kplug.sidecar.Plugin;
import io.kplug.sidecar.Request;
import io.kplug.sidecar.Response;
import java.util.Map;
import java.util.Optional;

/**
 * The smallest kplug plugin that shows every part of a plugin: it greets every example.com Greeting
 * object by name (a status and an Event), with the punctuation its GreetingHelloExtension asks for
 * (and tells that extension, in its status, which greeting used it), and says goodbye when the
 * object is deleted (Finalize).
 *
 * <p>The kind is in examples/hello/crd.yaml; run this plugin next to an operator for it
 * (docs/your-own-kind.md shows how to start one).
 */
public final class Hello implements Plugin {
  /** The plugin's description: one offer, Hello for Greetings, with its extension kind. */
  public static final Info INFO =
      Info.builder("hello")
          .version("1.0.0")
          .description("greets Greeting objects")
          .offer(
              Offer.of(
                  new GroupKind("example.com", "Greeting"),
                  "Hello",
                  new GroupKind("example.com", "GreetingHelloExtension")))
          .build();

  /** The spec of a Greeting. */
  public record GreetingSpec(String salutation) {}

  /** The Hello implementation's own settings, in a GreetingHelloExtension. */
  public record HelloSettings(String punctuation) {}

  /** Greets the object. */
  @Override
  public Response reconcile(Request request) {
    String salutation = request.decodeSpec(GreetingSpec.class).salutation();
    Optional<KubeObject> extension = request.extension("GreetingHelloExtension");
    String punctuation =
        extension.map(e -> e.decodeSpec(HelloSettings.class).punctuation()).orElse(null);
    String greeting =
        String.format(
            "%s, %s%s",
            salutation != null ? salutation : "hello",
            request.name(),
            punctuation != null ? punctuation : "!");
    Response response =
        Response.ok()
            .withMessage("greeted " + request.name())
            .withStatus(Map.of("greeting", greeting))
            .withEvent("Greeted", greeting);
    extension.ifPresent(e -> response.withExtensionStatus(e, Map.of("lastUsedBy", request.name())));
    return response;
  }

  /**
   * Called before the object is deleted. Hello made nothing to clean up, so it only says goodbye;
   * OK lets the object go.
   */
  @Override
  public Response finalize(Request request) {
    return Response.ok().withEvent("SaidGoodbye", "goodbye, " + request.name());
  }

  /** Runs the plugin until SIGTERM. */
  public static void main(String[] args) {
    Kplug.main(INFO, new Hello());
  }
}
