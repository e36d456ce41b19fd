package io.kplug.sidecar;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import kplug.v1.Types;
import org.junit.jupiter.api.Test;

/** Decoding what the operator sends, and building what the plugin answers, without a socket. */
class RequestResponseTest {
  private static byte[] json(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  private static String refusal(String object) {
    return assertThrows(InvalidRequestException.class, () -> Request.decode("I", json(object)))
        .getMessage();
  }

  @Test
  void onlyAJsonObjectIsAnObject() {
    assertTrue(refusal("{\"a\": 1} {}").startsWith("kplug: the base object is not valid JSON: "));
    assertTrue(refusal("{\"a\": NaN}").startsWith("kplug: the base object is not valid JSON: "));
    assertTrue(refusal("{\"a\": \"\\ud800\"}").contains("lone leading surrogate"));
    assertTrue(refusal("{\"a\": \"\\udc00x\"}").contains("lone trailing surrogate"));
    assertEquals("kplug: the base object is not a JSON object", refusal("[1]"));
    byte[] invalidUtf8 = {'{', '"', 'a', '"', ':', '"', (byte) 0xff, '"', '}'};
    assertThrows(InvalidRequestException.class, () -> Request.decode("I", invalidUtf8));
    var e =
        assertThrows(
            InvalidRequestException.class,
            () -> Request.decode("I", json("{}"), json("{}"), json("3")));
    assertEquals("kplug: extension #1 is not a JSON object", e.getMessage());
  }

  @Test
  void theObjectReadsAsKubernetesUnstructuredObjects() throws Exception {
    Request request =
        Request.decode(
            "I",
            json(
                """
                {"apiVersion": "x.io/v1", "kind": "T", "metadata": {"name": "n", "namespace": "ns",
                 "generation": 3, "labels": {"app": "a"}, "deletionTimestamp": "2026-01-01T00:00:00Z"},
                 "spec": {"size": 2, "ratio": 0.5, "tags": ["t"]}}"""),
            json("{\"kind\": \"E\", \"metadata\": {\"name\": \"e1\"}}"),
            json("{\"kind\": \"E\", \"metadata\": {\"name\": \"e2\"}}"));
    assertEquals("T ns/n", request.toString());
    assertEquals(3, request.generation());
    assertTrue(request.object().isBeingDeleted());
    assertEquals("a", request.object().get("metadata", "labels", "app").orElseThrow());
    assertEquals(2L, request.spec().get("size"));
    assertEquals(0.5, request.spec().get("ratio"));
    assertEquals("e1", request.extension("E").orElseThrow().name());
    assertEquals(2, request.extensionsOf("E").size());
    record Spec(int size, java.util.List<String> tags) {}
    assertEquals(new Spec(2, java.util.List.of("t")), request.decodeSpec(Spec.class));
    assertTrue(request.deadline().isEmpty(), "no deadline outside a call");
  }

  @Test
  void statusesAreCompactUtf8Objects() {
    var wire = Response.ok().withStatus(Map.of("greeting", "grüße 🚀")).toReconcileResponse();
    assertEquals("{\"greeting\":\"grüße 🚀\"}", wire.getStatus().toStringUtf8());
    var notAnObject = Response.ok().withStatus("text").toReconcileResponse();
    assertEquals(Types.Outcome.OUTCOME_FAILED, notAnObject.getOutcome());
    assertEquals(
        "plugin bug: status must be a JSON object (e.g. a Map or a record), got a string",
        notAnObject.getMessage());
  }

  @Test
  void aMistakeIsSentAsFailedAndNothingElse() {
    var wire =
        Response.ok()
            .withStatus(Map.of("phase", "Ready"))
            .withCondition("", ConditionStatus.TRUE, "R", "m")
            .withEvent("E", "m")
            .toReconcileResponse();
    assertEquals(Types.Outcome.OUTCOME_FAILED, wire.getOutcome());
    assertTrue(wire.getMessage().startsWith("plugin bug: condition type is empty"));
    assertTrue(wire.getStatus().isEmpty());
    assertEquals(0, wire.getEventsCount());
    assertTrue(Response.retry(Duration.ofSeconds(-1)).problem().contains("negative"));
  }

  @Test
  void aFinalizeAnswerCarriesOutcomeMessageDelayAndEventsOnly() {
    Response response =
        Response.retry(Duration.ofMillis(1500))
            .withMessage("waiting")
            .withStatus(Map.of("a", 1))
            .withEvent("E", "m");
    assertTrue(response.dropsInFinalize());
    var wire = response.toFinalizeResponse();
    assertEquals(Types.Outcome.OUTCOME_RETRY, wire.getOutcome());
    assertEquals(1, wire.getRetryAfter().getSeconds());
    assertEquals(500_000_000, wire.getRetryAfter().getNanos());
    assertEquals(1, wire.getEventsCount());
  }

  @Test
  void aHookMayUseReservedKeysButNotConditions() {
    assertNull(Response.ok().withStatus(Map.of("implementation", "x")).hookProblem());
    var wire =
        Response.ok().withCondition("Backup", ConditionStatus.TRUE, "R", "m").toHookResponse();
    assertEquals(Types.Outcome.OUTCOME_FAILED, wire.getOutcome());
    assertTrue(wire.getMessage().contains("a hook's response sets conditions"));
  }

  @Test
  void admissionAnswersAreBounded() {
    Validation verdict = Validation.allowed().withError("spec.a", "värchar2", "bad");
    for (int i = 0; i < 70; i++) {
      verdict.withErrorAt("spec.b", "missing");
    }
    var wire = verdict.toValidateResponse();
    assertEquals(64, wire.getErrorsCount());
    assertEquals("\"värchar2\"", wire.getErrors(0).getValue());
    assertEquals("and 8 more errors", wire.getErrors(63).getMessage());
    // Characters are code points: an emoji counts once.
    String cut = Text.cut("🚀".repeat(300), Protocol.MAX_WARNING_CHARS);
    assertEquals(256, cut.codePointCount(0, cut.length()));
    assertTrue(cut.endsWith("…"));
  }

  @Test
  void aDefaultOutsideTheAllowedPathsIsAMistake() {
    Defaults defaults = Defaults.none().add("/spec/a", 1).add("/specification", 2);
    assertTrue(defaults.problem().contains("\"/specification\" is outside them"));
    var e = assertThrows(IllegalStateException.class, defaults::toDefaultResponse);
    assertTrue(e.getMessage().startsWith("plugin bug: a default may only change"));
    assertEquals(
        "[{\"op\":\"add\",\"path\":\"/metadata/labels/app.kubernetes.io~1name\",\"value\":\"x\"},"
            + "{\"op\":\"remove\",\"path\":\"/spec/old\"}]",
        Defaults.none()
            .add("/metadata/labels/app.kubernetes.io~1name", "x")
            .remove("/spec/old")
            .toDefaultResponse()
            .getPatch()
            .toStringUtf8());
  }

  private static final String CONFIG_MAP =
      "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"settings\"}}";

  private static final String DEPLOYMENT =
      """
      {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "server"},
       "status": {"readyReplicas": 2}}""";

  @Test
  void childKindsAreNamedByApiVersionAndKind() {
    assertEquals(
        new GroupVersionKind("", "v1", "ConfigMap"), GroupVersionKind.of("v1", "ConfigMap"));
    var deployment = GroupVersionKind.of("apps/v1", "Deployment");
    assertEquals(new GroupVersionKind("apps", "v1", "Deployment"), deployment);
    assertEquals("apps/v1", deployment.apiVersion());
    assertEquals("v1", GroupVersionKind.of("v1", "ConfigMap").apiVersion());
    Offer offer =
        Offer.of(new GroupKind("x.io", "T"), "I")
            .withChild("v1", "ConfigMap")
            .withChild("apps/v1", "Deployment");
    assertEquals(List.of(GroupVersionKind.of("v1", "ConfigMap"), deployment), offer.children());
    assertEquals(List.of(), Offer.of(new GroupKind("x.io", "T"), "I").children());
    assertEquals("apps", offer.toProto().getChildren(1).getGroup());
  }

  @Test
  void observedChildrenAreDecodedLikeExtensions() throws Exception {
    Request request = Request.decode("I", json("{\"kind\": \"T\"}"));
    assertEquals(List.of(), request.children());
    Request withChildren = request.withChildren(json(CONFIG_MAP), json(DEPLOYMENT));
    assertEquals(List.of(), request.children(), "withChildren returns a new request");
    assertEquals(2, withChildren.children().size());
    assertEquals(
        2L,
        withChildren
            .child("Deployment", "server")
            .orElseThrow()
            .get("status", "readyReplicas")
            .orElseThrow());
    assertEquals("settings", withChildren.child("ConfigMap", "settings").orElseThrow().name());
    assertTrue(withChildren.child("ConfigMap", "server").isEmpty());
    assertTrue(withChildren.child("Deployment", "other").isEmpty());

    var notAnObject =
        assertThrows(
            InvalidRequestException.class,
            () -> request.withChildren(json(CONFIG_MAP), json("[]")));
    assertEquals("kplug: child #1 is not a JSON object", notAnObject.getMessage());
    var invalid =
        assertThrows(InvalidRequestException.class, () -> request.withChildren(json("{")));
    assertTrue(
        invalid.getMessage().startsWith("kplug: child #0 is not valid JSON: "),
        invalid.getMessage());
  }

  record Metadata(String name) {}

  record ConfigMap(String apiVersion, String kind, Metadata metadata, Map<String, String> data) {}

  @Test
  void desiredChildrenAreSentOnlyWhenSet() {
    assertFalse(Response.ok().toReconcileResponse().hasChildren());
    assertFalse(Response.ok().toFinalizeResponse().hasChildren());

    var none = Response.ok().withChildren(List.of());
    assertTrue(none.toReconcileResponse().hasChildren());
    assertEquals(0, none.toReconcileResponse().getChildren().getObjectsCount());
    assertTrue(none.toFinalizeResponse().hasChildren());

    var typed =
        Response.retry()
            .withChild(new ConfigMap("v1", "ConfigMap", new Metadata("a"), Map.of("k", "vä")))
            .toReconcileResponse();
    assertEquals(Types.Outcome.OUTCOME_RETRY, typed.getOutcome());
    assertEquals(
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"vä\"}}",
        typed.getChildren().getObjects(0).toStringUtf8());

    // withChildren replaces what was added before; withChild adds to the set.
    var replaced =
        Response.ok()
            .withChild(Map.of("kind", "ConfigMap"))
            .withChildren(List.of(Map.of("kind", "Secret")))
            .withChild(Json.MAPPER.createObjectNode().put("kind", "Service"))
            .toFinalizeResponse();
    assertEquals(
        List.of("{\"kind\":\"Secret\"}", "{\"kind\":\"Service\"}"),
        replaced.getChildren().getObjectsList().stream().map(b -> b.toStringUtf8()).toList());
  }

  @Test
  void aChildThatIsNotAnObjectFailsTheAnswer() {
    for (Object child : new Object[] {List.of(1), "ConfigMap", null}) {
      Response response = Response.ok().withStatus(Map.of("a", 1)).withChild(child);
      assertTrue(
          response.problem().startsWith("a child must be a JSON object"), response.problem());
      var wire = response.toReconcileResponse();
      assertEquals(Types.Outcome.OUTCOME_FAILED, wire.getOutcome());
      assertTrue(wire.getMessage().startsWith("plugin bug: a child must be a JSON object"));
      assertFalse(wire.hasChildren());
      assertTrue(wire.getStatus().isEmpty());
    }
  }

  @Test
  void aHooksAnswerCarriesNoChildren() {
    for (Response response :
        List.of(
            Response.ok().withChild(Map.of("kind", "ConfigMap")),
            Response.ok().withChildren(List.of()))) {
      var wire = response.toHookResponse();
      assertEquals(Types.Outcome.OUTCOME_FAILED, wire.getOutcome());
      assertEquals(
          "plugin bug: a hook's response sets children; only Reconcile and Finalize answers carry"
              + " children",
          wire.getMessage());
    }
  }
}
