package io.kplug.sidecar;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;
import java.util.Optional;

/**
 * A Kubernetes object (the base object or an extension) as the operator sent it: JSON, as the API
 * server serves it.
 *
 * <p>{@link #map()} is the whole object decoded the way Kubernetes' unstructured objects are
 * (objects as {@code Map<String, Object>}, arrays as {@code List<Object>}, integers as {@code
 * Long}, other numbers as {@code Double}); {@link #tree()} is the same as Jackson's tree. The
 * accessors cover what plugins use most; {@link #decodeSpec} and {@link #decode} decode into your
 * own types (records or beans, with Jackson's rules).
 */
public final class KubeObject {
  private static final TypeReference<Map<String, Object>> MAP = new TypeReference<>() {};

  private final byte[] raw;
  private final ObjectNode tree;

  private KubeObject(byte[] raw, ObjectNode tree) {
    this.raw = raw;
    this.tree = tree;
  }

  /**
   * Decodes one Kubernetes object from JSON. Plugins get their objects decoded already (in {@link
   * Request}); this is for tests and tools.
   *
   * @throws IllegalArgumentException unless the data is UTF-8 JSON whose top level is an object
   */
  public static KubeObject decode(byte[] json) {
    try {
      return decode(json, "the object");
    } catch (InvalidRequestException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  /** {@link #decode(byte[])} with the protocol's message ("kplug: {what} is not valid JSON"). */
  static KubeObject decode(byte[] json, String what) throws InvalidRequestException {
    try {
      return new KubeObject(json.clone(), Json.decodeObject(json));
    } catch (Json.NotAnObject e) {
      throw new InvalidRequestException("kplug: " + what + " is " + e.getMessage());
    }
  }

  /** The whole object as a fresh, modifiable map. */
  public Map<String, Object> map() {
    return Json.MAPPER.convertValue(tree, MAP);
  }

  /** The whole object as Jackson's tree. It is shared, not copied: read it, do not modify it. */
  public ObjectNode tree() {
    return tree;
  }

  /** The object exactly as the operator sent it (a copy). */
  public byte[] json() {
    return raw.clone();
  }

  /**
   * The value at a path of keys, e.g. {@code get("metadata", "labels", "app")}, as {@link #map()}
   * would hold it; empty when it is not there.
   */
  public Optional<Object> get(String... path) {
    JsonNode node = at(path);
    if (node == null) {
      return Optional.empty();
    }
    return Optional.ofNullable(Json.MAPPER.convertValue(node, Object.class));
  }

  private JsonNode at(String... path) {
    JsonNode node = tree;
    for (String key : path) {
      if (node == null || !node.isObject()) {
        return null;
      }
      node = node.get(key);
    }
    return node;
  }

  private String text(String... path) {
    JsonNode node = at(path);
    return node != null && node.isTextual() ? node.textValue() : "";
  }

  /** {@code apiVersion}, e.g. "myorg.org/v1alpha1"; empty when absent. */
  public String apiVersion() {
    return text("apiVersion");
  }

  /** {@code kind}, e.g. "DatabaseTable"; empty when absent. */
  public String kind() {
    return text("kind");
  }

  /** {@code metadata.name}; empty when absent. */
  public String name() {
    return text("metadata", "name");
  }

  /** {@code metadata.namespace}; empty for cluster-scoped objects. */
  public String namespace() {
    return text("metadata", "namespace");
  }

  /** {@code metadata.generation}, 0 when absent. */
  public long generation() {
    JsonNode node = at("metadata", "generation");
    return node != null && node.canConvertToLong() && node.isIntegralNumber() ? node.asLong() : 0;
  }

  /** Whether {@code metadata.deletionTimestamp} is set (always true in Finalize on deletion). */
  public boolean isBeingDeleted() {
    JsonNode node = at("metadata", "deletionTimestamp");
    return node != null && !node.isNull();
  }

  /** The object's spec as a fresh map; empty when absent or not a JSON object. */
  public Map<String, Object> spec() {
    JsonNode spec = tree.get("spec");
    return spec != null && spec.isObject()
        ? Json.MAPPER.convertValue(spec, MAP)
        : new java.util.LinkedHashMap<>();
  }

  /**
   * Decodes the object's spec into your own type (a record or a bean), with Jackson's rules;
   * unknown fields are ignored. A missing spec decodes as {@code {}}.
   *
   * @throws IllegalArgumentException when the spec does not fit the type
   */
  public <T> T decodeSpec(Class<T> type) {
    JsonNode spec = tree.get("spec");
    try {
      return Json.MAPPER.treeToValue(spec == null ? Json.MAPPER.createObjectNode() : spec, type);
    } catch (JsonProcessingException | IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "kplug: spec of " + ref() + " does not fit " + type.getSimpleName() + ": " + why(e), e);
    }
  }

  /**
   * Decodes the whole object into your own type (e.g. a record with metadata, spec and status),
   * with Jackson's rules; unknown fields are ignored.
   *
   * @throws IllegalArgumentException when the object does not fit the type
   */
  public <T> T decode(Class<T> type) {
    try {
      return Json.MAPPER.treeToValue(tree, type);
    } catch (JsonProcessingException | IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "kplug: " + ref() + " does not fit " + type.getSimpleName() + ": " + why(e), e);
    }
  }

  private static String why(Exception e) {
    return e instanceof JsonProcessingException j ? j.getOriginalMessage() : e.getMessage();
  }

  /** A reference to this object, e.g. for an Event's target. */
  public ObjectRef ref() {
    return new ObjectRef(apiVersion(), kind(), namespace(), name());
  }

  /** "Kind namespace/name". */
  @Override
  public String toString() {
    return ref().toString();
  }
}
