package io.kplug.sidecar;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.lang.System.Logger;
import java.lang.System.Logger.Level;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.DoubleSupplier;
import kplug.v1.RegistryGrpc;
import kplug.v1.RegistryOuterClass.HeartbeatRequest;
import kplug.v1.RegistryOuterClass.HeartbeatResponse;
import kplug.v1.RegistryOuterClass.UnregisterRequest;
import kplug.v1.RegistryOuterClass.UnregisterResponse;

/**
 * Registration with the operator: heartbeats with backoff, and Unregister on shutdown. Every
 * heartbeat carries the plugin's full description, so an operator that restarted (and forgot the
 * instance) simply registers it again: there is no separate "register" step to redo.
 */
final class Heartbeater {
  private enum State {
    STARTING,
    REGISTERED,
    REFUSED,
    UNREACHABLE
  }

  private final Path registry;
  private final SocketDirOrigin origin;
  private final HeartbeatRequest request;
  private final EventLoopGroup group;
  private final Logger logger;
  private final String plugin;
  private final DoubleSupplier randomUnit;

  private volatile Duration interval;
  private volatile boolean registered;
  private final Object lock = new Object();
  private boolean stopping;
  private Thread thread;
  private ManagedChannel channel;

  Heartbeater(
      Path registry,
      SocketDirOrigin origin,
      HeartbeatRequest request,
      Duration interval,
      EventLoopGroup group,
      Logger logger,
      DoubleSupplier randomUnit) {
    this.registry = registry;
    this.origin = origin;
    this.request = request;
    this.interval = interval;
    this.group = group;
    this.logger = logger;
    this.plugin = request.getName();
    this.randomUnit = randomUnit;
  }

  /** The uniform [0, 1) draws of the backoff's jitter. */
  static DoubleSupplier jitter() {
    return () -> ThreadLocalRandom.current().nextDouble();
  }

  /**
   * The protocol's wait after the {@code attempt}-th failed heartbeat in a row (counting from 1; 0
   * counts as 1), for {@code unit} drawn uniformly from [0, 1): {@code min(ceiling, 100 ms ×
   * 2^(attempt−1))}, shortened by 10 % × unit of it. The jitter only shortens, so the wait never
   * exceeds {@code ceiling}, the heartbeat interval in force. A unit outside [0, 1] (or NaN) is
   * clamped.
   */
  static Duration backoffDelay(int attempt, Duration ceiling, double unit) {
    long ceil = ceiling.toNanos();
    long base = Protocol.BACKOFF_INITIAL.toNanos();
    for (int i = 1; i < attempt && base < ceil; i++) {
      if (base > ceil / Protocol.BACKOFF_FACTOR) { // the next step passes the ceiling
        base = ceil;
        break;
      }
      base *= Protocol.BACKOFF_FACTOR;
    }
    base = Math.min(base, ceil);
    if (Double.isNaN(unit) || unit < 0) {
      unit = 0;
    } else if (unit > 1) {
      unit = 1;
    }
    return Duration.ofNanos(base - (long) (base * Protocol.BACKOFF_JITTER * unit));
  }

  Duration interval() {
    return interval;
  }

  boolean registered() {
    return registered;
  }

  /** Starts heartbeating, on a thread of its own. */
  void start() {
    synchronized (lock) {
      thread = new Thread(this::run, "kplug-heartbeat-" + plugin);
      thread.setDaemon(true);
      thread.start();
    }
  }

  /** Stops heartbeating and waits until no heartbeat is in flight. */
  void stop() throws InterruptedException {
    Thread running;
    synchronized (lock) {
      stopping = true;
      lock.notifyAll();
      running = thread;
    }
    closeChannel(); // cancels a heartbeat in flight
    if (running != null) {
      running.join();
    }
  }

  /**
   * A Registry client on a channel opened on first use. After a failure the channel is closed and
   * the next call opens a fresh one, so that gRPC's own reconnect backoff (1 s growing to 2 min)
   * never delays noticing an operator that is back.
   */
  private RegistryGrpc.RegistryBlockingStub client() {
    synchronized (lock) {
      if (channel == null) {
        // The :authority is "localhost": the operator's HTTP/2 server resets streams whose
        // authority is not a valid host name (docs/protocol.md).
        channel =
            NettyChannelBuilder.forAddress(new DomainSocketAddress(registry.toString()))
                .eventLoopGroup(group)
                .channelType(EpollDomainSocketChannel.class)
                // gRPC sets TCP keepalive, which a Unix socket does not know: without this,
                // Netty warns on every connect (on every retry while the operator is away).
                .withOption(ChannelOption.SO_KEEPALIVE, null)
                .overrideAuthority("localhost")
                .usePlaintext()
                .maxInboundMessageSize(Protocol.MAX_MESSAGE_BYTES)
                .build();
      }
      return RegistryGrpc.newBlockingStub(channel);
    }
  }

  private void closeChannel() {
    ManagedChannel closing;
    synchronized (lock) {
      closing = channel;
      channel = null;
    }
    if (closing != null) {
      closing.shutdownNow();
    }
  }

  /** Waits {@code delay}, or until stopped; returns whether to go on. */
  private boolean sleep(Duration delay) {
    long until = System.nanoTime() + delay.toNanos();
    synchronized (lock) {
      while (!stopping) {
        long left = until - System.nanoTime();
        if (left <= 0) {
          return true;
        }
        try {
          TimeUnit.NANOSECONDS.timedWait(lock, left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return false;
        }
      }
      return false;
    }
  }

  private boolean stopping() {
    synchronized (lock) {
      return stopping;
    }
  }

  /** Heartbeats until stopped: at the interval while the operator answers, with backoff else. */
  private void run() {
    State state = State.STARTING;
    String refusal = "";
    int failures = 0;
    try {
      while (!stopping()) {
        Duration delay;
        try {
          HeartbeatResponse response =
              client()
                  .withDeadlineAfter(Protocol.HEARTBEAT_TIMEOUT.toNanos(), TimeUnit.NANOSECONDS)
                  .heartbeat(request);
          failures = 0;
          if (response.hasInterval()) {
            Duration asked = Durations.fromProto(response.getInterval());
            if (!asked.isNegative() && !asked.isZero()) {
              interval = asked;
            }
          }
          delay = interval;
          if (response.getAccepted()) {
            if (state != State.REGISTERED) {
              String note = response.getReason().isEmpty() ? "" : " (" + response.getReason() + ")";
              logger.log(
                  Level.INFO,
                  "plugin "
                      + plugin
                      + ": registered with the operator on "
                      + registry
                      + ", heartbeat every "
                      + delay
                      + ", TTL "
                      + Durations.fromProto(response.getTtl())
                      + note);
            }
            state = State.REGISTERED;
            registered = true;
          } else {
            registered = false;
            if (state != State.REFUSED || !response.getReason().equals(refusal)) {
              String reason =
                  response.getReason().isEmpty() ? "no reason given" : response.getReason();
              logger.log(
                  Level.ERROR,
                  "plugin "
                      + plugin
                      + ": the operator refused the registration: "
                      + reason
                      + "; heartbeats go on (an upgraded operator may accept it)");
            }
            state = State.REFUSED;
            refusal = response.getReason();
          }
        } catch (RuntimeException e) {
          // A StatusRuntimeException, or anything else gRPC throws: the heartbeats must go on.
          if (stopping()) {
            return;
          }
          failures++;
          delay = backoffDelay(failures, interval, randomUnit.getAsDouble());
          registered = false;
          logFailure(state, e);
          state = State.UNREACHABLE;
          logger.log(
              Level.DEBUG,
              "plugin " + plugin + ": heartbeat failure " + failures + ", next try in " + delay);
          closeChannel();
        }
        if (!sleep(delay)) {
          return;
        }
      }
    } finally {
      closeChannel();
    }
  }

  /**
   * Logs a failed heartbeat that changes the state, at WARNING level (the retries after it are
   * logged at DEBUG level): before the operator ever answered, a {@code registry.sock} that is
   * missing or refuses connections says where the plugin looks and where that came from.
   */
  private void logFailure(State state, RuntimeException e) {
    if (state == State.STARTING && registryAbsent()) {
      logger.log(
          Level.WARNING,
          "plugin " + plugin + ": " + origin.registryWaitingMessage(registry.getParent()));
    } else if (state != State.UNREACHABLE) {
      Status status = Status.fromThrowable(e);
      logger.log(
          Level.WARNING,
          "plugin "
              + plugin
              + ": "
              + (state == State.STARTING
                  ? "cannot reach the operator's registry"
                  : "lost the operator")
              + " on "
              + registry
              + " ("
              + status.getCode()
              + ": "
              + status.getDescription()
              + "); retrying with backoff");
    }
  }

  /** Whether {@code registry.sock} is missing or refuses connections (not merely slow). */
  private boolean registryAbsent() {
    try {
      return !BoundSocket.isLive(registry);
    } catch (IOException e) {
      return false; // cannot be told (e.g. no permission): not "absent"
    }
  }

  /**
   * Tells the operator this instance is going away. The operator answers once the calls in flight
   * to it are done, so this can take a while (bounded by a 10 s deadline). Errors are logged, not
   * thrown: the operator also notices the socket is gone.
   */
  void unregister() {
    registered = false;
    try {
      UnregisterResponse response =
          client()
              .withDeadlineAfter(Protocol.UNREGISTER_TIMEOUT.toNanos(), TimeUnit.NANOSECONDS)
              .unregister(
                  UnregisterRequest.newBuilder()
                      .setName(plugin)
                      .setInstanceId(request.getInstanceId())
                      .build());
      logger.log(
          Level.INFO,
          "plugin "
              + plugin
              + ": unregistered from the operator"
              + (response.getRemoved() ? "" : " (it did not know this instance)"));
    } catch (RuntimeException e) {
      Status status = Status.fromThrowable(e);
      logger.log(
          Level.WARNING,
          "plugin "
              + plugin
              + ": Unregister failed on "
              + registry
              + " ("
              + status.getCode()
              + ": "
              + status.getDescription()
              + "); exiting anyway, the operator will notice the socket is gone");
    } finally {
      closeChannel();
    }
  }
}
