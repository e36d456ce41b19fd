package io.kplug.sidecar;

import java.time.Duration;
import java.util.Objects;

/**
 * How the plugin asks to be called for one call, declared with {@link Info.Builder#callPolicy} (one
 * per call). The operator clamps the deadline to its bounds (at least 1 s, at most 10 min, and at
 * most 10 s for Validate and Default); a call past it is reported as a timeout, and the plugin
 * stays registered. The SDK tells the handler about the deadline: {@link Request#deadline()}, and
 * an interrupt of the handler's thread when the operator gives up.
 *
 * @param call the call this policy is for
 * @param deadline how long the operator waits for an answer; null for the operator's default
 * @param failurePolicy for {@link Call#VALIDATE} and {@link Call#DEFAULT}: refuse or admit the
 *     object when the call fails; null for the operator's default
 */
public record CallPolicy(Call call, Duration deadline, FailurePolicy failurePolicy) {
  /** Checks that the call is set. */
  public CallPolicy {
    Objects.requireNonNull(call, "call");
  }

  /** A policy with a deadline only. */
  public static CallPolicy deadline(Call call, Duration deadline) {
    return new CallPolicy(call, deadline, null);
  }

  kplug.v1.Types.CallPolicy toProto() {
    var policy = kplug.v1.Types.CallPolicy.newBuilder().setCall(call.toProto());
    if (deadline != null) {
      policy.setDeadline(Durations.toProto(deadline));
    }
    if (failurePolicy != null) {
      policy.setFailurePolicy(failurePolicy.toProto());
    }
    return policy.build();
  }
}
