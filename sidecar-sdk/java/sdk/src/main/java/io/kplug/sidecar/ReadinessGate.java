package io.kplug.sidecar;

/**
 * A readiness you set from your own code, e.g. from a thread watching your database. It starts
 * ready. Answer the operator's probes from it:
 *
 * <pre>{@code
 * private final ReadinessGate gate = new ReadinessGate();
 *
 * @Override
 * public Readiness readiness() {
 *   return gate.readiness();
 * }
 *
 * // elsewhere
 * gate.setNotReady("database unreachable");
 * }</pre>
 *
 * <p>It is safe for concurrent use.
 */
public final class ReadinessGate {
  private volatile Readiness readiness = Readiness.READY;

  /** Lets the operator route work to the plugin. */
  public void setReady() {
    readiness = Readiness.READY;
  }

  /** Stops the operator from routing work to the plugin; {@code message} says why. */
  public void setNotReady(String message) {
    readiness = Readiness.notReady(message);
  }

  /** The current readiness. */
  public Readiness readiness() {
    return readiness;
  }
}
