package io.kplug.sidecar;

/** The point in an object's lifecycle where a hook runs. */
public enum HookPhase {
  /** Before the implementation's Reconcile. */
  BEFORE_RECONCILE(kplug.v1.Types.HookPhase.HOOK_PHASE_BEFORE_RECONCILE),
  /** After the implementation's Reconcile answered (whatever its outcome). */
  AFTER_RECONCILE(kplug.v1.Types.HookPhase.HOOK_PHASE_AFTER_RECONCILE),
  /** Before the implementation's Finalize. */
  BEFORE_FINALIZE(kplug.v1.Types.HookPhase.HOOK_PHASE_BEFORE_FINALIZE),
  /** After the implementation's Finalize answered (whatever its outcome). */
  AFTER_FINALIZE(kplug.v1.Types.HookPhase.HOOK_PHASE_AFTER_FINALIZE);

  private final kplug.v1.Types.HookPhase wire;

  HookPhase(kplug.v1.Types.HookPhase wire) {
    this.wire = wire;
  }

  kplug.v1.Types.HookPhase toProto() {
    return wire;
  }

  /** The phase of a wire value, or null for one this SDK does not know (a newer operator). */
  static HookPhase fromProto(kplug.v1.Types.HookPhase wire) {
    for (HookPhase p : values()) {
      if (p.wire == wire) {
        return p;
      }
    }
    return null;
  }
}
