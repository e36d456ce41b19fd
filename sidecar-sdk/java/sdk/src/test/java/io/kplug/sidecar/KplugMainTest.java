package io.kplug.sidecar;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.unix.DomainSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import kplug.v1.PluginGrpc;
import kplug.v1.PluginOuterClass;
import kplug.v1.Types;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link Kplug#main} as a process of its own (a JVM started on this test's class path), signalled
 * as a kubelet does: SIGTERM drains the call in flight and exits 0; a second SIGTERM abandons it
 * and exits 1. Both remove the socket.
 */
class KplugMainTest {
  /** A plugin whose Reconcile takes $SLEEP_MS, saying on stdout when it starts. */
  public static final class Slow {
    public static void main(String[] args) {
      long sleep = Long.parseLong(System.getenv("SLEEP_MS"));
      Kplug.main(
          Info.builder("slow")
              .version("1")
              .offer(Offer.of(new GroupKind("x.io", "X"), "X"))
              .build(),
          request -> {
            System.out.println("handling " + request.name());
            System.out.flush();
            Thread.sleep(sleep);
            return Response.ok().withMessage("slept");
          });
    }
  }

  @TempDir Path dir;

  private final EventLoopGroup group =
      new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
  private Process process;
  private ManagedChannel channel;

  private Path socket() {
    return dir.resolve("plugins/slow/plugin.sock");
  }

  private void start(long sleepMs) throws Exception {
    var builder =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("java.class.path"),
                Slow.class.getName())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("plugin.log").toFile());
    builder.environment().put("KPLUG_SOCKET_DIR", dir.toString());
    builder.environment().put("KPLUG_HEARTBEAT_INTERVAL", "0.2");
    builder.environment().put("SLEEP_MS", Long.toString(sleepMs));
    process = builder.start();
    long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (!Files.exists(socket()) && System.nanoTime() < until) {
      Thread.sleep(20);
    }
    assertTrue(Files.exists(socket()), "the plugin serves its socket");
    channel =
        NettyChannelBuilder.forAddress(new DomainSocketAddress(socket().toString()))
            .eventLoopGroup(group)
            .channelType(EpollDomainSocketChannel.class)
            .withOption(ChannelOption.SO_KEEPALIVE, null)
            .overrideAuthority("localhost")
            .usePlaintext()
            .build();
  }

  /** Waits until the plugin's output (stdout and stderr) holds {@code text}. */
  private void awaitLine(String text) throws Exception {
    Path log = dir.resolve("plugin.log");
    long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (System.nanoTime() < until) {
      if (Files.readString(log).contains(text)) {
        return;
      }
      Thread.sleep(50);
    }
    throw new AssertionError(
        "the plugin never printed " + text + "; it printed:\n" + Files.readString(log));
  }

  private CompletableFuture<PluginOuterClass.ReconcileResponse> reconcile() {
    var stub = PluginGrpc.newBlockingStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS);
    return CompletableFuture.supplyAsync(
        () ->
            stub.reconcile(
                PluginOuterClass.ReconcileRequest.newBuilder()
                    .setImplementation("X")
                    .setObject(
                        ByteString.copyFromUtf8(
                            "{\"kind\": \"X\", \"metadata\": {\"name\": \"x\"}}"))
                    .build()));
  }

  @AfterEach
  void tearDown() {
    if (channel != null) {
      channel.shutdownNow();
    }
    if (process != null) {
      process.destroyForcibly();
    }
    group.shutdownGracefully(0, 0, TimeUnit.SECONDS);
  }

  @Test
  void sigtermDrainsTheCallInFlightAndExitsZero() throws Exception {
    start(1500);
    var call = reconcile();
    awaitLine("handling x");
    process.destroy(); // SIGTERM
    var answer = call.get(30, TimeUnit.SECONDS);
    assertEquals(Types.Outcome.OUTCOME_OK, answer.getOutcome());
    assertEquals("slept", answer.getMessage());
    assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the plugin exits");
    assertEquals(0, process.exitValue());
    assertFalse(Files.exists(socket()), "the socket is removed");
  }

  @Test
  void aSecondSigtermAbandonsTheDrainAndExitsOne() throws Exception {
    start(60_000);
    var call = reconcile();
    awaitLine("handling x");
    process.destroy();
    awaitLine("shutting down");
    process.destroy();
    assertTrue(process.waitFor(15, TimeUnit.SECONDS), "the plugin exits at once");
    assertEquals(1, process.exitValue());
    assertFalse(Files.exists(socket()), "the socket is removed");
    assertTrue(call.isDone() || call.handle((r, e) -> e).get(5, TimeUnit.SECONDS) != null);
  }
}
