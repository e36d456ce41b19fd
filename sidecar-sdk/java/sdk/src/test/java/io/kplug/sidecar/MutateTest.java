package io.kplug.sidecar;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.unix.DomainSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import kplug.v1.PluginGrpc;
import kplug.v1.PluginOuterClass;
import kplug.v1.PluginOuterClass.MutateRequest;
import kplug.v1.Types;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Mutate: the builder's paths (those the operator accepts, no more), decoding the call, MUTATE
 * advertised by overriding {@link Plugin#mutate}, the kinds in GetInfo and heartbeats alike, the
 * start-up checks, and every answer and error over a real socket.
 */
class MutateTest {
  private static final String REFUSED =
      "a mutation may only change /spec and single labels and annotations, not kplug.io/ ones";

  private static final Info INFO =
      Info.builder("backup")
          .offer(Offer.of(new GroupKind("example.com", "Widget"), "Backup"))
          .mutation("apps/v1", "Deployment")
          .mutation("v1", "Pod")
          .build();

  /**
   * Adds a sidecar container to the Deployments it is sent; one named "broken" makes it throw,
   * "silent" answer null, and "sneaky" patch its status.
   */
  static final class Backup implements Plugin {
    @Override
    public Response reconcile(Request request) {
      return Response.ok();
    }

    @Override
    public Mutation mutate(MutateCall call) {
      switch (call.object().name()) {
        case "broken" -> throw new IllegalArgumentException("backup store unreachable");
        case "silent" -> {
          return null;
        }
        case "sneaky" -> {
          return Mutation.none().add("/status/backedUp", true);
        }
        default -> {}
      }
      String base = call.base().map(KubeObject::name).orElse("none");
      String live = call.live().map(KubeObject::name).orElse("none");
      return Mutation.none()
          .add("/spec/template/spec/containers/-", Map.of("name", "backup"))
          .withWarning(call.implementation() + " base=" + base + " live=" + live);
    }
  }

  /** The README's example (sidecar-sdk/java/README.md, "Mutate"), word for word. */
  public static final class ReadmeBackup implements Plugin {
    static final Info INFO =
        Info.builder("backup").version("1.0.0").mutation("apps/v1", "Deployment").build();

    @Override
    public Response reconcile(Request request) {
      return Response.ok();
    }

    @Override
    public Mutation mutate(MutateCall call) {
      Object containers = call.object().get("spec", "template", "spec", "containers").orElse(null);
      if (containers instanceof List<?> list
          && list.stream()
              .anyMatch(c -> c instanceof Map<?, ?> m && "backup".equals(m.get("name")))) {
        return Mutation.none(); // already there
      }
      return Mutation.none()
          .add(
              "/spec/template/spec/containers/-",
              Map.of(
                  "name", "backup",
                  "image", "example.com/backup:1.0",
                  "volumeMounts", List.of(Map.of("name", "data", "mountPath", "/data"))))
          .add("/metadata/annotations/backup.example.com~1enabled", "true");
    }
  }

  @Test
  void theReadmesBackupAddsItsSidecarOnce() throws Exception {
    var stub = serve(ReadmeBackup.INFO, new ReadmeBackup());
    var r =
        stub.mutate(
            MutateRequest.newBuilder()
                .setObject(
                    ByteString.copyFromUtf8(
                        "{\"kind\": \"Deployment\", \"metadata\": {\"name\": \"db\"}, \"spec\":"
                            + " {\"template\": {\"spec\": {\"containers\": [{\"name\":"
                            + " \"postgres\"}]}}}}"))
                .build());
    assertEquals(
        "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/-\",\"value\":"
            + "{\"image\":\"example.com/backup:1.0\",\"name\":\"backup\","
            + "\"volumeMounts\":[{\"mountPath\":\"/data\",\"name\":\"data\"}]}},"
            + "{\"op\":\"add\",\"path\":\"/metadata/annotations/backup.example.com~1enabled\","
            + "\"value\":\"true\"}]",
        r.getPatch().toStringUtf8());
    r =
        stub.mutate(
            MutateRequest.newBuilder()
                .setObject(
                    ByteString.copyFromUtf8(
                        "{\"kind\": \"Deployment\", \"metadata\": {\"name\": \"db\"}, \"spec\":"
                            + " {\"template\": {\"spec\": {\"containers\": [{\"name\":"
                            + " \"backup\"}]}}}}"))
                .build());
    assertTrue(r.getPatch().isEmpty());
  }

  @TempDir Path dir;

  private final EventLoopGroup group =
      new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
  private FakeRegistry registry;
  private PluginServer server;
  private ManagedChannel channel;

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

  private PluginGrpc.PluginBlockingStub serve(Info info, Plugin plugin) throws Exception {
    server =
        PluginServer.builder(info, plugin)
            .socketDir(dir)
            .heartbeatInterval(Duration.ofMillis(100))
            .build();
    server.start();
    channel =
        NettyChannelBuilder.forAddress(new DomainSocketAddress(server.socketPath().toString()))
            .eventLoopGroup(group)
            .channelType(EpollDomainSocketChannel.class)
            .withOption(ChannelOption.SO_KEEPALIVE, null)
            .overrideAuthority("localhost")
            .usePlaintext()
            .build();
    return PluginGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
  }

  private static ByteString deployment(String name) {
    return ByteString.copyFromUtf8(
        "{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"metadata\": {\"name\": \""
            + name
            + "\", \"labels\": {\"kplug.io/plugin\": \"tables\"}}, \"spec\": {}}");
  }

  @Test
  void pathsAreTheOnesTheOperatorAccepts() {
    for (String path :
        new String[] {
          "/status/x",
          "/metadata/name",
          "/specx",
          "spec/x",
          "",
          "/metadata/labels",
          "/metadata/annotations",
          "/metadata/labels/kplug.io~1plugin",
          "/metadata/annotations/kplug.io~1intent-hash",
        }) {
      var e =
          assertThrows(
              IllegalStateException.class,
              () -> Mutation.none().add("/spec/a", 1).add(path, "x").toMutateResponse(),
              path);
      assertEquals(
          "plugin bug: " + REFUSED + "; add " + Json.encodeString(path) + " is outside them",
          e.getMessage());
    }
    var wire =
        Mutation.none()
            .add("/spec/template/spec/containers/-", Map.of("name", "backup"))
            .replace("/spec", Map.of("replicas", 2))
            .add("/metadata/labels/backup", "yes")
            .add("/metadata/annotations/backup.example~1enabled", "true")
            // Only the kplug.io/ prefix is kplug's: a key that merely contains it is the plugin's.
            .add("/metadata/labels/app.kplug.io~1x", "1")
            .remove("/metadata/annotations/kplug.iox")
            .withWarning("added a sidecar")
            .toMutateResponse();
    assertEquals(
        "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/-\",\"value\":{\"name\":\"backup\"}},"
            + "{\"op\":\"replace\",\"path\":\"/spec\",\"value\":{\"replicas\":2}},"
            + "{\"op\":\"add\",\"path\":\"/metadata/labels/backup\",\"value\":\"yes\"},"
            + "{\"op\":\"add\",\"path\":\"/metadata/annotations/backup.example~1enabled\",\"value\":\"true\"},"
            + "{\"op\":\"add\",\"path\":\"/metadata/labels/app.kplug.io~1x\",\"value\":\"1\"},"
            + "{\"op\":\"remove\",\"path\":\"/metadata/annotations/kplug.iox\"}]",
        wire.getPatch().toStringUtf8());
    assertEquals(List.of("added a sidecar"), wire.getWarningsList());
  }

  @Test
  void objectsInValuesAreSentInKeyOrderWhateverMapTheyCameFrom() {
    var insertion = new java.util.LinkedHashMap<String, Object>();
    insertion.put("name", "backup");
    insertion.put("image", "backup:1");
    insertion.put("env", List.of(Map.of("value", "1", "name", "A")));
    assertEquals(
        "[{\"op\":\"add\",\"path\":\"/spec/c\",\"value\":"
            + "{\"env\":[{\"name\":\"A\",\"value\":\"1\"}],\"image\":\"backup:1\",\"name\":\"backup\"}}]",
        Mutation.none().add("/spec/c", insertion).toMutateResponse().getPatch().toStringUtf8());
  }

  @Test
  void aMutationKeepsItsFirstMistakeAndIsBounded() {
    Mutation m = Mutation.none().remove("/metadata/labels").add("/status/x", 1).add(null, 2);
    assertEquals(REFUSED + "; remove \"/metadata/labels\" is outside them", m.problem());
    assertTrue(m.isEmpty());
    assertNull(Mutation.none().add("/spec/a", 1).problem());
    var nothing = Mutation.none().toMutateResponse();
    assertTrue(nothing.getPatch().isEmpty());
    assertEquals(0, nothing.getWarningsCount());
    int size = "[{\"op\":\"add\",\"path\":\"/spec/blob\",\"value\":\"\"}]".length() + (256 << 10);
    var e =
        assertThrows(
            IllegalStateException.class,
            () -> Mutation.none().add("/spec/blob", "x".repeat(256 << 10)).toMutateResponse());
    assertEquals(
        "plugin bug: the mutation's JSON Patch is " + size + " bytes; at most 262144 are accepted",
        e.getMessage());
    Mutation many = Mutation.none();
    for (int i = 0; i < 20; i++) {
      many.withWarning("w" + i);
    }
    var warnings = many.toMutateResponse().getWarningsList();
    assertEquals(16, warnings.size());
    assertEquals("and 5 more warnings", warnings.get(15));
  }

  @Test
  void decodingNamesTheObjectThatIsNotOne() throws Exception {
    var call =
        MutateCall.decode(
            MutateRequest.newBuilder().setImplementation("T").setObject(deployment("d")).build());
    assertEquals("T", call.implementation());
    assertEquals("d", call.object().name());
    assertTrue(call.live().isEmpty());
    assertTrue(call.base().isEmpty());
    call =
        MutateCall.decode(
            MutateRequest.newBuilder()
                .setObject(deployment("d"))
                .setLive(deployment("l"))
                .setBase(ByteString.copyFromUtf8("{\"metadata\": {\"name\": \"w\"}}"))
                .build());
    assertEquals("l", call.live().orElseThrow().name());
    assertEquals("w", call.base().orElseThrow().name());
    Map<MutateRequest, String> refused =
        Map.of(
            MutateRequest.newBuilder().setObject(ByteString.copyFromUtf8("[1]")).build(),
            "kplug: the object is not a JSON object",
            MutateRequest.getDefaultInstance(),
            "kplug: the object is not valid JSON: ",
            MutateRequest.newBuilder()
                .setObject(deployment("d"))
                .setLive(ByteString.copyFromUtf8("\"x\""))
                .build(),
            "kplug: the live object is not a JSON object",
            MutateRequest.newBuilder()
                .setObject(deployment("d"))
                .setBase(ByteString.copyFromUtf8("{"))
                .build(),
            "kplug: the base object is not valid JSON: ");
    refused.forEach(
        (in, message) -> {
          var e = assertThrows(InvalidRequestException.class, () -> MutateCall.decode(in));
          assertTrue(e.getMessage().startsWith(message), e.getMessage() + " / " + message);
        });
  }

  @Test
  void mutateIsAdvertisedAndItsKindsDeclaredInGetInfoAndHeartbeats() throws Exception {
    registry = new FakeRegistry(dir);
    var stub = serve(INFO, new Backup());
    var beat = registry.awaitBeats(1, Duration.ofSeconds(10)).get(0).request();
    var info = stub.getInfo(PluginOuterClass.GetInfoRequest.getDefaultInstance());
    assertEquals(
        List.of(Types.Capability.CAPABILITY_RECONCILE, Types.Capability.CAPABILITY_MUTATE),
        info.getCapabilitiesList());
    assertEquals(
        List.of(
            Types.Mutation.newBuilder()
                .setKind(GroupVersionKind.of("apps/v1", "Deployment").toProto())
                .build(),
            Types.Mutation.newBuilder()
                .setKind(GroupVersionKind.of("v1", "Pod").toProto())
                .build()),
        info.getMutationsList());
    assertEquals(info.getCapabilitiesList(), beat.getCapabilitiesList());
    assertEquals(info.getMutationsList(), beat.getMutationsList());
  }

  @Test
  void mutateAnswersAndErrorsAsTheProtocolSays() throws Exception {
    var stub = serve(INFO, new Backup());
    var r =
        stub.mutate(
            MutateRequest.newBuilder()
                .setImplementation("Tables")
                .setObject(deployment("w-server"))
                .setLive(deployment("w-live"))
                .setBase(ByteString.copyFromUtf8("{\"metadata\": {\"name\": \"w\"}}"))
                .build());
    assertEquals(
        "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/-\",\"value\":{\"name\":\"backup\"}}]",
        r.getPatch().toStringUtf8());
    assertEquals(List.of("Tables base=w live=w-live"), r.getWarningsList());
    // Without a base or a live object (empty bytes): none, not an error.
    r = stub.mutate(MutateRequest.newBuilder().setObject(deployment("w-server")).build());
    assertEquals(List.of(" base=none live=none"), r.getWarningsList());
    record Refused(MutateRequest in, Status.Code code, String message) {}
    for (var c :
        List.of(
            new Refused(
                MutateRequest.newBuilder().setObject(deployment("broken")).build(),
                Status.Code.INTERNAL,
                "IllegalArgumentException: backup store unreachable"),
            new Refused(
                MutateRequest.newBuilder().setObject(deployment("silent")).build(),
                Status.Code.INTERNAL,
                "the plugin's Mutate handler returned null"),
            new Refused(
                MutateRequest.newBuilder().setObject(deployment("sneaky")).build(),
                Status.Code.INTERNAL,
                "plugin bug: " + REFUSED + "; add \"/status/backedUp\" is outside them"),
            new Refused(
                MutateRequest.newBuilder().setObject(ByteString.copyFromUtf8("[1]")).build(),
                Status.Code.INVALID_ARGUMENT,
                "kplug: the object is not a JSON object"),
            new Refused(
                MutateRequest.newBuilder()
                    .setObject(deployment("w"))
                    .setLive(ByteString.copyFromUtf8("{"))
                    .build(),
                Status.Code.INVALID_ARGUMENT,
                "kplug: the live object is not valid JSON: "),
            new Refused(
                MutateRequest.newBuilder()
                    .setObject(deployment("w"))
                    .setBase(ByteString.copyFromUtf8("[]"))
                    .build(),
                Status.Code.INVALID_ARGUMENT,
                "kplug: the base object is not a JSON object"))) {
      var e = assertThrows(StatusRuntimeException.class, () -> stub.mutate(c.in()));
      assertEquals(c.code(), e.getStatus().getCode(), c.message());
      assertTrue(
          e.getStatus().getDescription().startsWith(c.message()),
          e.getStatus().getDescription() + " / " + c.message());
    }
  }

  @Test
  void aPluginThatDoesNotOverrideMutateIsNotAskedToMutate() throws Exception {
    Info info =
        Info.builder("plain").offer(Offer.of(new GroupKind("example.com", "W"), "W")).build();
    var stub = serve(info, request -> Response.ok());
    var e =
        assertThrows(
            StatusRuntimeException.class,
            () -> stub.mutate(MutateRequest.newBuilder().setObject(deployment("w")).build()));
    assertEquals(Status.Code.UNIMPLEMENTED, e.getStatus().getCode());
    assertEquals("plugin plain does not implement Mutate", e.getStatus().getDescription());
    var described = stub.getInfo(PluginOuterClass.GetInfoRequest.getDefaultInstance());
    assertFalse(described.getCapabilitiesList().contains(Types.Capability.CAPABILITY_MUTATE));
    assertEquals(0, described.getMutationsCount());
  }

  @Test
  void mutationsAreCheckedAtStartup() {
    var many = Info.builder("backup");
    for (int i = 0; i < 17; i++) {
      many.mutation("example.com/v1", "Kind" + i);
    }
    Plugin plain = request -> Response.ok();
    record Case(Info info, Plugin plugin, String message) {}
    for (var c :
        List.of(
            new Case(INFO, plain, "it declares mutations but does not override Plugin.mutate"),
            new Case(
                Info.builder("backup").build(),
                new Backup(),
                "it overrides Plugin.mutate but declares no kind to mutate"
                    + " (Info.Builder.mutation)"),
            new Case(many.build(), new Backup(), "17 mutations are declared; at most 16"),
            new Case(
                Info.builder("backup").mutation("apps/", "Deployment").build(),
                new Backup(),
                "mutation #0 (\"apps/\", \"Deployment\") names no version or kind"),
            new Case(
                Info.builder("backup").mutation("v1", "").build(),
                new Backup(),
                "mutation #0 (\"v1\", \"\") names no version or kind"))) {
      var e =
          assertThrows(
              StartupException.class,
              () -> PluginServer.builder(c.info(), c.plugin()).socketDir(dir).build(),
              c.message());
      assertEquals(StartupException.Kind.INVALID_DECLARATION, e.kind());
      assertTrue(
          e.getMessage().startsWith("plugin backup cannot start: " + c.message()), e.getMessage());
    }
  }
}
