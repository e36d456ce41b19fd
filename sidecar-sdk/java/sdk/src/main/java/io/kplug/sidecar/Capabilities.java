package io.kplug.sidecar;

import java.util.ArrayList;
import java.util.List;
import kplug.v1.Types.Capability;

/**
 * What a plugin advertises: RECONCILE always, each optional call whose {@link Plugin} method the
 * plugin's class overrides (a default method that is not overridden is what the interface declares,
 * so it tells the two apart without calling anything), and CHILDREN when an offer declares child
 * kinds.
 */
record Capabilities(
    boolean finalizes,
    boolean validates,
    boolean defaults,
    boolean hooks,
    boolean children,
    boolean mutates) {

  static Capabilities of(Plugin plugin, Info info) {
    return new Capabilities(
        overrides(plugin, "finalize", Request.class),
        overrides(plugin, "validate", AdmissionRequest.class),
        overrides(plugin, "defaults", AdmissionRequest.class),
        overrides(plugin, "hook", HookCall.class),
        info.offers().stream().anyMatch(o -> !o.children().isEmpty()),
        overrides(plugin, "mutate", MutateCall.class));
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
    if (children) {
      caps.add(Capability.CAPABILITY_CHILDREN);
    }
    if (mutates) {
      caps.add(Capability.CAPABILITY_MUTATE);
    }
    return caps;
  }
}
