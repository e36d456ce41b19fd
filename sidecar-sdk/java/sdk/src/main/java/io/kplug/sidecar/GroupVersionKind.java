package io.kplug.sidecar;

import java.util.Objects;

/**
 * A Kubernetes kind in one version, e.g. the kind of the children a plugin manages: {@code
 * GroupVersionKind.of("apps/v1", "Deployment")}.
 *
 * @param group the API group; empty for the core group
 * @param version the version, e.g. "v1"
 * @param kind the kind in CamelCase
 */
public record GroupVersionKind(String group, String version, String kind) {
  /** Checks that no part is null. */
  public GroupVersionKind {
    Objects.requireNonNull(group, "group (use \"\" for the core group)");
    Objects.requireNonNull(version, "version");
    Objects.requireNonNull(kind, "kind");
  }

  /**
   * The kind named by an {@code apiVersion} ("apps/v1", or "v1" for the core group) and a kind, as
   * objects spell them, e.g. {@code GroupVersionKind.of("v1", "ConfigMap")}.
   */
  public static GroupVersionKind of(String apiVersion, String kind) {
    Objects.requireNonNull(apiVersion, "apiVersion");
    // The core group's apiVersion has no '/': it is the version alone.
    int slash = apiVersion.lastIndexOf('/');
    return new GroupVersionKind(
        apiVersion.substring(0, Math.max(slash, 0)), apiVersion.substring(slash + 1), kind);
  }

  /** "group/version", or the version alone for the core group. */
  public String apiVersion() {
    return group.isEmpty() ? version : group + "/" + version;
  }

  kplug.v1.Types.GroupVersionKind toProto() {
    return kplug.v1.Types.GroupVersionKind.newBuilder()
        .setGroup(group)
        .setVersion(version)
        .setKind(kind)
        .build();
  }
}
