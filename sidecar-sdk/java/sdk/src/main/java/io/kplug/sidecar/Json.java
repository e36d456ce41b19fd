package io.kplug.sidecar;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The SDK's JSON: strict decoding (what the operator's Rust decoder accepts, and nothing more) and
 * compact UTF-8 encoding, as every SDK sends statuses.
 */
final class Json {
  private Json() {}

  /**
   * The mapper: integers as {@code Long} (or {@code BigInteger}), other numbers as {@code Double},
   * no NaN or Infinity, nothing after the top-level value, strings up to the message limit.
   */
  static final ObjectMapper MAPPER =
      JsonMapper.builder()
          .disable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
          // Characters outside the BMP as UTF-8, not as escaped surrogate pairs: statuses are
          // compact UTF-8 in every SDK.
          .enable(JsonWriteFeature.COMBINE_UNICODE_SURROGATES_IN_UTF8)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .enable(DeserializationFeature.USE_LONG_FOR_INTS)
          .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .disable(SerializationFeature.FAIL_ON_EMPTY_BEANS)
          .build();

  static {
    MAPPER
        .getFactory()
        .setStreamReadConstraints(
            StreamReadConstraints.builder()
                .maxStringLength(Protocol.MAX_MESSAGE_BYTES)
                .maxDocumentLength(Protocol.MAX_MESSAGE_BYTES)
                .build());
  }

  private static final Pattern START_MARKER =
      Pattern.compile(" \\(start marker at \\[Source: .*?\\]\\)");

  /** Why some bytes are not a JSON object. */
  static final class NotAnObject extends Exception {
    private static final long serialVersionUID = 1L;

    NotAnObject(String message) {
      super(message);
    }
  }

  /**
   * Decodes one JSON object; the exception's message is the protocol's ("not valid JSON: ..." or
   * "not a JSON object").
   */
  static ObjectNode decodeObject(byte[] data) throws NotAnObject {
    JsonNode node;
    try {
      node = MAPPER.readTree(data);
    } catch (JsonProcessingException e) {
      // Jackson names where a container began as "[Source: REDACTED ...; line: 1, column: 1]":
      // noise in a message shown on the resource.
      throw new NotAnObject(
          "not valid JSON: " + START_MARKER.matcher(e.getOriginalMessage()).replaceAll(""));
    } catch (IOException e) {
      throw new NotAnObject("not valid JSON: " + e.getMessage());
    }
    if (node == null || node.isMissingNode()) {
      throw new NotAnObject("not valid JSON: unexpected end of JSON input");
    }
    String surrogate = loneSurrogate(node);
    if (surrogate != null) {
      throw new NotAnObject("not valid JSON: " + surrogate);
    }
    if (!(node instanceof ObjectNode object)) {
      throw new NotAnObject("not a JSON object");
    }
    return object;
  }

  /**
   * A lone UTF-16 surrogate in a string (from a {@code \}u escape: the bytes are valid UTF-8),
   * which encodes no character; the Rust and Go SDKs refuse it too. Null when there is none.
   */
  private static String loneSurrogate(JsonNode node) {
    if (node.isTextual()) {
      return loneSurrogate(node.textValue());
    }
    if (node.isContainerNode()) {
      if (node.isObject()) {
        for (Map.Entry<String, JsonNode> field : node.properties()) {
          String problem = loneSurrogate(field.getKey());
          if (problem == null) {
            problem = loneSurrogate(field.getValue());
          }
          if (problem != null) {
            return problem;
          }
        }
      } else {
        for (JsonNode element : node) {
          String problem = loneSurrogate(element);
          if (problem != null) {
            return problem;
          }
        }
      }
    }
    return null;
  }

  private static String loneSurrogate(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
          i++;
          continue;
        }
        return String.format("lone leading surrogate \\u%04x in a string", (int) c);
      }
      if (Character.isLowSurrogate(c)) {
        return String.format("lone trailing surrogate \\u%04x in a string", (int) c);
      }
    }
    return null;
  }

  /** Compact UTF-8 JSON of a tree. */
  static byte[] encode(JsonNode node) {
    try {
      return MAPPER.writeValueAsBytes(node);
    } catch (JsonProcessingException e) {
      // A tree holds only JSON values: nothing in it can fail to encode.
      throw new IllegalStateException("cannot encode a JSON tree", e);
    }
  }

  /**
   * Any value (a {@code Map}, a record or bean, a {@link JsonNode}) as a tree. Fails with a message
   * naming {@code what} when it cannot be encoded.
   */
  static JsonNode toTree(Object value, String what) {
    try {
      return MAPPER.valueToTree(value);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(what + " cannot be encoded as JSON: " + e.getMessage(), e);
    }
  }

  /** A string as JSON text, with its quotes. */
  static String encodeString(String s) {
    return new String(
        encode(MAPPER.getNodeFactory().textNode(s)), java.nio.charset.StandardCharsets.UTF_8);
  }

  /** The JSON type of a tree, for messages: "a string", "an array"... */
  static String kindOf(JsonNode node) {
    if (node == null || node.isNull()) {
      return "null";
    }
    if (node.isTextual()) {
      return "a string";
    }
    if (node.isNumber()) {
      return "a number";
    }
    if (node.isBoolean()) {
      return "a boolean";
    }
    if (node.isArray()) {
      return "an array";
    }
    return "an object";
  }
}
