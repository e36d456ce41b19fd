package io.kplug.sidecar;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import kplug.v1.PluginOuterClass;

/**
 * A plugin's answer to Validate: the object is allowed when it holds no errors. Start with {@link
 * #allowed()} and chain what you find:
 *
 * <pre>{@code
 * return Validation.allowed()
 *     .withError("spec.columns[1].type", "varchar2", "unknown column type; use text or integer")
 *     .withWarning("spec.comment is ignored");
 * }</pre>
 */
public final class Validation {
  /**
   * One reason an object is refused.
   *
   * @param path the field in Kubernetes' notation, e.g. "spec.columns[1].type"; empty for the
   *     object as a whole
   * @param value the refused value as JSON text ({@code "varchar2"} with its quotes for a string,
   *     {@code 3} for a number); empty when there is none
   * @param message why the value is refused
   */
  public record FieldError(String path, String value, String message) {}

  private final List<FieldError> errors = new ArrayList<>();
  private final List<String> warnings = new ArrayList<>();

  private Validation() {}

  /** A Validation that allows the object, so far: add errors to refuse it. */
  public static Validation allowed() {
    return new Validation();
  }

  /**
   * Refuses the value at {@code path} ("" for the object as a whole); {@code value} is sent as
   * compact JSON text (a string keeps its quotes). A value that cannot be encoded as JSON is sent
   * as no value, as the Rust SDK does.
   */
  public Validation withError(String path, Object value, String message) {
    String encoded;
    try {
      encoded = new String(Json.encode(Json.toTree(value, "the value")), StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      encoded = "";
    }
    errors.add(new FieldError(path, encoded, message));
    return this;
  }

  /** Refuses the object for a field without a value to show (e.g. a missing required field). */
  public Validation withErrorAt(String path, String message) {
    errors.add(new FieldError(path, "", message));
    return this;
  }

  /** Adds a warning shown to the client (kubectl prints it), allowed or not. */
  public Validation withWarning(String warning) {
    warnings.add(Objects.requireNonNull(warning, "warning"));
    return this;
  }

  /** Whether no error was added. */
  public boolean isAllowed() {
    return errors.isEmpty();
  }

  /** The field errors, in the order added. */
  public List<FieldError> errors() {
    return List.copyOf(errors);
  }

  /** The warnings, in the order added. */
  public List<String> warnings() {
    return List.copyOf(warnings);
  }

  /**
   * The answer as sent, within the protocol's bounds: past 64 errors the last one kept says how
   * many more there were (the object is refused either way); warnings likewise past 16, each cut to
   * 256 characters; messages and values cut to 1024 characters.
   */
  public PluginOuterClass.ValidateResponse toValidateResponse() {
    List<FieldError> sent = errors;
    if (sent.size() > Protocol.MAX_FIELD_ERRORS) {
      int more = sent.size() - (Protocol.MAX_FIELD_ERRORS - 1);
      sent = new ArrayList<>(sent.subList(0, Protocol.MAX_FIELD_ERRORS - 1));
      sent.add(new FieldError("", "", "and " + more + " more errors"));
    }
    var wire = PluginOuterClass.ValidateResponse.newBuilder();
    for (FieldError e : sent) {
      wire.addErrors(
          PluginOuterClass.FieldError.newBuilder()
              .setPath(Objects.requireNonNullElse(e.path(), ""))
              .setValue(Text.cut(e.value(), Protocol.MAX_MESSAGE_CHARS))
              .setMessage(Text.cut(e.message(), Protocol.MAX_MESSAGE_CHARS)));
    }
    return wire.addAllWarnings(Text.boundedWarnings(warnings)).build();
  }
}
