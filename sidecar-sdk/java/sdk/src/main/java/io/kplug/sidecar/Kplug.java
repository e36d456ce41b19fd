package io.kplug.sidecar;

import java.lang.System.Logger;
import java.lang.System.Logger.Level;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import sun.misc.Signal;
import sun.misc.SignalHandler;

/**
 * Runs a plugin as the whole program:
 *
 * <pre>{@code
 * public static void main(String[] args) {
 *   Kplug.main(INFO, new Hello());
 * }
 * }</pre>
 */
public final class Kplug {
  private Kplug() {}

  /**
   * Runs {@code plugin} until SIGTERM or SIGINT, then unregisters, drains the calls in flight,
   * removes the socket and exits 0. A second signal during the drain abandons the calls in flight
   * and exits 1 at once. When the plugin cannot start (an invalid name, a socket in use...), it
   * logs why and exits 1. It never returns.
   *
   * <p>Settings come from the environment ({@code KPLUG_SOCKET_DIR}, {@code
   * KPLUG_HEARTBEAT_INTERVAL}); {@link #main(PluginServer.Builder)} takes a builder to set them in
   * code.
   */
  public static void main(Info info, Plugin plugin) {
    main(PluginServer.builder(info, plugin));
  }

  /** {@link #main(Info, Plugin)} with the settings of {@code builder}. */
  public static void main(PluginServer.Builder builder) {
    Logger logger = builder.logger();
    // Signals are caught before the socket is bound, so that a SIGTERM during start-up still
    // ends in the drain. Java's own handling of SIGTERM (run the shutdown hooks, exit 143) would
    // not let the drain end with status 0.
    Thread main = Thread.currentThread();
    CountDownLatch signalled = new CountDownLatch(1);
    AtomicInteger signals = new AtomicInteger();
    SignalHandler handler =
        signal -> {
          String name = "SIG" + signal.getName();
          if (signals.incrementAndGet() == 1) {
            logger.log(
                Level.INFO, "plugin " + builder.name() + ": " + name + " received; shutting down");
            signalled.countDown();
          } else {
            logger.log(
                Level.WARNING,
                "plugin " + builder.name() + ": " + name + " received again; stopping now");
            main.interrupt(); // PluginServer.stop gives up waiting: calls in flight are abandoned
          }
        };
    Signal.handle(new Signal("TERM"), handler);
    Signal.handle(new Signal("INT"), handler);
    PluginServer server;
    try {
      server = builder.build();
      server.start();
    } catch (StartupException e) {
      logger.log(Level.ERROR, e.getMessage());
      System.exit(1);
      return;
    }
    try {
      signalled.await();
    } catch (InterruptedException e) {
      // Only the second signal interrupts this thread, and the first came before it.
    }
    server.stop();
    System.exit(signals.get() > 1 ? 1 : 0);
  }
}
