package io.kplug.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import com.google.protobuf.Duration;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.kplug.sidecar.PluginServer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import kplug.v1.PluginGrpc;
import kplug.v1.PluginOuterClass;
import kplug.v1.Types;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared cases of sidecar-sdk/conformance/cases.json, in file order against one instance of the
 * conformance plugin served by the SDK on a real socket, through a real gRPC client, compared as
 * the conformance README says (JSON by value, statuses also compact).
 */
class ConformanceCasesTest {
  private static final ObjectMapper JSON =
      JsonMapper.builder().enable(JsonWriteFeature.COMBINE_UNICODE_SURROGATES_IN_UTF8).build();
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  @TempDir static Path dir;

  private static EventLoopGroup group;
  private static PluginServer server;
  private static ManagedChannel channel;
  private static PluginGrpc.PluginBlockingStub plugin;

  @BeforeAll
  static void serve() throws Exception {
    server =
        PluginServer.builder(ConformancePlugin.INFO, new ConformancePlugin())
            .socketDir(dir)
            .heartbeatInterval(java.time.Duration.ofSeconds(5))
            .build();
    server.start();
    group = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
    channel =
        NettyChannelBuilder.forAddress(new DomainSocketAddress(server.socketPath().toString()))
            .eventLoopGroup(group)
            .channelType(EpollDomainSocketChannel.class)
            .withOption(ChannelOption.SO_KEEPALIVE, null)
            .overrideAuthority("localhost")
            .usePlaintext()
            .maxInboundMessageSize(64 << 20)
            .build();
    plugin = PluginGrpc.newBlockingStub(channel);
  }

  @AfterAll
  static void stop() {
    channel.shutdownNow();
    server.stop();
    group.shutdownGracefully(0, 0, TimeUnit.SECONDS);
  }

  @TestFactory
  List<DynamicTest> cases() throws IOException {
    Path file = Path.of(System.getProperty("kplug.root"), "sidecar-sdk/conformance/cases.json");
    JsonNode all = JSON.readTree(file.toFile()).get("cases");
    var tests = new ArrayList<DynamicTest>();
    for (JsonNode c : all) {
      tests.add(
          DynamicTest.dynamicTest(
              c.get("name").asText(), () -> check(c.get("request"), c.get("expect"))));
    }
    return tests;
  }

  private static void check(JsonNode request, JsonNode expect) {
    var stub = plugin.withDeadlineAfter(30, TimeUnit.SECONDS);
    JsonNode actual =
        switch (request.get("rpc").asText()) {
          case "GetInfo" ->
              info(stub.getInfo(PluginOuterClass.GetInfoRequest.getDefaultInstance()));
          case "Probe" -> {
            var probe = stub.probe(PluginOuterClass.ProbeRequest.getDefaultInstance());
            yield NODES
                .objectNode()
                .put("ready", probe.getReady())
                .put("message", probe.getMessage());
          }
          case "Reconcile" ->
              reconcile(
                  stub.reconcile(
                      PluginOuterClass.ReconcileRequest.newBuilder()
                          .setImplementation(request.path("implementation").asText())
                          .setObject(object(request))
                          .addAllExtensions(list(request.path("extensions")))
                          .addAllChildren(list(request.path("children")))
                          .build()));
          case "Finalize" -> {
            var r =
                stub.finalize(
                    PluginOuterClass.FinalizeRequest.newBuilder()
                        .setImplementation(request.path("implementation").asText())
                        .setObject(object(request))
                        .addAllExtensions(list(request.path("extensions")))
                        .build());
            yield outcome(
                    r.getOutcome(), r.getMessage(), r.hasRetryAfter() ? r.getRetryAfter() : null)
                .set("events", events(r.getEventsList()));
          }
          case "Hook" -> {
            var r =
                stub.hook(
                    PluginOuterClass.HookRequest.newBuilder()
                        .setHook(request.path("hook").asText())
                        .setPhase(
                            Types.HookPhase.valueOf("HOOK_PHASE_" + request.path("phase").asText()))
                        .setImplementation(request.path("implementation").asText())
                        .setObject(object(request))
                        .addAllExtensions(list(request.path("extensions")))
                        .setOutcome(
                            Types.Outcome.valueOf("OUTCOME_" + request.path("outcome").asText()))
                        .setMessage(request.path("message").asText())
                        .build());
            ObjectNode out =
                outcome(
                    r.getOutcome(), r.getMessage(), r.hasRetryAfter() ? r.getRetryAfter() : null);
            out.set("status", status(r.getStatus()));
            yield out.set("events", events(r.getEventsList()));
          }
          case "Validate" ->
              grpc(
                  () -> {
                    var r =
                        stub.validate(
                            PluginOuterClass.ValidateRequest.newBuilder()
                                .setImplementation(request.path("implementation").asText())
                                .setOperation(operation(request))
                                .setObject(object(request))
                                .setOldObject(oldObject(request))
                                .build());
                    ArrayNode errors = NODES.arrayNode();
                    r.getErrorsList()
                        .forEach(
                            e ->
                                errors.add(
                                    NODES
                                        .objectNode()
                                        .put("path", e.getPath())
                                        .put("value", e.getValue())
                                        .put("message", e.getMessage())));
                    ObjectNode out = NODES.objectNode();
                    out.set("errors", errors);
                    return out.set("warnings", strings(r.getWarningsList()));
                  });
          case "Default" ->
              grpc(
                  () -> {
                    var r =
                        stub.default_(
                            PluginOuterClass.DefaultRequest.newBuilder()
                                .setImplementation(request.path("implementation").asText())
                                .setOperation(operation(request))
                                .setObject(object(request))
                                .setOldObject(oldObject(request))
                                .build());
                    ObjectNode out = NODES.objectNode();
                    out.set("patch", status(r.getPatch()));
                    return out.set("warnings", strings(r.getWarningsList()));
                  });
          case "Mutate" ->
              grpc(
                  () -> {
                    var r =
                        stub.mutate(
                            PluginOuterClass.MutateRequest.newBuilder()
                                .setImplementation(request.path("implementation").asText())
                                .setObject(object(request))
                                .setLive(optional(request, "live"))
                                .setBase(optional(request, "base"))
                                .build());
                    ObjectNode out = NODES.objectNode();
                    out.set("patch", status(r.getPatch()));
                    return out.set("warnings", strings(r.getWarningsList()));
                  });
          default -> throw new AssertionError("unknown rpc " + request.get("rpc"));
        };
    JsonNode want = expect;
    if (request.get("rpc").asText().equals("Reconcile") && !expect.has("children")) {
      // A Reconcile case that says nothing of children expects none: the answer leaves them as
      // they are.
      want = ((ObjectNode) expect).deepCopy().set("children", NullNode.getInstance());
    }
    compare(want, actual);
  }

  /** Each key of {@code expect} against {@code actual}; {@code message_contains} as a substring. */
  private static void compare(JsonNode expect, JsonNode actual) {
    for (Map.Entry<String, JsonNode> field : expect.properties()) {
      if (field.getKey().equals("message_contains")) {
        String message = actual.path("message").asText();
        assertTrue(
            message.contains(field.getValue().asText()),
            "message " + message + " lacks " + field.getValue());
      } else {
        assertTrue(
            sameJson(field.getValue(), actual.get(field.getKey())),
            field.getKey()
                + ": expected "
                + field.getValue()
                + ", got "
                + actual.get(field.getKey()));
      }
    }
  }

  /** JSON values by value: object key order is free, and 1 equals 1.0. */
  private static boolean sameJson(JsonNode a, JsonNode b) {
    if (a == null || b == null) {
      return a == b;
    }
    if (a.isNumber() && b.isNumber()) {
      return a.decimalValue().compareTo(b.decimalValue()) == 0;
    }
    if (a.isObject() && b.isObject()) {
      if (a.size() != b.size()) {
        return false;
      }
      for (Iterator<String> names = a.fieldNames(); names.hasNext(); ) {
        String name = names.next();
        if (!sameJson(a.get(name), b.get(name))) {
          return false;
        }
      }
      return true;
    }
    if (a.isArray() && b.isArray()) {
      if (a.size() != b.size()) {
        return false;
      }
      for (int i = 0; i < a.size(); i++) {
        if (!sameJson(a.get(i), b.get(i))) {
          return false;
        }
      }
      return true;
    }
    return a.equals(b);
  }

  /** A call expected to answer, or to fail with {grpc_code, message}. */
  private static JsonNode grpc(Supplier<JsonNode> call) {
    try {
      return call.get();
    } catch (StatusRuntimeException e) {
      return NODES
          .objectNode()
          .put("grpc_code", e.getStatus().getCode().name())
          .put("message", e.getStatus().getDescription());
    }
  }

  /** A JSON value as the runner sends it: compact UTF-8. */
  private static ByteString encode(JsonNode value) {
    try {
      return ByteString.copyFrom(JSON.writeValueAsBytes(value));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static ByteString object(JsonNode request) {
    if (request.has("object_raw")) {
      return ByteString.copyFromUtf8(request.get("object_raw").asText());
    }
    return encode(request.get("object"));
  }

  private static ByteString oldObject(JsonNode request) {
    return optional(request, "old_object");
  }

  /** The request's object at {@code key} encoded; empty bytes (the protocol's none) without it. */
  private static ByteString optional(JsonNode request, String key) {
    return request.has(key) ? encode(request.get(key)) : ByteString.EMPTY;
  }

  /** Each value of a list JSON-encoded (absent: none). */
  private static List<ByteString> list(JsonNode values) {
    var out = new ArrayList<ByteString>();
    for (JsonNode e : values) {
      out.add(encode(e));
    }
    return out;
  }

  private static Types.Operation operation(JsonNode request) {
    return Types.Operation.valueOf("OPERATION_" + request.get("operation").asText());
  }

  /** Status bytes decoded, null when empty; they must be compact UTF-8 JSON too. */
  private static JsonNode status(ByteString bytes) {
    if (bytes.isEmpty()) {
      return NullNode.getInstance();
    }
    try {
      JsonNode decoded = JSON.readTree(bytes.toByteArray());
      assertEquals(
          JSON.writeValueAsBytes(decoded).length,
          bytes.size(),
          "not compact JSON: " + bytes.toStringUtf8());
      return decoded;
    } catch (IOException e) {
      return fail("not JSON: " + bytes.toStringUtf8(), e);
    }
  }

  private static ObjectNode outcome(Types.Outcome outcome, String message, Duration retryAfter) {
    ObjectNode out =
        NODES
            .objectNode()
            .put("outcome", outcome.name().substring("OUTCOME_".length()))
            .put("message", message);
    if (retryAfter == null) {
      out.putNull("retry_after_seconds");
    } else {
      out.put("retry_after_seconds", retryAfter.getSeconds() + retryAfter.getNanos() / 1e9);
    }
    return out;
  }

  private static ObjectNode reconcile(PluginOuterClass.ReconcileResponse r) {
    ObjectNode out =
        outcome(r.getOutcome(), r.getMessage(), r.hasRetryAfter() ? r.getRetryAfter() : null);
    out.set("status", status(r.getStatus()));
    ArrayNode statuses = NODES.arrayNode();
    for (var s : r.getExtensionStatusesList()) {
      ObjectNode entry = NODES.objectNode();
      entry.set("target", ref(s.getTarget()));
      entry.set("status", status(s.getStatus()));
      statuses.add(entry);
    }
    out.set("extension_statuses", statuses);
    ArrayNode conditions = NODES.arrayNode();
    for (var c : r.getConditionsList()) {
      String status =
          switch (c.getStatus()) {
            case CONDITION_STATUS_TRUE -> "True";
            case CONDITION_STATUS_FALSE -> "False";
            default -> "Unknown";
          };
      conditions.add(
          NODES
              .objectNode()
              .put("type", c.getType())
              .put("status", status)
              .put("reason", c.getReason())
              .put("message", c.getMessage()));
    }
    out.set("conditions", conditions);
    out.set("children", children(r));
    return out.set("events", events(r.getEventsList()));
  }

  /** The answer's children, each decoded; null when it carries no children message. */
  private static JsonNode children(PluginOuterClass.ReconcileResponse r) {
    if (!r.hasChildren()) {
      return NullNode.getInstance();
    }
    ArrayNode out = NODES.arrayNode();
    for (ByteString child : r.getChildren().getObjectsList()) {
      try {
        out.add(JSON.readTree(child.toByteArray()));
      } catch (IOException e) {
        throw new AssertionError("a child is not JSON: " + child.toStringUtf8(), e);
      }
    }
    return out;
  }

  private static ArrayNode events(List<Types.Event> events) {
    ArrayNode out = NODES.arrayNode();
    for (var e : events) {
      ObjectNode event =
          NODES
              .objectNode()
              .put("type", e.getType() == Types.EventType.EVENT_TYPE_WARNING ? "Warning" : "Normal")
              .put("reason", e.getReason())
              .put("message", e.getMessage());
      event.set("regarding", e.hasRegarding() ? ref(e.getRegarding()) : NullNode.getInstance());
      out.add(event);
    }
    return out;
  }

  private static ObjectNode ref(Types.ObjectRef r) {
    return NODES
        .objectNode()
        .put("apiVersion", r.getApiVersion())
        .put("kind", r.getKind())
        .put("namespace", r.getNamespace())
        .put("name", r.getName());
  }

  private static ArrayNode strings(List<String> strings) {
    ArrayNode out = NODES.arrayNode();
    strings.forEach(out::add);
    return out;
  }

  private static ObjectNode groupKind(Types.GroupKind gk) {
    return NODES.objectNode().put("group", gk.getGroup()).put("kind", gk.getKind());
  }

  private static JsonNode info(PluginOuterClass.GetInfoResponse r) {
    ObjectNode out =
        NODES
            .objectNode()
            .put("name", r.getName())
            .put("version", r.getVersion())
            .put("protocol", r.getProtocol())
            .put("description", r.getDescription());
    ArrayNode offers = NODES.arrayNode();
    for (var o : r.getOffersList()) {
      ObjectNode offer = NODES.objectNode();
      offer.set("base", groupKind(o.getBase()));
      offer.put("implementation", o.getImplementation());
      ArrayNode extensions = NODES.arrayNode();
      o.getExtensionsList().forEach(e -> extensions.add(groupKind(e)));
      offer.set("extensions", extensions);
      ArrayNode children = NODES.arrayNode();
      o.getChildrenList()
          .forEach(
              c ->
                  children.add(
                      NODES
                          .objectNode()
                          .put("group", c.getGroup())
                          .put("version", c.getVersion())
                          .put("kind", c.getKind())));
      offers.add(offer.set("children", children));
    }
    out.set("offers", offers);
    ArrayNode capabilities = NODES.arrayNode();
    r.getCapabilitiesList()
        .forEach(c -> capabilities.add(c.name().substring("CAPABILITY_".length())));
    out.set("capabilities", capabilities);
    ArrayNode hooks = NODES.arrayNode();
    for (var h : r.getHooksList()) {
      ObjectNode hook = NODES.objectNode().put("name", h.getName());
      hook.set("base", groupKind(h.getBase()));
      hooks.add(
          hook.put("phase", h.getPhase().name().substring("HOOK_PHASE_".length()))
              .put("behaviour", h.getBehaviour().name().substring("HOOK_BEHAVIOUR_".length()))
              .put("order", h.getOrder()));
    }
    out.set("hooks", hooks);
    ArrayNode policies = NODES.arrayNode();
    for (var p : r.getCallPoliciesList()) {
      ObjectNode policy =
          NODES.objectNode().put("call", p.getCall().name().substring("CALL_".length()));
      if (p.hasDeadline()) {
        policy.put(
            "deadline_seconds", p.getDeadline().getSeconds() + p.getDeadline().getNanos() / 1e9);
      } else {
        policy.putNull("deadline_seconds");
      }
      policies.add(
          policy.put(
              "failure_policy", p.getFailurePolicy().name().substring("FAILURE_POLICY_".length())));
    }
    out.set("call_policies", policies);
    ArrayNode mutations = NODES.arrayNode();
    for (var m : r.getMutationsList()) {
      mutations.add(
          NODES
              .objectNode()
              .put("group", m.getKind().getGroup())
              .put("version", m.getKind().getVersion())
              .put("kind", m.getKind().getKind()));
    }
    return out.set("mutations", mutations);
  }
}
