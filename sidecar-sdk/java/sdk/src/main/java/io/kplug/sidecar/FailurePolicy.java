package io.kplug.sidecar;

/**
 * What admission does when a Validate or Default call fails (an error, a timeout, the plugin gone).
 * A {@link CallPolicy} without one takes the operator's {@code --webhook-failure-policy}.
 */
public enum FailurePolicy {
  /** Refuse the object. */
  FAIL(kplug.v1.Types.FailurePolicy.FAILURE_POLICY_FAIL),
  /** Admit it, with a warning. */
  IGNORE(kplug.v1.Types.FailurePolicy.FAILURE_POLICY_IGNORE);

  private final kplug.v1.Types.FailurePolicy wire;

  FailurePolicy(kplug.v1.Types.FailurePolicy wire) {
    this.wire = wire;
  }

  kplug.v1.Types.FailurePolicy toProto() {
    return wire;
  }
}
