package io.kplug.sidecar;

import java.util.Objects;

/**
 * The answer to the operator's Probe.
 *
 * @param ready false while the plugin cannot take work
 * @param message why not, for humans
 */
public record Readiness(boolean ready, String message) {
  /** Ready, with no message. */
  public static final Readiness READY = new Readiness(true, "");

  /** Checks that the message is not null. */
  public Readiness {
    Objects.requireNonNull(message, "message");
  }

  /** Not ready, because of {@code message}. */
  public static Readiness notReady(String message) {
    return new Readiness(false, message);
  }
}
