package io.kplug.sidecar;

import com.google.protobuf.ByteString;
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
  private final JsonPatch patch = new JsonPatch(Defaults::pathProblem, false);

  private Defaults() {}

  /** Nothing to default, so far. */
  public static Defaults none() {
    return new Defaults();
  }

  /** Sets {@code value} at {@code path} (a new member, or the member replaced). */
  public Defaults add(String path, Object value) {
    patch.push("add", path, value, true);
    return this;
  }

  /** Replaces the value at {@code path}, which must exist. */
  public Defaults replace(String path, Object value) {
    patch.push("replace", path, value, true);
    return this;
  }

  /** Removes the value at {@code path}, which must exist. */
  public Defaults remove(String path) {
    patch.push("remove", path, null, false);
    return this;
  }

  /** Adds a warning shown to the client (kubectl prints it). */
  public Defaults withWarning(String warning) {
    patch.warn(warning);
    return this;
  }

  /** Whether no operation was added. */
  public boolean isEmpty() {
    return patch.isEmpty();
  }

  /**
   * The first mistake made while building (a path outside the allowed ones, a value that is not
   * JSON), or null.
   */
  public String problem() {
    return patch.problem();
  }

  private static String pathProblem(String path) {
    if (path != null
        && Protocol.DEFAULT_PATCH_PREFIXES.stream()
            .anyMatch(prefix -> path.equals(prefix) || path.startsWith(prefix + "/"))) {
      return null;
    }
    return "a default may only change /spec, /metadata/labels and /metadata/annotations";
  }

  /**
   * The answer as sent.
   *
   * @throws IllegalStateException with "plugin bug: ..." for a mistake made while building, or a
   *     patch larger than the operator takes (256 KiB); the SDK answers it with INTERNAL
   */
  public PluginOuterClass.DefaultResponse toDefaultResponse() {
    var wire = PluginOuterClass.DefaultResponse.newBuilder();
    byte[] encoded = patch.encode("the defaults'");
    if (encoded != null) {
      wire.setPatch(ByteString.copyFrom(encoded));
    }
    return wire.addAllWarnings(patch.boundedWarnings()).build();
  }
}
