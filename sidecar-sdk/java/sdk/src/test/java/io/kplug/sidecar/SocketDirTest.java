package io.kplug.sidecar;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.text.MessageFormat;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.ResourceBundle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The socket dir, as a new user meets it: a plugin started before its operator (or beside the wrong
 * directory) says once, at WARNING level, where it looks for the registry and where that came from;
 * a socket dir that does not exist is a start-up error, and is never created; a plugin that stops
 * cleanly leaves no socket and no empty directory behind.
 */
class SocketDirTest {
  private static final Info INFO =
      Info.builder("quiet").offer(Offer.of(new GroupKind("example.com", "Greeting"), "Q")).build();

  @TempDir Path dir;

  /** One logged record. */
  record Line(System.Logger.Level level, String message) {}

  /** A logger that keeps every record, at every level. */
  static final class Records implements System.Logger {
    final List<Line> lines = new ArrayList<>();

    @Override
    public String getName() {
      return "records";
    }

    @Override
    public boolean isLoggable(Level level) {
      return true;
    }

    @Override
    public synchronized void log(Level level, ResourceBundle bundle, String msg, Throwable thrown) {
      lines.add(new Line(level, msg));
    }

    @Override
    public synchronized void log(Level level, ResourceBundle bundle, String format, Object... ps) {
      lines.add(new Line(level, ps == null ? format : MessageFormat.format(format, ps)));
    }

    synchronized List<Line> with(String text) {
      return lines.stream().filter(l -> l.message().contains(text)).toList();
    }
  }

  private static PluginServer.Builder builder(Records logs) {
    return PluginServer.builder(INFO, r -> Response.ok())
        .logger(logs)
        .gracePeriod(Duration.ZERO)
        .heartbeatInterval(Duration.ofMillis(200));
  }

  private void warnsOnceThenRetriesAtDebug(PluginServer.Builder builder, Records logs)
      throws Exception {
    PluginServer server = builder.build();
    server.start();
    Thread.sleep(1200); // retries after 0.1, 0.2, 0.2... s
    server.stop();

    String want = server.socketDirOrigin().registryWaitingMessage(dir.toAbsolutePath());
    List<Line> warned = logs.with(want);
    assertEquals(1, warned.size(), logs.lines.toString());
    assertEquals(System.Logger.Level.WARNING, warned.get(0).level());
    assertTrue(want.contains(dir.resolve("registry.sock").toString()), want);
    List<Line> retries = logs.with("heartbeat failure");
    assertTrue(retries.size() >= 3, logs.lines.toString());
    assertTrue(retries.stream().allMatch(l -> l.level() == System.Logger.Level.DEBUG));
    assertTrue(
        logs.lines.stream()
            .noneMatch(
                l -> l.level() == System.Logger.Level.INFO && l.message().contains("registry")),
        logs.lines.toString());
  }

  @Test
  void withoutARegistryItWarnsOnceNamingTheVariableThenRetriesAtDebug() throws Exception {
    Records logs = new Records();
    var builder = builder(logs).environment(Map.of("KPLUG_SOCKET_DIR", dir.toString())::get);
    warnsOnceThenRetriesAtDebug(builder, logs);
    assertFalse(logs.with("(from KPLUG_SOCKET_DIR)").isEmpty(), logs.lines.toString());
  }

  @Test
  void withoutARegistryItWarnsOnceSayingTheProgramSetTheDirectory() throws Exception {
    Records logs = new Records();
    warnsOnceThenRetriesAtDebug(builder(logs).socketDir(dir), logs);
    assertFalse(logs.with("(set by the program;").isEmpty(), logs.lines.toString());
  }

  @Test
  void aRegistryThatGoesAwayAfterAnsweringIsLostNotMissing() throws Exception {
    Records logs = new Records();
    PluginServer server =
        builder(logs).socketDir(dir).heartbeatInterval(Duration.ofMillis(100)).build();
    try (FakeRegistry registry = new FakeRegistry(dir)) {
      server.start();
      registry.awaitBeats(1, Duration.ofSeconds(10));
    }
    Files.deleteIfExists(dir.resolve("registry.sock"));
    Thread.sleep(500);
    server.stop();
    assertTrue(logs.with("no operator registry").isEmpty(), logs.lines.toString());
    List<Line> lost = logs.with("lost the operator");
    assertEquals(1, lost.size(), logs.lines.toString());
    assertEquals(System.Logger.Level.WARNING, lost.get(0).level());
  }

  @Test
  void aMissingSocketDirIsAStartUpErrorAndIsNotCreated() throws Exception {
    Path missing = dir.resolve("sockets");
    Records logs = new Records();
    PluginServer fromEnv =
        builder(logs).environment(Map.of("KPLUG_SOCKET_DIR", missing.toString())::get).build();
    var e = assertThrows(StartupException.class, fromEnv::start);
    assertEquals(StartupException.Kind.SOCKET, e.kind());
    assertEquals(
        "plugin quiet: "
            + SocketDirOrigin.ENVIRONMENT.socketDirMissingMessage(missing.toAbsolutePath()),
        e.getMessage());
    PluginServer fromProgram = builder(logs).socketDir(missing).build();
    e = assertThrows(StartupException.class, fromProgram::start);
    assertTrue(e.getMessage().contains("(set by the program;"), e.getMessage());
    assertFalse(Files.exists(missing), "neither the socket dir nor plugins/ is made");

    // plugins/ in an existing socket dir is the plugin's to create.
    PluginServer server = builder(logs).socketDir(dir).build();
    server.start();
    server.stop();
    assertTrue(Files.isDirectory(dir.resolve("plugins")));
  }

  @Test
  void aCleanStopRemovesTheSocketAndTheEmptiedPluginDirectory() throws Exception {
    Path own = dir.resolve("plugins/quiet");
    PluginServer server = builder(new Records()).socketDir(dir).build();
    server.start();
    assertTrue(Files.exists(own.resolve("plugin.sock")));
    server.stop();
    assertFalse(Files.exists(own));
    assertTrue(Files.isDirectory(dir.resolve("plugins")), "plugins/ is shared: it stays");

    // A directory that holds anything else stays, with what it holds.
    server = builder(new Records()).socketDir(dir).build();
    server.start();
    Files.writeString(own.resolve("notes"), "kept");
    server.stop();
    assertEquals("kept", Files.readString(own.resolve("notes")));
    assertFalse(Files.exists(own.resolve("plugin.sock")));
  }
}
