package io.kplug.sidecar;

/** How a hook's result affects the lifecycle step it surrounds. */
public enum HookBehaviour {
  /** The operator waits; anything but OK stops the step, and a condition names the hook. */
  SYNC_ENFORCE(kplug.v1.Types.HookBehaviour.HOOK_BEHAVIOUR_SYNC_ENFORCE),
  /** The operator waits; a failure becomes a Warning Event, and the step goes on. */
  SYNC_BYPASS(kplug.v1.Types.HookBehaviour.HOOK_BEHAVIOUR_SYNC_BYPASS),
  /** Queued, never waited for; a failure becomes a Warning Event. */
  ASYNC(kplug.v1.Types.HookBehaviour.HOOK_BEHAVIOUR_ASYNC);

  private final kplug.v1.Types.HookBehaviour wire;

  HookBehaviour(kplug.v1.Types.HookBehaviour wire) {
    this.wire = wire;
  }

  kplug.v1.Types.HookBehaviour toProto() {
    return wire;
  }
}
