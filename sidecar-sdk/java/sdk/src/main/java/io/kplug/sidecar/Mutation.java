package io.kplug.sidecar;

import com.google.protobuf.ByteString;
import kplug.v1.PluginOuterClass;

/**
 * A plugin's answer to Mutate: JSON Patch operations (RFC 6902) on {@link MutateCall#object()},
 * limited to {@code /spec} (or below it) and single members of {@code /metadata/labels} and {@code
 * /metadata/annotations}, never a {@code kplug.io/} one. Start with {@link #none()}:
 *
 * <pre>{@code
 * return Mutation.none()
 *     .add("/spec/template/spec/containers/-", Map.of("name", "backup", "image", "backup:1"))
 *     .add("/metadata/annotations/backup.example~1enabled", "true");
 * }</pre>
 *
 * <p>Paths are JSON Pointers ({@code ~1} stands for {@code /} in a key; {@code -} appends to a
 * list). A path outside the allowed ones is a plugin bug: the first such mistake is kept ({@link
 * #problem()}) and the call is answered with a gRPC INTERNAL error "plugin bug: ...", instead of a
 * patch the operator would refuse (it refuses the whole child for it).
 *
 * <p>It must be deterministic: the same call, the same mutation. The operator judges drift by the
 * mutated object, so a patch that changes from call to call (a timestamp, a random name) would
 * rewrite the object on every reconcile. The members of the objects in values are sent in key order
 * (as the Go and Rust SDKs send them), so a {@code HashMap} or {@code Map.of} is safe.
 */
public final class Mutation {
  private final JsonPatch patch = new JsonPatch(Mutation::pathProblem, true);

  private Mutation() {}

  /** No change, so far. */
  public static Mutation none() {
    return new Mutation();
  }

  /**
   * Sets {@code value} at {@code path} (a new member, or the member replaced; {@code -} as the last
   * segment appends to a list).
   */
  public Mutation add(String path, Object value) {
    patch.push("add", path, value, true);
    return this;
  }

  /** Replaces the value at {@code path}, which must exist. */
  public Mutation replace(String path, Object value) {
    patch.push("replace", path, value, true);
    return this;
  }

  /** Removes the value at {@code path}, which must exist. */
  public Mutation remove(String path) {
    patch.push("remove", path, null, false);
    return this;
  }

  /** Adds a warning for humans, recorded on the base object. */
  public Mutation withWarning(String warning) {
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

  /**
   * Why a Mutate patch may not touch {@code path}, as the operator judges it; null when it may.
   * Narrower than a default's: the whole labels or annotations map would drop the ones kplug and
   * the other mutators set, and {@code kplug.io/} keys are how the operator finds its objects.
   */
  private static String pathProblem(String path) {
    boolean allowed =
        path != null
            && Protocol.DEFAULT_PATCH_PREFIXES.stream()
                .anyMatch(prefix -> path.equals(prefix) || path.startsWith(prefix + "/"))
            && !path.equals("/metadata/labels")
            && !path.equals("/metadata/annotations")
            && !path.startsWith("/metadata/labels/kplug.io~1")
            && !path.startsWith("/metadata/annotations/kplug.io~1");
    return allowed
        ? null
        : "a mutation may only change /spec and single labels and annotations, not kplug.io/ ones";
  }

  /**
   * The answer as sent (no patch when nothing changes).
   *
   * @throws IllegalStateException with "plugin bug: ..." for a mistake made while building, or a
   *     patch larger than the operator takes (256 KiB); the SDK answers it with INTERNAL
   */
  public PluginOuterClass.MutateResponse toMutateResponse() {
    var wire = PluginOuterClass.MutateResponse.newBuilder();
    byte[] encoded = patch.encode("the mutation's");
    if (encoded != null) {
      wire.setPatch(ByteString.copyFrom(encoded));
    }
    return wire.addAllWarnings(patch.boundedWarnings()).build();
  }
}
