package io.kplug.sidecar;

/** The status of a Kubernetes condition a plugin reports. */
public enum ConditionStatus {
  /** The condition holds. */
  TRUE(kplug.v1.Types.ConditionStatus.CONDITION_STATUS_TRUE),
  /** The condition does not hold. */
  FALSE(kplug.v1.Types.ConditionStatus.CONDITION_STATUS_FALSE),
  /** It is not known whether the condition holds. */
  UNKNOWN(kplug.v1.Types.ConditionStatus.CONDITION_STATUS_UNKNOWN);

  private final kplug.v1.Types.ConditionStatus wire;

  ConditionStatus(kplug.v1.Types.ConditionStatus wire) {
    this.wire = wire;
  }

  kplug.v1.Types.ConditionStatus toProto() {
    return wire;
  }
}
