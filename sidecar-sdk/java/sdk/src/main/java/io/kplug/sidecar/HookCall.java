package io.kplug.sidecar;

import java.util.List;

/**
 * A Hook call: which hook runs, at which phase, and the objects the implementation is (or was)
 * sent.
 *
 * @param hook the hook's name, as declared
 * @param phase the phase being run; null for one this SDK does not know (a newer operator)
 * @param request the implementation chosen for the object (possibly another plugin's), the base
 *     object and the extensions the implementation is sent
 * @param outcome in after-* phases, the outcome of the implementation's call ({@link
 *     Outcome#FAILED} too when the call itself failed); null before
 * @param message in after-* phases, the message of that call; empty before
 */
public record HookCall(
    String hook, HookPhase phase, Request request, Outcome outcome, String message) {

  /**
   * Decodes a Hook call from what the operator sends. The SDK does this for every call; it is
   * public for plugins' unit tests.
   *
   * @throws InvalidRequestException as {@link Request#decode} does
   */
  public static HookCall decode(kplug.v1.PluginOuterClass.HookRequest in)
      throws InvalidRequestException {
    Request request =
        Request.decode(in.getImplementation(), in.getObject().toByteArray(), bytes(in), List.of());
    return new HookCall(
        in.getHook(),
        HookPhase.fromProto(in.getPhase()),
        request,
        Outcome.fromProto(in.getOutcome()),
        in.getMessage());
  }

  private static List<byte[]> bytes(kplug.v1.PluginOuterClass.HookRequest in) {
    return in.getExtensionsList().stream()
        .map(com.google.protobuf.ByteString::toByteArray)
        .toList();
  }
}
