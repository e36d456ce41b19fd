package io.kplug.sidecar;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.MetadataUtils;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.unix.DomainSocketAddress;
import io.opentelemetry.api.trace.Span;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import kplug.v1.PluginGrpc;
import kplug.v1.PluginOuterClass;
import kplug.v1.Types;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A plugin served for real, on a real Unix socket, against a stand-in registry ({@link
 * FakeRegistry}): registration, backoff, the operator's interval, refusals, re-registration,
 * Unregister and the drain, capabilities, deadlines and tracing.
 */
class PluginServerTest {
  private static final Info INFO =
      Info.builder("p")
          .version("1.2.3")
          .description("a test plugin")
          .offer(Offer.of(new GroupKind("example.com", "Widget"), "W"))
          .build();

  private static final byte[] WIDGET =
      "{\"apiVersion\": \"example.com/v1\", \"kind\": \"Widget\", \"metadata\": {\"name\": \"w\"}}"
          .getBytes(StandardCharsets.UTF_8);

  @TempDir Path dir;

  private final EventLoopGroup group =
      new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
  private FakeRegistry registry;
  private PluginServer server;
  private ManagedChannel channel;

  /** A plugin that overrides Finalize, as most do. */
  static class Finalizing implements Plugin {
    @Override
    public Response reconcile(Request request) {
      return Response.ok();
    }

    @Override
    public Response finalize(Request request) {
      return Response.ok();
    }
  }

  /** A plugin that overrides every optional call. */
  static final class Everything extends Finalizing {
    @Override
    public Validation validate(AdmissionRequest request) {
      return Validation.allowed();
    }

    @Override
    public Defaults defaults(AdmissionRequest request) {
      return Defaults.none();
    }

    @Override
    public Response hook(HookCall call) {
      return Response.ok();
    }
  }

  private PluginServer start(Plugin plugin, Duration interval) throws Exception {
    return start(INFO, plugin, interval);
  }

  private PluginServer start(Info info, Plugin plugin, Duration interval) throws Exception {
    server =
        PluginServer.builder(info, plugin)
            .socketDir(dir)
            .heartbeatInterval(interval)
            .randomUnit(() -> 0)
            .build();
    server.start();
    return server;
  }

  private PluginGrpc.PluginBlockingStub dial() {
    if (channel == null) {
      channel =
          NettyChannelBuilder.forAddress(new DomainSocketAddress(server.socketPath().toString()))
              .eventLoopGroup(group)
              .channelType(EpollDomainSocketChannel.class)
              .withOption(ChannelOption.SO_KEEPALIVE, null)
              .overrideAuthority("localhost")
              .usePlaintext()
              .build();
    }
    return PluginGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
  }

  private static PluginOuterClass.ReconcileRequest reconcile() {
    return PluginOuterClass.ReconcileRequest.newBuilder()
        .setImplementation("W")
        .setObject(ByteString.copyFrom(WIDGET))
        .build();
  }

  @AfterEach
  void tearDown() throws Exception {
    if (channel != null) {
      channel.shutdownNow();
    }
    if (server != null) {
      server.stop();
    }
    if (registry != null) {
      registry.close();
    }
    group.shutdownGracefully(0, 0, TimeUnit.SECONDS);
  }

  @Test
  void heartbeatsCarryTheDescriptionGetInfoGives() throws Exception {
    registry = new FakeRegistry(dir);
    registry.answer(true, "", Duration.ofMillis(50));
    start(new Finalizing(), Duration.ofSeconds(5));
    List<FakeRegistry.Beat> beats = registry.awaitBeats(3, Duration.ofSeconds(10));

    var info = dial().getInfo(PluginOuterClass.GetInfoRequest.getDefaultInstance());
    assertEquals("p", info.getName());
    assertEquals("kplug.v1", info.getProtocol());
    assertEquals(
        List.of(Types.Capability.CAPABILITY_RECONCILE, Types.Capability.CAPABILITY_FINALIZE),
        info.getCapabilitiesList());
    for (FakeRegistry.Beat beat : beats) {
      var request = beat.request();
      assertEquals("p", request.getName());
      assertEquals("1.2.3", request.getVersion());
      assertEquals("kplug.v1", request.getProtocol());
      assertEquals("plugins/p/plugin.sock", request.getSocket());
      assertEquals(server.instanceId(), request.getInstanceId());
      assertEquals(info.getOffersList(), request.getOffersList());
      assertEquals(info.getCapabilitiesList(), request.getCapabilitiesList());
    }
    // The operator's interval, not the configured 5 s.
    assertEquals(Duration.ofMillis(50), server.heartbeatInterval());
    assertTrue(beats.get(2).nanos() - beats.get(1).nanos() < Duration.ofSeconds(1).toNanos());
    assertTrue(server.isRegistered());
    assertTrue(Files.exists(dir.resolve("plugins/p/plugin.sock")));
  }

  @Test
  void failedHeartbeatsBackOffThenRegister() throws Exception {
    registry = new FakeRegistry(dir);
    registry.failFirst(4);
    start(new Finalizing(), Duration.ofSeconds(5));
    List<FakeRegistry.Beat> beats = registry.awaitBeats(5, Duration.ofSeconds(10));
    // Without jitter (unit 0): 100, 200, 400, 800 ms.
    long[] expected = {100, 200, 400, 800};
    for (int i = 0; i < expected.length; i++) {
      long waited = (beats.get(i + 1).nanos() - beats.get(i).nanos()) / 1_000_000;
      assertTrue(
          waited >= expected[i] - 5 && waited < expected[i] + 250,
          "wait " + (i + 1) + " was " + waited + " ms, expected about " + expected[i]);
    }
    long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
    while (!server.isRegistered() && System.nanoTime() < until) {
      Thread.sleep(10);
    }
    assertTrue(server.isRegistered());
  }

  @Test
  void aRefusalIsNotARegistrationAndHeartbeatsGoOn() throws Exception {
    registry = new FakeRegistry(dir);
    registry.answer(false, "name taken", Duration.ofMillis(50));
    start(new Finalizing(), Duration.ofSeconds(5));
    registry.awaitBeats(4, Duration.ofSeconds(10));
    assertFalse(server.isRegistered());
  }

  @Test
  void registersAgainWithARestartedOperator() throws Exception {
    registry = new FakeRegistry(dir);
    registry.answer(true, "", Duration.ofMillis(50));
    start(new Finalizing(), Duration.ofSeconds(5));
    registry.awaitBeats(2, Duration.ofSeconds(10));
    registry.close();
    Files.deleteIfExists(dir.resolve("registry.sock"));
    Thread.sleep(300);
    registry = new FakeRegistry(dir);
    registry.answer(true, "", Duration.ofMillis(50));
    var beats = registry.awaitBeats(1, Duration.ofSeconds(10));
    assertEquals(server.instanceId(), beats.get(0).request().getInstanceId());
  }

  @Test
  void stopUnregistersDrainsTheCallInFlightAndRemovesTheSocket() throws Exception {
    registry = new FakeRegistry(dir);
    registry.answer(true, "", Duration.ofMillis(50));
    CountDownLatch entered = new CountDownLatch(1);
    start(
        request -> {
          entered.countDown();
          Thread.sleep(500);
          return Response.ok().withMessage("drained");
        },
        Duration.ofSeconds(5));
    registry.awaitBeats(1, Duration.ofSeconds(10));
    var stub = dial();
    var call = CompletableFuture.supplyAsync(() -> stub.reconcile(reconcile()));
    assertTrue(entered.await(10, TimeUnit.SECONDS));

    CountDownLatch release = new CountDownLatch(1);
    registry.holdUnregister(release);
    var stopped = CompletableFuture.runAsync(server::stop);
    assertTrue(registry.awaitUnregister(Duration.ofSeconds(10)));
    assertEquals(server.instanceId(), registry.unregisters().get(0).getInstanceId());
    assertFalse(stopped.isDone(), "stop waits for the operator's answer to Unregister");
    release.countDown();
    stopped.get(15, TimeUnit.SECONDS);

    assertEquals("drained", call.get(5, TimeUnit.SECONDS).getMessage());
    assertFalse(Files.exists(server.socketPath()), "the socket is removed");
    int beats = registry.beats().size();
    Thread.sleep(200);
    assertEquals(beats, registry.beats().size(), "no heartbeat after stop");
  }

  @Test
  void overridingACallAdvertisesIt() throws Exception {
    assertEquals(
        List.of(Types.Capability.CAPABILITY_RECONCILE),
        Capabilities.of(request -> Response.ok(), INFO).toProto());
    assertEquals(
        List.of(
            Types.Capability.CAPABILITY_RECONCILE,
            Types.Capability.CAPABILITY_FINALIZE,
            Types.Capability.CAPABILITY_VALIDATE,
            Types.Capability.CAPABILITY_DEFAULT,
            Types.Capability.CAPABILITY_HOOKS),
        Capabilities.of(new Everything(), INFO).toProto());
    // CHILDREN follows from the offers, in the order every SDK sends them (MUTATE: MutateTest).
    assertEquals(
        List.of(
            Types.Capability.CAPABILITY_RECONCILE,
            Types.Capability.CAPABILITY_FINALIZE,
            Types.Capability.CAPABILITY_VALIDATE,
            Types.Capability.CAPABILITY_DEFAULT,
            Types.Capability.CAPABILITY_HOOKS,
            Types.Capability.CAPABILITY_CHILDREN),
        Capabilities.of(new Everything(), PARENT).toProto());
  }

  private static final Info PARENT =
      Info.builder("parent")
          .offer(
              Offer.of(new GroupKind("example.com", "Widget"), "W")
                  .withChild("v1", "ConfigMap")
                  .withChild("apps/v1", "Deployment"))
          .build();

  /** Desires one ConfigMap per base object, and reports the children it observed. */
  static final class Parent implements Plugin {
    @Override
    public Response reconcile(Request request) {
      return Response.ok()
          .withStatus(
              Map.of(
                  "observed",
                  request.children().stream().map(c -> c.kind() + "/" + c.name()).toList()))
          .withChild(
              Map.of(
                  "apiVersion",
                  "v1",
                  "kind",
                  "ConfigMap",
                  "metadata",
                  Map.of("name", request.name() + "-settings")));
    }

    @Override
    public Response finalize(Request request) {
      if (request.child("Deployment", request.name()).isPresent()) {
        return Response.retry(Duration.ofSeconds(1))
            .withMessage("draining")
            .withChildren(List.of());
      }
      return Response.ok();
    }
  }

  @Test
  void childKindsAreAdvertisedAndChildrenTravelBothWays() throws Exception {
    registry = new FakeRegistry(dir);
    registry.answer(true, "", Duration.ofMillis(50));
    start(PARENT, new Parent(), Duration.ofSeconds(5));
    List<FakeRegistry.Beat> beats = registry.awaitBeats(1, Duration.ofSeconds(10));

    var info = dial().getInfo(PluginOuterClass.GetInfoRequest.getDefaultInstance());
    var want =
        List.of(
            Types.Capability.CAPABILITY_RECONCILE,
            Types.Capability.CAPABILITY_FINALIZE,
            Types.Capability.CAPABILITY_CHILDREN);
    assertEquals(want, info.getCapabilitiesList());
    assertEquals(
        List.of(
            Types.GroupVersionKind.newBuilder().setVersion("v1").setKind("ConfigMap").build(),
            Types.GroupVersionKind.newBuilder()
                .setGroup("apps")
                .setVersion("v1")
                .setKind("Deployment")
                .build()),
        info.getOffers(0).getChildrenList());
    assertEquals(0, info.getMutationsCount());
    var beat = beats.get(0).request();
    assertEquals(want, beat.getCapabilitiesList());
    assertEquals(info.getOffersList(), beat.getOffersList());
    assertEquals(0, beat.getMutationsCount());

    var reconciled =
        dial()
            .reconcile(
                reconcile().toBuilder()
                    .addChildren(utf8("{\"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}"))
                    .addChildren(
                        utf8("{\"kind\": \"Deployment\", \"metadata\": {\"name\": \"w\"}}"))
                    .build());
    assertEquals(Types.Outcome.OUTCOME_OK, reconciled.getOutcome());
    assertEquals(
        "{\"observed\":[\"ConfigMap/a\",\"Deployment/w\"]}", reconciled.getStatus().toStringUtf8());
    assertEquals(1, reconciled.getChildren().getObjectsCount());
    // Map.of has no order: the child compares as a JSON tree.
    assertEquals(
        Json.MAPPER.readTree(
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"w-settings\"}}"),
        Json.MAPPER.readTree(reconciled.getChildren().getObjects(0).toByteArray()));

    // An observed child that is not an object: the handler is not called.
    var refused = dial().reconcile(reconcile().toBuilder().addChildren(utf8("[]")).build());
    assertEquals(Types.Outcome.OUTCOME_FAILED, refused.getOutcome());
    assertEquals("kplug: child #0 is not a JSON object", refused.getMessage());
    assertFalse(refused.hasChildren());

    // Finalize is sent the children that still exist, and may keep some.
    var finalized =
        dial()
            .finalize(
                PluginOuterClass.FinalizeRequest.newBuilder()
                    .setImplementation("W")
                    .setObject(ByteString.copyFrom(WIDGET))
                    .addChildren(
                        utf8("{\"kind\": \"Deployment\", \"metadata\": {\"name\": \"w\"}}"))
                    .build());
    assertEquals(Types.Outcome.OUTCOME_RETRY, finalized.getOutcome());
    assertTrue(finalized.hasChildren());
    assertEquals(0, finalized.getChildren().getObjectsCount());

    // The SDK does not implement Mutate yet: UNIMPLEMENTED, and never advertised.
    var e =
        assertThrows(
            StatusRuntimeException.class,
            () ->
                dial()
                    .mutate(
                        PluginOuterClass.MutateRequest.newBuilder()
                            .setObject(ByteString.copyFrom(WIDGET))
                            .build()));
    assertEquals(Status.Code.UNIMPLEMENTED, e.getStatus().getCode());
  }

  private static ByteString utf8(String json) {
    return ByteString.copyFromUtf8(json);
  }

  @Test
  void aCallThePluginDoesNotOverrideIsUnimplemented() throws Exception {
    start(request -> Response.ok(), Duration.ofSeconds(5));
    var e =
        assertThrows(
            StatusRuntimeException.class,
            () ->
                dial()
                    .validate(
                        PluginOuterClass.ValidateRequest.newBuilder()
                            .setOperation(Types.Operation.OPERATION_CREATE)
                            .setObject(ByteString.copyFrom(WIDGET))
                            .build()));
    assertEquals(Status.Code.UNIMPLEMENTED, e.getStatus().getCode());
    assertEquals("plugin p does not implement Validate", e.getStatus().getDescription());
    // Finalize without an override: done at once.
    var finalized =
        dial()
            .finalize(
                PluginOuterClass.FinalizeRequest.newBuilder()
                    .setObject(ByteString.copyFrom(WIDGET))
                    .build());
    assertEquals(Types.Outcome.OUTCOME_OK, finalized.getOutcome());
  }

  @Test
  void hooksWithoutAHookHandlerDoNotStart() {
    Info info =
        Info.builder("p")
            .hook(
                new Hook(
                    "audit",
                    new GroupKind("example.com", "Widget"),
                    HookPhase.BEFORE_RECONCILE,
                    HookBehaviour.SYNC_ENFORCE,
                    0))
            .build();
    var e =
        assertThrows(
            StartupException.class,
            () -> PluginServer.builder(info, r -> Response.ok()).socketDir(dir).build());
    assertEquals(StartupException.Kind.INVALID_DECLARATION, e.kind());
  }

  @Test
  void theOperatorsDeadlineInterruptsTheHandler() throws Exception {
    AtomicBoolean interrupted = new AtomicBoolean();
    AtomicReference<Boolean> hadDeadline = new AtomicReference<>();
    CountDownLatch done = new CountDownLatch(1);
    start(
        request -> {
          hadDeadline.set(request.deadline().isPresent());
          try {
            Thread.sleep(10_000);
          } catch (InterruptedException e) {
            interrupted.set(true);
          } finally {
            done.countDown();
          }
          return Response.ok();
        },
        Duration.ofSeconds(5));
    var e =
        assertThrows(
            StatusRuntimeException.class,
            // Long enough for the call to reach the handler on a loaded machine.
            () -> dial().withDeadlineAfter(2, TimeUnit.SECONDS).reconcile(reconcile()));
    assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getStatus().getCode());
    assertTrue(done.await(8, TimeUnit.SECONDS), "the handler was stopped");
    assertTrue(interrupted.get());
    assertTrue(hadDeadline.get());
  }

  @Test
  void theHandlerContinuesTheOperatorsTrace() throws Exception {
    AtomicReference<String> traceId = new AtomicReference<>();
    start(
        request -> {
          traceId.set(Span.current().getSpanContext().getTraceId());
          return Response.ok();
        },
        Duration.ofSeconds(5));
    Metadata headers = new Metadata();
    headers.put(
        Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    dial()
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers))
        .reconcile(reconcile());
    assertEquals("0af7651916cd43dd8448eb211c80319c", traceId.get());
  }

  @Test
  void eachStartHasAFreshInstanceId() throws Exception {
    start(request -> Response.ok(), Duration.ofSeconds(5));
    String first = server.instanceId();
    server.stop();
    start(request -> Response.ok(), Duration.ofSeconds(5));
    assertNotEquals(first, server.instanceId());
  }
}
