package io.kplug.sidecar;

import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.lang.System.Logger;
import java.lang.System.Logger.Level;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import kplug.v1.RegistryOuterClass.HeartbeatRequest;

/**
 * One running plugin instance: its socket server and its heartbeats. {@link Kplug#main} is what
 * plugins use; a PluginServer is for embedding a plugin in a larger program, or a test, that
 * decides itself when to stop:
 *
 * <pre>{@code
 * PluginServer server = PluginServer.builder(info, plugin).socketDir(dir).build();
 * server.start();
 * ...
 * server.stop();
 * }</pre>
 */
public final class PluginServer {
  private static final Pattern DECIMAL = Pattern.compile("[0-9.eE+-]+");

  private final Info info;
  private final Plugin plugin;
  private final Capabilities capabilities;
  private final Path socketDir;
  private final SocketDirOrigin origin;
  private final Path socketPath;
  private final String instanceId;
  private final Duration grace;
  private final Logger logger;
  private final EventLoopGroup boss;
  private final EventLoopGroup workers;
  private final Heartbeater heartbeat;

  private final Object lock = new Object();
  private boolean started;
  private boolean stopped;
  private Server server;
  private BoundSocket socket;

  private PluginServer(Builder b, Path socketDir, SocketDirOrigin origin, Duration interval) {
    this.info = b.info;
    this.plugin = b.plugin;
    this.capabilities = Capabilities.of(plugin, info);
    this.socketDir = socketDir;
    this.origin = origin;
    this.socketPath =
        socketDir
            .resolve(Protocol.PLUGINS_DIR)
            .resolve(info.name())
            .resolve(Protocol.PLUGIN_SOCKET);
    this.instanceId = UUID.randomUUID().toString();
    this.grace = b.grace;
    this.logger = b.logger;
    this.boss = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
    this.workers = new MultiThreadIoEventLoopGroup(EpollIoHandler.newFactory());
    var description = PluginService.describe(info, capabilities);
    this.heartbeat =
        new Heartbeater(
            socketDir.resolve(Protocol.REGISTRY_SOCKET),
            origin,
            HeartbeatRequest.newBuilder()
                .setName(info.name())
                .setVersion(info.version())
                .setInstanceId(instanceId)
                .setProtocol(Protocol.PROTOCOL)
                .setSocket(Protocol.PLUGINS_DIR + "/" + info.name() + "/" + Protocol.PLUGIN_SOCKET)
                .addAllOffers(description.getOffersList())
                .addAllCapabilities(description.getCapabilitiesList())
                .addAllHooks(description.getHooksList())
                .addAllCallPolicies(description.getCallPoliciesList())
                .addAllMutations(description.getMutationsList())
                .build(),
            interval,
            workers,
            logger,
            b.randomUnit);
  }

  /** A builder for a server of {@code plugin}, described by {@code info}. */
  public static Builder builder(Info info, Plugin plugin) {
    return new Builder(info, plugin);
  }

  /**
   * Configures a {@link PluginServer}. Settings come from the builder, then the environment: {@code
   * $KPLUG_SOCKET_DIR} (default {@code /var/run/kplug}) and {@code $KPLUG_HEARTBEAT_INTERVAL}
   * (seconds, may be fractional; default 5). An empty variable counts as unset. The socket dir must
   * exist by {@link PluginServer#start()}: it is the volume shared with the operator, and the
   * plugin never creates it. While the operator's {@code registry.sock} is missing (or refuses
   * connections) before the operator ever answered, the plugin logs once, at WARNING level, where
   * it looks and where that came from; the retries after it at DEBUG level.
   */
  public static final class Builder {
    private final Info info;
    private final Plugin plugin;
    private Path socketDir;
    private Duration heartbeatInterval;
    private Duration grace = Protocol.DEFAULT_GRACE_PERIOD;
    private Logger logger = System.getLogger("io.kplug.sidecar");
    private java.util.function.DoubleSupplier randomUnit = Heartbeater.jitter();
    private java.util.function.UnaryOperator<String> environment = System::getenv;

    private Builder(Info info, Plugin plugin) {
      this.info = Objects.requireNonNull(info, "info");
      this.plugin = Objects.requireNonNull(plugin, "plugin");
    }

    /** The socket dir shared with the operator, instead of {@code $KPLUG_SOCKET_DIR}. */
    public Builder socketDir(Path dir) {
      this.socketDir = Objects.requireNonNull(dir, "dir");
      return this;
    }

    /**
     * The heartbeat interval until the operator asks for another one, instead of {@code
     * $KPLUG_HEARTBEAT_INTERVAL} (default 5 s). It must be positive.
     */
    public Builder heartbeatInterval(Duration interval) {
      this.heartbeatInterval = Objects.requireNonNull(interval, "interval");
      return this;
    }

    /**
     * How long calls in flight may take to finish at shutdown (default 10 s); zero stops them at
     * once. It must not be negative.
     */
    public Builder gracePeriod(Duration grace) {
      this.grace = Objects.requireNonNull(grace, "grace");
      return this;
    }

    /**
     * The logger (default {@code System.getLogger("io.kplug.sidecar")}, which goes to
     * java.util.logging unless the program routes it elsewhere, e.g. to SLF4J). The SDK logs state
     * changes at INFO (serving, registered, shutting down), problems at WARNING and ERROR, and
     * every heartbeat retry at DEBUG; every message names the plugin.
     */
    public Builder logger(Logger logger) {
      this.logger = Objects.requireNonNull(logger, "logger");
      return this;
    }

    Logger logger() {
      return logger;
    }

    String name() {
      return info.name();
    }

    /** Where the variables are read, for tests that need another environment. */
    Builder environment(java.util.function.UnaryOperator<String> environment) {
      this.environment = environment;
      return this;
    }

    /** The backoff's jitter source, for tests that need the waits exactly. */
    Builder randomUnit(java.util.function.DoubleSupplier randomUnit) {
      this.randomUnit = randomUnit;
      return this;
    }

    /**
     * Checks the settings and prepares the server; it touches nothing yet.
     *
     * @throws StartupException of kind INVALID_NAME, INVALID_CONFIG or INVALID_DECLARATION when the
     *     plugin could not work
     */
    public PluginServer build() throws StartupException {
      Info.validateName(info.name());
      info.validateDeclarations(Capabilities.of(plugin, info));
      if (heartbeatInterval != null
          && (heartbeatInterval.isNegative() || heartbeatInterval.isZero())) {
        throw config("heartbeatInterval(" + heartbeatInterval + "): it must be positive");
      }
      if (grace.isNegative()) {
        throw config("gracePeriod(" + grace + "): it must not be negative");
      }
      Path dir = socketDir;
      SocketDirOrigin origin = SocketDirOrigin.PROGRAM;
      if (dir == null) {
        String env = environment.apply(Protocol.SOCKET_DIR_ENV);
        boolean unset = env == null || env.isEmpty();
        origin = unset ? SocketDirOrigin.DEFAULT : SocketDirOrigin.ENVIRONMENT;
        dir = Path.of(unset ? Protocol.DEFAULT_SOCKET_DIR : env);
      }
      Duration interval = heartbeatInterval;
      if (interval == null) {
        interval = intervalFromEnv(info.name(), environment.apply(Protocol.HEARTBEAT_INTERVAL_ENV));
      }
      if (!Epoll.isAvailable()) {
        throw config(
            "Netty's epoll transport is not available ("
                + Epoll.unavailabilityCause()
                + "); the SDK serves Unix sockets with it, on Linux x86_64. Netty unpacks its"
                + " native library into java.io.tmpdir (or -Dio.netty.native.workdir) before"
                + " loading it: that directory must be writable (with a read-only root"
                + " filesystem, mount an emptyDir at /tmp)");
      }
      if (info.offers().isEmpty() && info.hooks().isEmpty()) {
        logger.log(
            Level.WARNING,
            "plugin "
                + info.name()
                + " offers nothing, so the operator will route no work to it; add an offer to"
                + " its Info");
      }
      return new PluginServer(this, dir.toAbsolutePath().normalize(), origin, interval);
    }

    private StartupException config(String why) {
      return new StartupException(
          StartupException.Kind.INVALID_CONFIG, "plugin " + info.name() + ": " + why);
    }
  }

  /**
   * The heartbeat interval in {@code $KPLUG_HEARTBEAT_INTERVAL}: a plain decimal number of seconds,
   * as Rust's f64 parser reads it ({@code Double.parseDouble} alone would also take "0x1p4",
   * "Infinity" and a trailing "d").
   */
  static Duration intervalFromEnv(String plugin, String text) throws StartupException {
    if (text == null || text.isEmpty()) {
      return Protocol.DEFAULT_HEARTBEAT_INTERVAL;
    }
    double seconds = Double.NaN;
    if (DECIMAL.matcher(text).matches()) {
      try {
        seconds = Double.parseDouble(text);
      } catch (NumberFormatException e) {
        // refused below
      }
    }
    if (Double.isNaN(seconds) || seconds <= 0 || seconds > Long.MAX_VALUE / 1e9) {
      throw new StartupException(
          StartupException.Kind.INVALID_CONFIG,
          "plugin "
              + plugin
              + ": invalid "
              + Protocol.HEARTBEAT_INTERVAL_ENV
              + "=\""
              + text
              + "\": the heartbeat interval is a positive number of seconds, e.g. 5 or 0.5");
    }
    return Duration.ofNanos(Math.round(seconds * 1e9));
  }

  /** The socket the plugin serves on: {@code <socket dir>/plugins/<name>/plugin.sock}. */
  public Path socketPath() {
    return socketPath;
  }

  /** The (absolute) socket dir shared with the operator. */
  public Path socketDir() {
    return socketDir;
  }

  /** Where the socket dir came from: the messages about it say so. */
  SocketDirOrigin socketDirOrigin() {
    return origin;
  }

  /** Identifies this instance in heartbeats: a random UUID, different on every start. */
  public String instanceId() {
    return instanceId;
  }

  /** Whether the operator accepted the last heartbeat. */
  public boolean isRegistered() {
    return heartbeat.registered();
  }

  /** The current heartbeat interval: the configured one, then the one the operator asks for. */
  public Duration heartbeatInterval() {
    return heartbeat.interval();
  }

  /**
   * Claims the socket (removing a stale one; never a live one or a file that is not a socket),
   * serves the Plugin service on it, and only then starts heartbeating, because the operator dials
   * back on the first heartbeat. It returns at once; stop the server with {@link #stop()}.
   *
   * @throws StartupException of kind SOCKET_IN_USE, NOT_A_SOCKET or SOCKET
   * @throws IllegalStateException when called twice
   */
  public void start() throws StartupException {
    synchronized (lock) {
      if (started) {
        throw new IllegalStateException(
            "PluginServer.start called twice; a server runs once, build a new one");
      }
      started = true;
      try {
        socket =
            BoundSocket.bind(
                socketPath,
                info.name(),
                origin,
                path -> {
                  server =
                      NettyServerBuilder.forAddress(new DomainSocketAddress(path.toString()))
                          .channelType(EpollServerDomainSocketChannel.class)
                          // TCP keepalive, which gRPC sets, means nothing on a Unix socket (Netty
                          // warns).
                          .withChildOption(ChannelOption.SO_KEEPALIVE, null)
                          .bossEventLoopGroup(boss)
                          .workerEventLoopGroup(workers)
                          .maxInboundMessageSize(Protocol.MAX_MESSAGE_BYTES)
                          .addService(
                              ServerInterceptors.intercept(
                                  new PluginService(info, plugin, capabilities, logger),
                                  Tracing.INTERCEPTOR))
                          .build();
                  try {
                    server.start();
                  } catch (IOException e) {
                    server = null;
                    throw e;
                  }
                });
      } catch (StartupException e) {
        if (server != null) {
          server.shutdownNow();
          server = null;
        }
        shutDownEventLoops();
        throw e;
      }
      logger.log(
          Level.INFO,
          "plugin "
              + info.name()
              + " "
              + info.version()
              + ": serving on "
              + socketPath
              + " (instance "
              + instanceId
              + ")");
      heartbeat.start();
    }
  }

  /**
   * Shuts the plugin down the way the protocol asks: stop heartbeating, call Registry.Unregister
   * (the operator stops routing calls here and answers once the calls in flight are done; errors
   * are logged), stop taking calls and let those in flight finish (up to the grace period), then
   * remove the socket if it is still ours, and the plugin's directory, {@code plugins/<name>/}, if
   * that left it empty. Calling it again, or before {@link #start()}, does nothing.
   *
   * <p>An interrupt of the calling thread abandons the wait: every call still in flight is
   * cancelled (its handler's thread interrupted), the socket removed, and the interrupt kept.
   */
  public void stop() {
    synchronized (lock) {
      if (server == null || stopped) {
        return;
      }
      stopped = true;
    }
    try {
      heartbeat.stop();
      heartbeat.unregister();
      logger.log(
          Level.INFO,
          "plugin "
              + info.name()
              + ": stopped taking calls; draining those in flight (grace period "
              + grace
              + ")");
      server.shutdown();
      if (!server.awaitTermination(grace.toNanos(), TimeUnit.NANOSECONDS)) {
        logger.log(
            Level.WARNING,
            "plugin "
                + info.name()
                + (grace.isZero()
                    ? ": no grace period; closing every connection"
                    : ": calls still in flight after the grace period; stopping them"));
      }
    } catch (InterruptedException e) {
      logger.log(
          Level.WARNING, "plugin " + info.name() + ": stopping now; calls in flight are abandoned");
      Thread.currentThread().interrupt();
    } finally {
      server.shutdownNow();
      shutDownEventLoops();
      socket.remove();
      if (!Files.exists(socketPath, LinkOption.NOFOLLOW_LINKS)) {
        BoundSocket.removePluginDir(socketPath.getParent());
      }
      logger.log(Level.INFO, "plugin " + info.name() + ": stopped");
    }
  }

  private void shutDownEventLoops() {
    boss.shutdownGracefully(0, 0, TimeUnit.SECONDS);
    workers.shutdownGracefully(0, 0, TimeUnit.SECONDS);
  }
}
