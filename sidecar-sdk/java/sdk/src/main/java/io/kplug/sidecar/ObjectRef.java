package io.kplug.sidecar;

/**
 * Points at one Kubernetes object.
 *
 * @param apiVersion "group/version" ("v1" for the core group)
 * @param kind the kind in CamelCase
 * @param namespace empty for cluster-scoped objects
 * @param name the object's name
 */
public record ObjectRef(String apiVersion, String kind, String namespace, String name) {
  /** "Kind namespace/name", or "Kind name" when cluster-scoped. */
  @Override
  public String toString() {
    return namespace.isEmpty() ? kind + " " + name : kind + " " + namespace + "/" + name;
  }

  kplug.v1.Types.ObjectRef toProto() {
    return kplug.v1.Types.ObjectRef.newBuilder()
        .setApiVersion(apiVersion)
        .setKind(kind)
        .setNamespace(namespace)
        .setName(name)
        .build();
  }
}
