package io.kplug.sidecar;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The socket rule: a stale socket is removed, a live one or a file that is not a socket is never
 * touched, and at stop only our own socket is removed.
 */
class SocketTest {
  private static final Info INFO = Info.builder("s").build();

  @TempDir Path dir;

  private Path socket() throws Exception {
    Path path = dir.resolve("plugins/s/plugin.sock");
    Files.createDirectories(path.getParent());
    return path;
  }

  private PluginServer server() throws StartupException {
    return PluginServer.builder(INFO, r -> Response.ok())
        .socketDir(dir)
        .heartbeatInterval(Duration.ofSeconds(5))
        .build();
  }

  /** A socket file nobody serves: what a crashed instance leaves. */
  private static void staleSocket(Path path) throws Exception {
    try (var channel = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      channel.bind(UnixDomainSocketAddress.of(path));
    }
  }

  @Test
  void aStaleSocketIsRemovedAndTheServerBinds() throws Exception {
    Path path = socket();
    staleSocket(path);
    assertTrue(Files.exists(path));
    PluginServer server = server();
    server.start();
    try (var client = SocketChannel.open(UnixDomainSocketAddress.of(path))) {
      assertTrue(client.isConnected());
    } finally {
      server.stop();
    }
    assertTrue(Files.notExists(path));
  }

  @Test
  void aLiveSocketIsNeverTakenOver() throws Exception {
    Path path = socket();
    try (var live = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      live.bind(UnixDomainSocketAddress.of(path));
      var e = assertThrows(StartupException.class, () -> server().start());
      assertEquals(StartupException.Kind.SOCKET_IN_USE, e.kind());
      assertTrue(e.getMessage().contains(path.toString()), e.getMessage());
      // Still there, and still the other process's.
      try (var client = SocketChannel.open(UnixDomainSocketAddress.of(path))) {
        assertTrue(client.isConnected());
      }
    }
  }

  @Test
  void aFileThatIsNotASocketIsNeverDeleted() throws Exception {
    Path path = socket();
    Files.writeString(path, "precious");
    var e = assertThrows(StartupException.class, () -> server().start());
    assertEquals(StartupException.Kind.NOT_A_SOCKET, e.kind());
    assertEquals("precious", Files.readString(path));
  }

  @Test
  void stopLeavesASuccessorsSocketAlone() throws Exception {
    Path path = socket();
    PluginServer server = server();
    server.start();
    // Our socket is replaced by another's (say, by hand): ours is no longer ours to remove.
    Files.delete(path);
    try (var successor = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      successor.bind(UnixDomainSocketAddress.of(path));
      server.stop();
      try (var client = SocketChannel.open(UnixDomainSocketAddress.of(path))) {
        assertTrue(client.isConnected(), "the successor's socket is still served");
      }
    }
  }

  @Test
  void onlyThePluginSocketIsLeftInItsDirectory() throws Exception {
    PluginServer server = server();
    server.start();
    try (var entries = Files.list(dir.resolve("plugins/s"))) {
      assertEquals(
          java.util.List.of(dir.resolve("plugins/s/plugin.sock")),
          entries.toList(),
          "the name the server bound first is gone");
    } finally {
      server.stop();
    }
  }
}
