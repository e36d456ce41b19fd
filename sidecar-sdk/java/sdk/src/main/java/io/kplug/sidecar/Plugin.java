package io.kplug.sidecar;

/**
 * Your plugin's logic. {@link #reconcile} is required; override the other methods when you need
 * them. <b>Overriding one advertises its capability</b>: {@link #finalize(Request)} FINALIZE,
 * {@link #validate} VALIDATE, {@link #defaults} DEFAULT, {@link #hook} HOOKS, {@link #mutate}
 * MUTATE. The operator calls only what is advertised; a call the plugin does not override is
 * answered UNIMPLEMENTED (Finalize: OK at once).
 *
 * <p>Calls run concurrently (up to the operator's in-flight bound), for different objects, and must
 * be idempotent: the same request can come again. Each call runs on a thread of its own, which the
 * SDK interrupts when the operator gives up on the call ({@link Request#deadline()}).
 *
 * <p>An exception thrown by {@code reconcile}, {@code finalize} or {@code hook} becomes an
 * OUTCOME_FAILED response carrying {@code "<exception's simple class name>: <message>"}, shown on
 * the resource; the operator retries with backoff, and the plugin keeps serving. From {@code
 * validate} and {@code defaults} it becomes a gRPC INTERNAL error with that message: the plugin
 * could not decide, and its failure policy ({@link CallPolicy}) refuses or admits the object. From
 * {@code mutate} too: the operator then holds the object until a call succeeds.
 *
 * <p>A plugin that needs nothing but Reconcile can be a lambda: {@code Kplug.main(info, request ->
 * Response.ok())}.
 */
@FunctionalInterface
public interface Plugin {
  /** Drives the real world towards the base object's spec and reports what it achieved. */
  Response reconcile(Request request) throws Exception;

  /**
   * Cleans up before the base object is deleted, or moved to another implementation (the annotation
   * {@code kplug.io/reselect}). Overriding it advertises FINALIZE: the operator then adds a
   * finalizer to the object and calls this before it goes. {@link Response#ok()} lets the object
   * go; anything else keeps it. A Finalize answer carries only its outcome, message, retry delay
   * and events.
   *
   * <p>(An overload of {@code Object.finalize()}, which it has nothing to do with: the name is the
   * protocol's.)
   */
  default Response finalize(Request request) throws Exception {
    return Response.ok();
  }

  /**
   * Checks an object at admission (CREATE and UPDATE): one of a base kind the plugin offers, or an
   * extension of a kind its offers declare ({@link AdmissionRequest#implementation()} says which
   * offer). Overriding it advertises VALIDATE. Field errors refuse the object, and kubectl prints
   * them; to refuse an object, return errors rather than throw.
   */
  default Validation validate(AdmissionRequest request) throws Exception {
    throw new UnsupportedOperationException("this plugin does not validate");
  }

  /**
   * Fills in defaults at admission, for the same objects as {@link #validate} (which then sees the
   * defaulted object): a JSON Patch built with {@link Defaults#none()}, limited to {@code /spec},
   * {@code /metadata/labels} and {@code /metadata/annotations}. Overriding it advertises DEFAULT.
   */
  default Defaults defaults(AdmissionRequest request) throws Exception {
    throw new UnsupportedOperationException("this plugin does not default");
  }

  /**
   * Runs one of the hooks declared with {@link Info.Builder#hook}. Overriding it advertises HOOKS;
   * declaring hooks without it is a start-up error. The answer's outcome, message, retry delay,
   * status (written under {@code status.hooks.<plugin>} of the base object) and events count; the
   * hook's {@link HookBehaviour} says what follows from the outcome.
   */
  default Response hook(HookCall call) throws Exception {
    throw new UnsupportedOperationException("this plugin has no hooks");
  }

  /**
   * Patches an object of a kind declared with {@link Info.Builder#mutation} before the operator
   * applies it: a child another plugin desires, when the operator's {@code --mutators} allows this
   * plugin for its kind. Overriding it advertises MUTATE; declaring mutations without overriding
   * it, or overriding it without declaring any, is a start-up error.
   *
   * <p>The answer must be deterministic: the same call, the same {@link Mutation}, since the
   * operator judges drift by the mutated object. A path outside the allowed ones, or an exception,
   * is answered with a gRPC INTERNAL error, and the operator holds the object (it is not applied
   * unmutated) until a call succeeds.
   */
  default Mutation mutate(MutateCall call) throws Exception {
    throw new UnsupportedOperationException("this plugin does not mutate");
  }

  /**
   * Whether the plugin can take work now, answered to the operator's probes: at registration, and
   * on each heartbeat while it is not ready. While not ready, no work is routed to it. Default:
   * always ready. A {@link ReadinessGate} is one you flip from your own code.
   */
  default Readiness readiness() {
    return Readiness.READY;
  }
}
