package io.kplug.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import kplug.v1.PluginOuterClass;

/**
 * A plugin's answer to Default: JSON Patch operations (RFC 6902) on the object, limited to {@code
 * /spec}, {@code /metadata/labels} and {@code /metadata/annotations} (or below them). Start with
 * {@link #none()}:
 *
 * <pre>{@code
 * return Defaults.none().add("/spec/storageEngine", "InnoDB");
 * }</pre>
 *
 * <p>Paths are JSON Pointers ({@code ~1} stands for {@code /} in a key, as in {@code
 * /metadata/labels/app.kubernetes.io~1name}). A path outside the allowed ones is a plugin bug: the
 * first such mistake is kept ({@link #problem()}) and the call is answered with a gRPC INTERNAL
 * error "plugin bug: ..." (so that the failure policy decides), instead of a patch the operator
 * would refuse.
 */
public final class Defaults {
  private final ArrayNode operations = Json.MAPPER.createArrayNode();
  private final List<String> warnings = new ArrayList<>();
  private String problem;

  private Defaults() {}

  /** Nothing to default, so far. */
  public static Defaults none() {
    return new Defaults();
  }

  /** Sets {@code value} at {@code path} (a new member, or the member replaced). */
  public Defaults add(String path, Object value) {
    return push("add", path, value, true);
  }

  /** Replaces the value at {@code path}, which must exist. */
  public Defaults replace(String path, Object value) {
    return push("replace", path, value, true);
  }

  /** Removes the value at {@code path}, which must exist. */
  public Defaults remove(String path) {
    return push("remove", path, null, false);
  }

  /** Adds a warning shown to the client (kubectl prints it). */
  public Defaults withWarning(String warning) {
    warnings.add(Objects.requireNonNull(warning, "warning"));
    return this;
  }

  /** Whether no operation was added. */
  public boolean isEmpty() {
    return operations.isEmpty();
  }

  /**
   * The first mistake made while building (a path outside the allowed ones, a value that is not
   * JSON), or null.
   */
  public String problem() {
    return problem;
  }

  private Defaults push(String op, String path, Object value, boolean hasValue) {
    if (problem != null) {
      return this;
    }
    if (!allowed(path)) {
      problem =
          "a default may only change /spec, /metadata/labels and /metadata/annotations; "
              + op
              + " "
              + Json.encodeString(path)
              + " is outside them";
      return this;
    }
    ObjectNode operation = Json.MAPPER.createObjectNode().put("op", op).put("path", path);
    if (hasValue) {
      JsonNode tree;
      try {
        tree = Json.toTree(value, "the value of " + op + " " + Json.encodeString(path));
      } catch (IllegalArgumentException e) {
        problem = e.getMessage();
        return this;
      }
      operation.set("value", tree);
    }
    operations.add(operation);
    return this;
  }

  private static boolean allowed(String path) {
    if (path == null) {
      return false;
    }
    return Protocol.DEFAULT_PATCH_PREFIXES.stream()
        .anyMatch(prefix -> path.equals(prefix) || path.startsWith(prefix + "/"));
  }

  /**
   * The answer as sent.
   *
   * @throws IllegalStateException with "plugin bug: ..." for a mistake made while building, or a
   *     patch larger than the operator takes (256 KiB); the SDK answers it with INTERNAL
   */
  public PluginOuterClass.DefaultResponse toDefaultResponse() {
    if (problem != null) {
      throw new IllegalStateException("plugin bug: " + problem);
    }
    var wire = PluginOuterClass.DefaultResponse.newBuilder();
    if (!operations.isEmpty()) {
      byte[] patch = Json.encode(operations);
      if (patch.length > Protocol.MAX_PATCH_BYTES) {
        throw new IllegalStateException(
            "plugin bug: the defaults' JSON Patch is "
                + patch.length
                + " bytes; at most "
                + Protocol.MAX_PATCH_BYTES
                + " are accepted");
      }
      wire.setPatch(ByteString.copyFrom(patch));
    }
    return wire.addAllWarnings(Text.boundedWarnings(warnings)).build();
  }
}
