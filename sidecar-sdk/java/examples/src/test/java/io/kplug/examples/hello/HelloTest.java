package io.kplug.examples.hello;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kplug.sidecar.Request;
import io.kplug.sidecar.Response;
import java.nio.charset.StandardCharsets;
import kplug.v1.PluginOuterClass.ReconcileResponse;
import kplug.v1.Types;
import org.junit.jupiter.api.Test;

/** The hello plugin's handlers, called as the SDK calls them: no socket needed. */
class HelloTest {
  private static byte[] json(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void greetsWithTheExtensionsPunctuation() throws Exception {
    Request request =
        Request.decode(
            "Hello",
            json(
                """
                {"apiVersion": "example.com/v1", "kind": "Greeting",
                 "metadata": {"name": "world", "namespace": "default"},
                 "spec": {"salutation": "hi"}}"""),
            json(
                """
                {"apiVersion": "example.com/v1", "kind": "GreetingHelloExtension",
                 "metadata": {"name": "world", "namespace": "default"},
                 "spec": {"punctuation": "?"}}"""));
    ReconcileResponse wire = new Hello().reconcile(request).toReconcileResponse();
    assertEquals(Types.Outcome.OUTCOME_OK, wire.getOutcome());
    assertEquals("{\"greeting\":\"hi, world?\"}", wire.getStatus().toStringUtf8());
    assertEquals(
        "{\"lastUsedBy\":\"world\"}", wire.getExtensionStatuses(0).getStatus().toStringUtf8());
    assertEquals("GreetingHelloExtension", wire.getExtensionStatuses(0).getTarget().getKind());
    assertEquals("hi, world?", wire.getEvents(0).getMessage());
  }

  @Test
  void greetsWithDefaultsWithoutSpecOrExtension() throws Exception {
    Request request =
        Request.decode(
            "Hello", json("{\"kind\": \"Greeting\", \"metadata\": {\"name\": \"you\"}}"));
    ReconcileResponse wire = new Hello().reconcile(request).toReconcileResponse();
    assertEquals("{\"greeting\":\"hello, you!\"}", wire.getStatus().toStringUtf8());
    assertEquals(0, wire.getExtensionStatusesCount());
  }

  @Test
  void saysGoodbyeOnFinalize() throws Exception {
    Request request =
        Request.decode(
            "Hello", json("{\"kind\": \"Greeting\", \"metadata\": {\"name\": \"you\"}}"));
    Response response = new Hello().finalize(request);
    assertEquals("goodbye, you", response.toFinalizeResponse().getEvents(0).getMessage());
  }
}
