package io.kplug.sidecar;

import java.util.Objects;

/**
 * A hook the plugin declares ({@link Info.Builder#hook}): the operator calls {@link Plugin#hook} at
 * {@code phase} for every object of the {@code base} kind, whichever implementation reconciles it
 * (a plugin may hook into a kind it does not offer).
 *
 * @param name a DNS label, unique within the plugin; it names the hook in {@link HookCall#hook()},
 *     conditions, Events and metrics
 * @param base the kind whose objects the hook is called for
 * @param phase when the hook is called
 * @param behaviour how its result affects the step
 * @param order hooks of one phase and kind run by increasing order, then plugin name, then hook
 *     name
 */
public record Hook(
    String name, GroupKind base, HookPhase phase, HookBehaviour behaviour, int order) {
  /** Checks that nothing is null. */
  public Hook {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(base, "base");
    Objects.requireNonNull(phase, "phase");
    Objects.requireNonNull(behaviour, "behaviour");
  }

  kplug.v1.Types.Hook toProto() {
    return kplug.v1.Types.Hook.newBuilder()
        .setName(name)
        .setBase(base.toProto())
        .setPhase(phase.toProto())
        .setBehaviour(behaviour.toProto())
        .setOrder(order)
        .build();
  }
}
