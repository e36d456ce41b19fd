package io.kplug.sidecar;

/** A call of the Plugin service, for {@link CallPolicy}. */
public enum Call {
  /** Plugin.Reconcile. */
  RECONCILE(kplug.v1.Types.Call.CALL_RECONCILE),
  /** Plugin.Finalize. */
  FINALIZE(kplug.v1.Types.Call.CALL_FINALIZE),
  /** Plugin.Validate. */
  VALIDATE(kplug.v1.Types.Call.CALL_VALIDATE),
  /** Plugin.Default. */
  DEFAULT(kplug.v1.Types.Call.CALL_DEFAULT),
  /** Plugin.Hook: every hook of the plugin. */
  HOOK(kplug.v1.Types.Call.CALL_HOOK);

  private final kplug.v1.Types.Call wire;

  Call(kplug.v1.Types.Call wire) {
    this.wire = wire;
  }

  kplug.v1.Types.Call toProto() {
    return wire;
  }
}
