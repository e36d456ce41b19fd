package io.kplug.sidecar;

import java.util.ArrayList;
import java.util.List;
import kplug.v1.Types.Capability;

/**
 * What a plugin advertises: RECONCILE always, and each optional call whose {@link Plugin} method
 * the plugin's class overrides (a default method that is not overridden is what the interface
 * declares, so it tells the two apart without calling anything).
 */
record Capabilities(boolean finalizes, boolean validates, boolean defaults, boolean hooks) {

  static Capabilities of(Plugin plugin) {
    return new Capabilities(
        overrides(plugin, "finalize", Request.class),
        overrides(plugin, "validate", AdmissionRequest.class),
        overrides(plugin, "defaults", AdmissionRequest.class),
        overrides(plugin, "hook", HookCall.class));
  }

  private static boolean overrides(Plugin plugin, String method, Class<?> parameter) {
    try {
      return plugin.getClass().getMethod(method, parameter).getDeclaringClass() != Plugin.class;
    } catch (NoSuchMethodException e) {
      throw new AssertionError("Plugin declares " + method, e);
    }
  }

  /** In the order every SDK sends them. */
  List<Capability> toProto() {
    var caps = new ArrayList<Capability>();
    caps.add(Capability.CAPABILITY_RECONCILE);
    if (finalizes) {
      caps.add(Capability.CAPABILITY_FINALIZE);
    }
    if (validates) {
      caps.add(Capability.CAPABILITY_VALIDATE);
    }
    if (defaults) {
      caps.add(Capability.CAPABILITY_DEFAULT);
    }
    if (hooks) {
      caps.add(Capability.CAPABILITY_HOOKS);
    }
    return caps;
  }
}
