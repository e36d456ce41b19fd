package io.kplug.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import kplug.v1.PluginOuterClass;
import kplug.v1.Types;

/**
 * A plugin's answer to Reconcile, Finalize or Hook. Start with {@link #ok()}, {@link #retry} or
 * {@link #failed}, then chain what there is to report:
 *
 * <pre>{@code
 * return Response.ok()
 *     .withMessage("table users: 3 columns")
 *     .withStatus(Map.of("columns", 3))
 *     .withExtensionStatus(extension, Map.of("partitions", 4))
 *     .withCondition("TableReady", ConditionStatus.TRUE, "Created", "the table exists")
 *     .withEvent("TableCreated", "created table users");
 * }</pre>
 *
 * <p>The builders apply the operator's rules: the status keys implementation, plugin,
 * observedGeneration and conditions and the condition types Ready, PluginAvailable,
 * ExtensionsResolved and Reconciled belong to the operator, and statuses must be JSON objects. The
 * first such mistake is kept ({@link #problem()}) and the response is sent as OUTCOME_FAILED with
 * the message "plugin bug: ..." and nothing else, so that it shows on the resource.
 *
 * <p>A Finalize answer carries only the outcome, message, retry delay, events and children; the
 * rest is dropped (with a warning in the log). A hook's answer carries the outcome, message, retry
 * delay, status (written under {@code status.hooks.<plugin>}, where the operator's keys may be
 * used) and events; conditions, extension statuses and children make it OUTCOME_FAILED ("plugin
 * bug: ...").
 *
 * <p>A Response is a builder: not safe for use by several threads at once.
 */
public final class Response {
  private final Outcome outcome;
  private String message = "";
  private final Duration retryAfter;
  private byte[] status;
  private final List<PluginOuterClass.ObjectStatus> extensionStatuses = new ArrayList<>();
  private final List<Types.Condition> conditions = new ArrayList<>();
  private final List<Types.Event> events = new ArrayList<>();
  // The desired children, each compact JSON: null leaves the children as they are, a list (even
  // empty) is the whole set.
  private List<ByteString> children;
  private String problem;
  // A reserved key in the base object's status: a mistake in Reconcile and Finalize, not in a
  // hook, whose status lands under status.hooks.<plugin> where no key is the operator's.
  private String reservedKey;

  private Response(Outcome outcome, Duration retryAfter) {
    this.outcome = outcome;
    this.retryAfter = retryAfter;
  }

  /** Done: the object is reconciled (for Finalize: cleaned up, it may go). */
  public static Response ok() {
    return new Response(Outcome.OK, null);
  }

  /**
   * Not done yet, nothing wrong: call again after {@code after} (use {@link
   * Protocol#DEFAULT_RETRY_AFTER}, 10 s, when you have no better idea; the operator clamps it to [1
   * s, 1 h]).
   */
  public static Response retry(Duration after) {
    Objects.requireNonNull(after, "after");
    var response = new Response(Outcome.RETRY, after);
    if (after.isNegative()) {
      response.fail("retry delay " + after + " is negative; use Duration.ZERO to be called again");
    }
    return response;
  }

  /** Not done yet, nothing wrong: call again after the default delay, 10 s. */
  public static Response retry() {
    return retry(Protocol.DEFAULT_RETRY_AFTER);
  }

  /**
   * Failed: {@code message} says why (shown on the resource), and the operator retries with
   * backoff. Throwing from the handler does the same.
   */
  public static Response failed(String message) {
    return new Response(Outcome.FAILED, null).withMessage(message);
  }

  /** Sets the human-readable summary, shown in the resource's Reconciled condition. */
  public Response withMessage(String message) {
    this.message = Objects.requireNonNull(message, "message");
    return this;
  }

  /**
   * Sets the plugin's part of the base object's status: a JSON object (a {@code Map}, a record or
   * bean, a Jackson {@code ObjectNode}) merged into the object's {@code .status} by server-side
   * apply. It replaces a status set before. From {@link Plugin#hook}, it is written under {@code
   * status.hooks.<plugin>}, where the operator's reserved keys may be used.
   */
  public Response withStatus(Object status) {
    ObjectNode object = object(status, "status");
    if (object == null) {
      return this;
    }
    String reserved = reservedKey(object, "status");
    if (reserved != null && reservedKey == null) {
      reservedKey = reserved;
    }
    this.status = Json.encode(object);
    return this;
  }

  /**
   * Adds the status of an extension the plugin was sent (one of {@link Request#extensions()}),
   * merged into that object's {@code .status}.
   */
  public Response withExtensionStatus(KubeObject extension, Object status) {
    if (extension == null) {
      fail(
          "extension status target is null: pass an extension from the request"
              + " (Request.extension returns an Optional: none of that kind was sent)");
      return this;
    }
    String what = "status of " + extension.kind() + " " + extension.name();
    ObjectNode object = object(status, what);
    if (object == null) {
      return this;
    }
    String reserved = reservedKey(object, what);
    if (reserved != null) {
      fail(reserved);
      return this;
    }
    extensionStatuses.add(
        PluginOuterClass.ObjectStatus.newBuilder()
            .setTarget(extension.ref().toProto())
            .setStatus(ByteString.copyFrom(Json.encode(object)))
            .build());
    return this;
  }

  /**
   * Adds a Kubernetes-style condition on the base object, e.g. {@code withCondition("TableReady",
   * ConditionStatus.TRUE, "Created", "the table exists")}. {@code type} and {@code reason} are
   * CamelCase.
   */
  public Response withCondition(
      String type, ConditionStatus status, String reason, String message) {
    if (type == null || type.isEmpty()) {
      fail("condition type is empty; use a CamelCase type such as \"TableReady\"");
      return this;
    }
    if (Protocol.RESERVED_CONDITION_TYPES.contains(type)) {
      fail(
          "condition type \""
              + type
              + "\" is reserved for the operator (it owns "
              + sorted(Protocol.RESERVED_CONDITION_TYPES)
              + "); use a type of your own, e.g. \"TableReady\"");
      return this;
    }
    conditions.add(
        Types.Condition.newBuilder()
            .setType(type)
            .setStatus(Objects.requireNonNull(status, "status").toProto())
            .setReason(Objects.requireNonNullElse(reason, ""))
            .setMessage(Objects.requireNonNullElse(message, ""))
            .build());
    return this;
  }

  /** Adds a Normal Kubernetes Event on the base object. */
  public Response withEvent(String reason, String message) {
    return event(Types.EventType.EVENT_TYPE_NORMAL, reason, message, null, false);
  }

  /** Adds a Warning Kubernetes Event on the base object. */
  public Response withWarning(String reason, String message) {
    return event(Types.EventType.EVENT_TYPE_WARNING, reason, message, null, false);
  }

  /**
   * Adds a Normal Event on {@code regarding}: the base object or one of the extensions the plugin
   * was sent.
   */
  public Response withEventOn(KubeObject regarding, String reason, String message) {
    return event(Types.EventType.EVENT_TYPE_NORMAL, reason, message, regarding, true);
  }

  /**
   * Adds a Warning Event on {@code regarding}: the base object or one of the extensions the plugin
   * was sent.
   */
  public Response withWarningOn(KubeObject regarding, String reason, String message) {
    return event(Types.EventType.EVENT_TYPE_WARNING, reason, message, regarding, true);
  }

  private Response event(
      Types.EventType type, String reason, String message, KubeObject regarding, boolean explicit) {
    var event =
        Types.Event.newBuilder()
            .setType(type)
            .setReason(Objects.requireNonNullElse(reason, ""))
            .setMessage(Objects.requireNonNullElse(message, ""));
    if (explicit) {
      if (regarding == null) {
        fail(
            "event \""
                + reason
                + "\" is about a null object: pass the request's object() or one of its"
                + " extensions()");
        return this;
      }
      event.setRegarding(regarding.ref().toProto());
    }
    events.add(event.build());
    return this;
  }

  /**
   * Adds a child: a Kubernetes object the operator applies for this base object, with {@code
   * apiVersion}, {@code kind}, {@code metadata.name} and the fields the plugin manages. Anything
   * Jackson serializes to a JSON object will do: a {@code Map}, a record or bean, a Jackson {@code
   * ObjectNode}, or a typed object of a Kubernetes client. Its kind must be one the offer declares
   * ({@link Offer#withChild}); the operator puts it in the base object's namespace, owns it and
   * watches it.
   *
   * <pre>{@code
   * return Response.ok()
   *     .withChild(Map.of(
   *         "apiVersion", "v1",
   *         "kind", "ConfigMap",
   *         "metadata", Map.of("name", "greeting-" + request.name()),
   *         "data", Map.of("greeting", "hello, world")));
   * }</pre>
   *
   * <p>An answer that adds a child, or calls {@link #withChildren}, carries the whole set of
   * desired children: on OK the operator deletes the children it no longer lists. An answer with
   * neither leaves the children as they are. Only Reconcile and Finalize answers carry children.
   */
  public Response withChild(Object child) {
    if (children == null) {
      children = new ArrayList<>();
    }
    ObjectNode object = object(child, "a child");
    if (object != null) {
      children.add(ByteString.copyFrom(Json.encode(object)));
    }
    return this;
  }

  /**
   * Sets the whole set of desired children (see {@link #withChild}), replacing those added before.
   * An empty set deletes every child on OK.
   */
  public Response withChildren(Iterable<?> children) {
    Objects.requireNonNull(children, "children");
    this.children = new ArrayList<>();
    for (Object child : children) {
      withChild(child);
    }
    return this;
  }

  private ObjectNode object(Object value, String what) {
    JsonNode tree;
    try {
      tree = Json.toTree(value, what);
    } catch (IllegalArgumentException e) {
      fail(e.getMessage());
      return null;
    }
    if (!(tree instanceof ObjectNode object)) {
      fail(what + " must be a JSON object (e.g. a Map or a record), got " + Json.kindOf(tree));
      return null;
    }
    return object;
  }

  private static String reservedKey(ObjectNode status, String what) {
    for (String key : Protocol.RESERVED_STATUS_KEYS) {
      if (status.has(key)) {
        return what
            + ": key \""
            + key
            + "\" is reserved for the operator (it owns "
            + sorted(Protocol.RESERVED_STATUS_KEYS)
            + "); report it under another key, or as a condition";
      }
    }
    return null;
  }

  private static String sorted(List<String> names) {
    return String.join(", ", names.stream().sorted().toList());
  }

  private void fail(String why) {
    if (problem == null) {
      problem = why;
    }
  }

  /** The outcome the response was built with. */
  public Outcome outcome() {
    return outcome;
  }

  /** The response's message. */
  public String message() {
    return message;
  }

  /**
   * The first mistake made while building the response (a reserved key, a status that is not a JSON
   * object...), or null. A response with a mistake is sent as OUTCOME_FAILED "plugin bug:
   * <problem>". (A reserved key in the status is no mistake in a hook's answer.)
   */
  public String problem() {
    return problem != null ? problem : reservedKey;
  }

  /**
   * The first mistake of this response as a hook's answer, or null: conditions, extension statuses
   * and children are not a hook's to set, and a reserved status key is none (its status lands under
   * {@code status.hooks.<plugin>}).
   */
  String hookProblem() {
    if (!conditions.isEmpty() || !extensionStatuses.isEmpty()) {
      return "a hook's response sets conditions or extension statuses; a hook writes only its"
          + " status (under status.hooks.<plugin>) and events";
    }
    if (children != null) {
      return "a hook's response sets children; only Reconcile and Finalize answers carry children";
    }
    return problem;
  }

  /** The response as sent: itself, or the FAILED answer that replaces it when it has a mistake. */
  private Response sent() {
    String mistake = problem();
    return mistake == null ? this : failed("plugin bug: " + mistake);
  }

  /** Whether a Finalize answer would drop parts of this response. */
  boolean dropsInFinalize() {
    return problem() == null
        && (status != null || !extensionStatuses.isEmpty() || !conditions.isEmpty());
  }

  /** The response as sent in answer to Reconcile. */
  public PluginOuterClass.ReconcileResponse toReconcileResponse() {
    Response s = sent();
    var wire =
        PluginOuterClass.ReconcileResponse.newBuilder()
            .setOutcome(s.outcome.toProto())
            .setMessage(s.message)
            .addAllExtensionStatuses(s.extensionStatuses)
            .addAllConditions(s.conditions)
            .addAllEvents(s.events);
    if (s.retryAfter != null) {
      wire.setRetryAfter(Durations.toProto(s.retryAfter));
    }
    if (s.status != null) {
      wire.setStatus(ByteString.copyFrom(s.status));
    }
    if (s.children != null) {
      wire.setChildren(childrenProto(s.children));
    }
    return wire.build();
  }

  private static Types.Children childrenProto(List<ByteString> children) {
    return Types.Children.newBuilder().addAllObjects(children).build();
  }

  /**
   * The response as sent in answer to Finalize: the outcome, message, retry delay, events and the
   * children still wanted while clean-up goes on (statuses and conditions are dropped: the object
   * is going away; once the answer is OK, every child goes).
   */
  public PluginOuterClass.FinalizeResponse toFinalizeResponse() {
    Response s = sent();
    var wire =
        PluginOuterClass.FinalizeResponse.newBuilder()
            .setOutcome(s.outcome.toProto())
            .setMessage(s.message)
            .addAllEvents(s.events);
    if (s.retryAfter != null) {
      wire.setRetryAfter(Durations.toProto(s.retryAfter));
    }
    if (s.children != null) {
      wire.setChildren(childrenProto(s.children));
    }
    return wire.build();
  }

  /**
   * The response as sent in answer to Hook: the outcome, message, retry delay, status and events.
   * Conditions, extension statuses and children are not a hook's to set: a response with them is
   * sent as OUTCOME_FAILED "plugin bug: ...", like the other mistakes.
   */
  public PluginOuterClass.HookResponse toHookResponse() {
    String mistake = hookProblem();
    Response s = mistake == null ? this : failed("plugin bug: " + mistake);
    var wire =
        PluginOuterClass.HookResponse.newBuilder()
            .setOutcome(s.outcome.toProto())
            .setMessage(s.message)
            .addAllEvents(s.events);
    if (s.retryAfter != null) {
      wire.setRetryAfter(Durations.toProto(s.retryAfter));
    }
    if (s.status != null) {
      wire.setStatus(ByteString.copyFrom(s.status));
    }
    return wire.build();
  }
}
