package io.kplug.sidecar;

import com.google.protobuf.ByteString;
import java.util.Optional;
import kplug.v1.PluginOuterClass;

/**
 * A Mutate call: the object about to be applied, as it is so far.
 *
 * @param implementation the implementation that desires the object; empty for an embedding
 *     operator's own object
 * @param object the object about to be applied: what the plugin that desires it answered, with
 *     kplug's labels and owner reference, and the patches of the mutators before this one; the
 *     patch applies to it
 * @param live the object as it is now; empty when it does not exist yet
 * @param base the base object the object is for; empty for an embedding operator's own object
 */
public record MutateCall(
    String implementation,
    KubeObject object,
    Optional<KubeObject> live,
    Optional<KubeObject> base) {

  /**
   * Decodes a Mutate call from what the operator sends. The SDK does this for every call; it is
   * public for plugins' unit tests.
   *
   * @throws InvalidRequestException with the message every SDK answers INVALID_ARGUMENT with, e.g.
   *     "kplug: the object is not a JSON object" or "kplug: the live object is not valid JSON: ..."
   */
  public static MutateCall decode(PluginOuterClass.MutateRequest in)
      throws InvalidRequestException {
    return new MutateCall(
        in.getImplementation(),
        KubeObject.decode(in.getObject().toByteArray(), "the object"),
        optional(in.getLive(), "the live object"),
        optional(in.getBase(), "the base object"));
  }

  /** Empty bytes are the protocol's "none", not an invalid object. */
  private static Optional<KubeObject> optional(ByteString bytes, String what)
      throws InvalidRequestException {
    if (bytes.isEmpty()) {
      return Optional.empty();
    }
    return Optional.of(KubeObject.decode(bytes.toByteArray(), what));
  }
}
