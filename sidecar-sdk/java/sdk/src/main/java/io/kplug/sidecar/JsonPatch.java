package io.kplug.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;

/**
 * A JSON Patch being built, for {@link Defaults} and {@link Mutation}: the operations, the warnings
 * that go with them, and the first mistake. The first mistake is the one worth reporting, so the
 * operations after it are ignored.
 */
final class JsonPatch {
  private final ArrayNode operations = Json.MAPPER.createArrayNode();
  private final List<String> warnings = new ArrayList<>();
  private final Function<String, String> pathProblem;
  private final boolean sortKeys;
  private String problem;

  /**
   * @param pathProblem why a path (possibly null) may not be touched, the first words of the
   *     mistake; null when it may
   * @param sortKeys whether the members of the objects in values are sent in key order, so that
   *     equal values give equal bytes whatever map they were built from (a {@code HashMap}'s order,
   *     or {@code Map.of}'s, may change from one JVM run to the next)
   */
  JsonPatch(Function<String, String> pathProblem, boolean sortKeys) {
    this.pathProblem = pathProblem;
    this.sortKeys = sortKeys;
  }

  void push(String op, String path, Object value, boolean hasValue) {
    if (problem != null) {
      return;
    }
    String why = pathProblem.apply(path);
    if (why != null) {
      problem = why + "; " + op + " " + Json.encodeString(path) + " is outside them";
      return;
    }
    ObjectNode operation = Json.MAPPER.createObjectNode().put("op", op).put("path", path);
    if (hasValue) {
      JsonNode tree;
      try {
        tree = Json.toTree(value, "the value of " + op + " " + Json.encodeString(path));
      } catch (IllegalArgumentException e) {
        problem = e.getMessage();
        return;
      }
      operation.set("value", sortKeys ? sorted(tree) : tree);
    }
    operations.add(operation);
  }

  /** {@code node} with the members of each of its objects in key order. */
  private static JsonNode sorted(JsonNode node) {
    if (node.isObject()) {
      var names = new ArrayList<String>();
      node.fieldNames().forEachRemaining(names::add);
      Collections.sort(names);
      ObjectNode out = Json.MAPPER.createObjectNode();
      names.forEach(name -> out.set(name, sorted(node.get(name))));
      return out;
    }
    if (node.isArray()) {
      ArrayNode out = Json.MAPPER.createArrayNode();
      node.forEach(item -> out.add(sorted(item)));
      return out;
    }
    return node;
  }

  void warn(String warning) {
    warnings.add(Objects.requireNonNull(warning, "warning"));
  }

  boolean isEmpty() {
    return operations.isEmpty();
  }

  String problem() {
    return problem;
  }

  /** The warnings as sent: bounded like every answer's. */
  List<String> boundedWarnings() {
    return Text.boundedWarnings(warnings);
  }

  /**
   * The patch as sent, null for no operation.
   *
   * @param what names the answer in the messages, e.g. "the defaults'"
   * @throws IllegalStateException with "plugin bug: ..." for a mistake made while building, or a
   *     patch larger than the operator takes (256 KiB)
   */
  byte[] encode(String what) {
    if (problem != null) {
      throw new IllegalStateException("plugin bug: " + problem);
    }
    if (operations.isEmpty()) {
      return null;
    }
    byte[] patch = Json.encode(operations);
    if (patch.length > Protocol.MAX_PATCH_BYTES) {
      throw new IllegalStateException(
          "plugin bug: "
              + what
              + " JSON Patch is "
              + patch.length
              + " bytes; at most "
              + Protocol.MAX_PATCH_BYTES
              + " are accepted");
    }
    return patch;
  }
}
