package io.kplug.sidecar;

import java.util.Map;
import java.util.Optional;

/**
 * A Validate or Default call: the object being admitted and, on update, the object as it is stored
 * now.
 *
 * @param implementation for a base object, the implementation it is (or would be) reconciled by;
 *     for an extension object, the implementation of this plugin's offer that declares its kind
 * @param operation create or update
 * @param object the object being admitted (a base object or an extension: see its kind)
 * @param oldObject on update, the object as it is stored now; empty on create
 */
public record AdmissionRequest(
    String implementation, Operation operation, KubeObject object, Optional<KubeObject> oldObject) {

  /**
   * Decodes an admission request from what the operator sends ({@code oldObject} empty on create).
   * The SDK does this for every Validate and Default call; it is public for plugins' unit tests.
   *
   * @throws InvalidRequestException with the message every SDK answers INVALID_ARGUMENT with, e.g.
   *     "kplug: the object is not valid JSON: ..."
   */
  public static AdmissionRequest decode(
      String implementation, Operation operation, byte[] object, byte[] oldObject)
      throws InvalidRequestException {
    KubeObject decoded = KubeObject.decode(object, "the object");
    Optional<KubeObject> old = Optional.empty();
    if (oldObject != null && oldObject.length > 0) {
      old = Optional.of(KubeObject.decode(oldObject, "the old object"));
    }
    return new AdmissionRequest(implementation, operation, decoded, old);
  }

  /** The object's name. */
  public String name() {
    return object.name();
  }

  /** The object's kind. */
  public String kind() {
    return object.kind();
  }

  /** The object's spec; empty when absent or not a JSON object. */
  public Map<String, Object> spec() {
    return object.spec();
  }

  /** Decodes the object's spec into your own type; see {@link KubeObject#decodeSpec}. */
  public <T> T decodeSpec(Class<T> type) {
    return object.decodeSpec(type);
  }
}
