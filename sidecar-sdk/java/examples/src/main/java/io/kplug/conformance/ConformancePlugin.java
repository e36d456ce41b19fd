package io.kplug.conformance;

import io.kplug.sidecar.AdmissionRequest;
import io.kplug.sidecar.Call;
import io.kplug.sidecar.CallPolicy;
import io.kplug.sidecar.ConditionStatus;
import io.kplug.sidecar.Defaults;
import io.kplug.sidecar.FailurePolicy;
import io.kplug.sidecar.GroupKind;
import io.kplug.sidecar.Hook;
import io.kplug.sidecar.HookBehaviour;
import io.kplug.sidecar.HookCall;
import io.kplug.sidecar.HookPhase;
import io.kplug.sidecar.Info;
import io.kplug.sidecar.Kplug;
import io.kplug.sidecar.KubeObject;
import io.kplug.sidecar.MutateCall;
import io.kplug.sidecar.Mutation;
import io.kplug.sidecar.Offer;
import io.kplug.sidecar.Plugin;
import io.kplug.sidecar.Protocol;
import io.kplug.sidecar.Readiness;
import io.kplug.sidecar.ReadinessGate;
import io.kplug.sidecar.Request;
import io.kplug.sidecar.Response;
import io.kplug.sidecar.Validation;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Java SDK's conformance plugin: its behaviour is driven by the base object's {@code
 * spec.conformance} exactly as sidecar-sdk/conformance/README.md specifies, so that every SDK's
 * conformance plugin answers the cases in cases.json identically.
 */
public final class ConformancePlugin implements Plugin {
  private static final String GROUP = "conformance.kplug.dev";
  private static final GroupKind WIDGET = new GroupKind(GROUP, "Widget");

  /** The plugin's description, as cases.json's "plugin" gives it. */
  public static final Info INFO =
      Info.builder("conformance")
          .version("1.0.0")
          .description("kplug SDK conformance plugin")
          .offer(
              Offer.of(
                      WIDGET,
                      "Conformance",
                      new GroupKind(GROUP, "WidgetExtensionA"),
                      new GroupKind(GROUP, "WidgetExtensionB"))
                  .withChild("v1", "ConfigMap")
                  .withChild("apps/v1", "Deployment"))
          .hook(
              new Hook(
                  "audit", WIDGET, HookPhase.BEFORE_RECONCILE, HookBehaviour.SYNC_ENFORCE, -10))
          .hook(new Hook("record", WIDGET, HookPhase.AFTER_RECONCILE, HookBehaviour.SYNC_BYPASS, 0))
          .hook(
              new Hook("backup", WIDGET, HookPhase.BEFORE_FINALIZE, HookBehaviour.SYNC_ENFORCE, 0))
          .hook(
              new Hook(
                  "notify",
                  new GroupKind(GROUP, "Gadget"),
                  HookPhase.AFTER_FINALIZE,
                  HookBehaviour.ASYNC,
                  5))
          .callPolicy(CallPolicy.deadline(Call.RECONCILE, Duration.ofSeconds(120)))
          .callPolicy(new CallPolicy(Call.VALIDATE, Duration.ofSeconds(2), FailurePolicy.FAIL))
          .callPolicy(new CallPolicy(Call.DEFAULT, Duration.ofMillis(1500), FailurePolicy.IGNORE))
          .callPolicy(new CallPolicy(Call.HOOK, null, null))
          .mutation("apps/v1", "Deployment")
          .build();

  /** What the "raise" action throws. */
  public static final class ConformanceError extends Exception {
    private static final long serialVersionUID = 1L;

    ConformanceError(String message) {
      super(message);
    }
  }

  private final ReadinessGate gate = new ReadinessGate();

  @Override
  public Readiness readiness() {
    return gate.readiness();
  }

  /** Steps 1 to 8 of the README (4b and 4c included). */
  @Override
  public Response reconcile(Request request) throws ConformanceError {
    Map<String, Object> c = directives(request.spec());
    if ("setReadiness".equals(c.get("action"))) {
      if (Boolean.TRUE.equals(c.get("ready"))) {
        gate.setReady();
      } else {
        gate.setNotReady(text(c, "message"));
      }
      return Response.ok().withMessage("readiness set");
    }
    Response response = outcome(c);
    Object status = withEcho(c, () -> echoOf(request));
    if (Boolean.TRUE.equals(c.get("echoChildren"))) {
      Map<String, Object> merged = new LinkedHashMap<>();
      if (status instanceof Map<?, ?> m) {
        m.forEach((k, v) -> merged.put(String.valueOf(k), v));
      }
      merged.put(
          "observedChildren",
          request.children().stream().map(child -> child.kind() + "/" + child.name()).toList());
      status = merged;
    }
    if (status != null || c.containsKey("status")) {
      response.withStatus(status);
    }
    if (c.get("children") instanceof List<?> children) {
      response.withChildren(children);
    }
    if (c.containsKey("extensionStatus")) {
      for (KubeObject extension : request.extensions()) {
        response.withExtensionStatus(extension, c.get("extensionStatus"));
      }
    }
    for (Object item : list(c, "conditions")) {
      Map<String, Object> condition = map(item);
      ConditionStatus s = ConditionStatus.UNKNOWN;
      if (condition.get("status") instanceof Boolean b) {
        s = b ? ConditionStatus.TRUE : ConditionStatus.FALSE;
      }
      response.withCondition(
          text(condition, "type"), s, text(condition, "reason"), text(condition, "message"));
    }
    addEvents(response, request, c);
    return response;
  }

  /** Steps 2 and 7 of the README. */
  @Override
  public Response finalize(Request request) throws ConformanceError {
    Map<String, Object> c = directives(request.spec());
    Response response = outcome(c);
    addEvents(response, request, c);
    return response;
  }

  /** The README's Validate: errors (with or without a value), warnings, echo, and "raise". */
  @Override
  public Validation validate(AdmissionRequest request) throws ConformanceError {
    Map<String, Object> c = directives(request.spec());
    raise(c);
    Validation verdict = Validation.allowed();
    for (Object item : list(c, "errors")) {
      Map<String, Object> e = map(item);
      if (e.containsKey("value")) {
        verdict.withError(text(e, "path"), e.get("value"), text(e, "message"));
      } else {
        verdict.withErrorAt(text(e, "path"), text(e, "message"));
      }
    }
    warnings(c).forEach(verdict::withWarning);
    if (Boolean.TRUE.equals(c.get("echo"))) {
      String old = request.oldObject().map(o -> o.kind() + "/" + o.name()).orElse("none");
      verdict.withWarning(
          String.format(
              "%s %s %s/%s old=%s",
              request.operation(), request.implementation(), request.kind(), request.name(), old));
    }
    return verdict;
  }

  /** The README's Default: patch (through the SDK's builder), warnings, and "raise". */
  @Override
  public Defaults defaults(AdmissionRequest request) throws ConformanceError {
    Map<String, Object> c = directives(request.spec());
    raise(c);
    Defaults defaults = Defaults.none();
    for (Object item : list(c, "patch")) {
      Map<String, Object> op = map(item);
      switch (text(op, "op")) {
        case "add" -> defaults.add(text(op, "path"), op.get("value"));
        case "replace" -> defaults.replace(text(op, "path"), op.get("value"));
        default -> defaults.remove(text(op, "path"));
      }
    }
    warnings(c).forEach(defaults::withWarning);
    return defaults;
  }

  /**
   * The README's Mutate: {@code c} is the base object's {@code spec.conformance} (none without a
   * base); "raise", patch (through the SDK's builder), warnings and echo.
   */
  @Override
  public Mutation mutate(MutateCall call) throws ConformanceError {
    Map<String, Object> c = call.base().map(b -> directives(b.spec())).orElse(Map.of());
    raise(c);
    Mutation mutation = Mutation.none();
    for (Object item : list(c, "patch")) {
      Map<String, Object> op = map(item);
      switch (text(op, "op")) {
        case "add" -> mutation.add(text(op, "path"), op.get("value"));
        case "replace" -> mutation.replace(text(op, "path"), op.get("value"));
        default -> mutation.remove(text(op, "path"));
      }
    }
    warnings(c).forEach(mutation::withWarning);
    if (Boolean.TRUE.equals(c.get("echo"))) {
      KubeObject object = call.object();
      String live = call.live().map(KubeObject::name).orElse("none");
      mutation.withWarning(
          String.format(
              "%s %s/%s live=%s", call.implementation(), object.kind(), object.name(), live));
    }
    return mutation;
  }

  /** The README's Hook: the outcome and events as for Finalize, status and echo. */
  @Override
  public Response hook(HookCall call) throws ConformanceError {
    Request request = call.request();
    Map<String, Object> c = directives(request.spec());
    Response response = outcome(c);
    Object status =
        withEcho(
            c,
            () -> {
              Map<String, Object> echo = new LinkedHashMap<>();
              echo.put("hook", call.hook());
              echo.put("phase", call.phase() == null ? null : call.phase().name());
              echo.put("implementation", request.implementation());
              echo.put("name", request.name());
              echo.put("namespace", request.namespace());
              echo.put("extensions", extensionNames(request));
              echo.put("outcome", call.outcome() == null ? null : call.outcome().name());
              echo.put("message", call.message());
              return echo;
            });
    if (status != null || c.containsKey("status")) {
      response.withStatus(status);
    }
    addEvents(response, request, c);
    return response;
  }

  /**
   * {@code c.status}, with {@code {"echo": ...}} merged into it when {@code c.echo} is true; null
   * when neither is there.
   */
  private static Object withEcho(Map<String, Object> c, java.util.function.Supplier<Object> echo) {
    Object status = c.get("status");
    if (!Boolean.TRUE.equals(c.get("echo"))) {
      return status;
    }
    Map<String, Object> merged = new LinkedHashMap<>();
    if (status instanceof Map<?, ?> m) {
      m.forEach((k, v) -> merged.put(String.valueOf(k), v));
    }
    merged.put("echo", echo.get());
    return merged;
  }

  private static Map<String, Object> echoOf(Request request) {
    Map<String, Object> echo = new LinkedHashMap<>();
    echo.put("implementation", request.implementation());
    echo.put("name", request.name());
    echo.put("namespace", request.namespace());
    echo.put("generation", request.generation());
    echo.put("extensions", extensionNames(request));
    echo.put("data", request.object().get("spec", "data").orElse(null));
    return echo;
  }

  private static List<String> extensionNames(Request request) {
    return request.extensions().stream().map(e -> e.kind() + "/" + e.name()).toList();
  }

  private static Map<String, Object> directives(Map<String, Object> spec) {
    return map(spec.get("conformance"));
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> map(Object value) {
    return value instanceof Map<?, ?> m ? (Map<String, Object>) m : Map.of();
  }

  private static String text(Map<String, Object> m, String key) {
    return m.get(key) instanceof String s ? s : "";
  }

  private static List<?> list(Map<String, Object> m, String key) {
    return m.get(key) instanceof List<?> l ? l : List.of();
  }

  /** The "warnings" directive's items; one that is not a string is an empty warning. */
  private static List<String> warnings(Map<String, Object> c) {
    var all = new ArrayList<String>();
    for (Object w : list(c, "warnings")) {
      all.add(w instanceof String s ? s : "");
    }
    return all;
  }

  /** The README's "raise" for Validate, Default and Mutate. */
  private static void raise(Map<String, Object> c) throws ConformanceError {
    if ("raise".equals(c.get("action"))) {
      throw new ConformanceError(text(c, "message"));
    }
  }

  private static Response outcome(Map<String, Object> c) throws ConformanceError {
    String message = text(c, "message");
    String action = c.get("action") instanceof String s ? s : "ok";
    return switch (action) {
      case "ok" -> Response.ok().withMessage(message);
      case "retry" -> {
        Duration after = Protocol.DEFAULT_RETRY_AFTER;
        if (c.get("retryAfterSeconds") instanceof Number n) {
          after = Duration.ofNanos(Math.round(n.doubleValue() * 1e9));
        }
        yield Response.retry(after).withMessage(message);
      }
      case "fail" -> Response.failed(message);
      case "raise" -> throw new ConformanceError(message);
      default -> throw new ConformanceError("unknown conformance action \"" + action + "\"");
    };
  }

  private static void addEvents(Response response, Request request, Map<String, Object> c) {
    for (Object item : list(c, "events")) {
      Map<String, Object> event = map(item);
      String reason = text(event, "reason");
      String message = text(event, "message");
      boolean warning = Boolean.TRUE.equals(event.get("warning"));
      KubeObject regarding = null;
      boolean explicit = false;
      Object r = event.get("regarding");
      if ("base".equals(r)) {
        regarding = request.object();
        explicit = true;
      } else if (r instanceof Number n && !(r instanceof Double)) {
        long i = n.longValue();
        if (i >= 0 && i < request.extensions().size()) {
          regarding = request.extensions().get((int) i);
          explicit = true;
        }
      }
      if (!explicit) {
        if (warning) {
          response.withWarning(reason, message);
        } else {
          response.withEvent(reason, message);
        }
      } else if (warning) {
        response.withWarningOn(regarding, reason, message);
      } else {
        response.withEventOn(regarding, reason, message);
      }
    }
  }

  /** Runs the conformance plugin as a process (settings from the environment). */
  public static void main(String[] args) {
    Kplug.main(INFO, new ConformancePlugin());
  }
}
