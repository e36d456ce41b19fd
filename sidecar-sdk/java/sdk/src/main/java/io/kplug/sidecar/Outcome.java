package io.kplug.sidecar;

/** What a call achieved. */
public enum Outcome {
  /** Done: the object is reconciled (for Finalize: cleaned up, it may go). */
  OK(kplug.v1.Types.Outcome.OUTCOME_OK),
  /** Not done yet, nothing is wrong: call again after the retry delay. */
  RETRY(kplug.v1.Types.Outcome.OUTCOME_RETRY),
  /** Failed: the message says why, and the operator retries with backoff. */
  FAILED(kplug.v1.Types.Outcome.OUTCOME_FAILED);

  private final kplug.v1.Types.Outcome wire;

  Outcome(kplug.v1.Types.Outcome wire) {
    this.wire = wire;
  }

  kplug.v1.Types.Outcome toProto() {
    return wire;
  }

  /** The outcome of a wire value, or null for UNSPECIFIED and values this SDK does not know. */
  static Outcome fromProto(kplug.v1.Types.Outcome wire) {
    for (Outcome o : values()) {
      if (o.wire == wire) {
        return o;
      }
    }
    return null;
  }
}
