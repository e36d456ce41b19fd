package io.kplug.sidecar;

import java.util.Objects;

/**
 * A Kubernetes kind independently of its version, e.g. {@code new GroupKind("myorg.org",
 * "DatabaseTable")}.
 *
 * @param group the API group; empty for the core group
 * @param kind the kind in CamelCase
 */
public record GroupKind(String group, String kind) {
  /** Checks that neither part is null. */
  public GroupKind {
    Objects.requireNonNull(group, "group (use \"\" for the core group)");
    Objects.requireNonNull(kind, "kind");
  }

  kplug.v1.Types.GroupKind toProto() {
    return kplug.v1.Types.GroupKind.newBuilder().setGroup(group).setKind(kind).build();
  }
}
