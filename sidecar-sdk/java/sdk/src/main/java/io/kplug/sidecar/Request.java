package io.kplug.sidecar;

import io.grpc.Context;
import io.grpc.Deadline;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * A Reconcile or Finalize call: the base object, the extensions the plugin declared for the chosen
 * implementation, and the children the operator manages for it on the plugin's behalf.
 */
public final class Request {
  private final String implementation;
  private final KubeObject object;
  private final List<KubeObject> extensions;
  private final List<KubeObject> children;
  private final Context call;

  private Request(
      String implementation,
      KubeObject object,
      List<KubeObject> extensions,
      List<KubeObject> children,
      Context call) {
    this.implementation = implementation;
    this.object = object;
    this.extensions = extensions;
    this.children = children;
    this.call = call;
  }

  /**
   * Decodes a request from the JSON the operator sends. The SDK does this for every call; it is
   * public for plugins' unit tests:
   *
   * <pre>{@code
   * var request = Request.decode("PostgreSQL", """
   *     {"kind": "DatabaseTable", "metadata": {"name": "users"}, "spec": {}}""".getBytes(UTF_8));
   * var response = plugin.reconcile(request);
   * }</pre>
   *
   * @throws InvalidRequestException with the message every SDK answers with (an OUTCOME_FAILED
   *     response, without calling the plugin), e.g. "kplug: the base object is not valid JSON: ..."
   *     or "kplug: extension #1 is not a JSON object"
   */
  public static Request decode(String implementation, byte[] object, byte[]... extensions)
      throws InvalidRequestException {
    return decode(implementation, object, List.of(extensions), List.of());
  }

  static Request decode(
      String implementation, byte[] object, List<byte[]> extensions, List<byte[]> children)
      throws InvalidRequestException {
    KubeObject base = KubeObject.decode(object, "the base object");
    // The gRPC call this request came with (its deadline, its cancellation): the SDK decodes
    // requests on the thread that runs the handler. Outside a call, the root context.
    return new Request(
        implementation,
        base,
        decodeAll(extensions, "extension #"),
        decodeAll(children, "child #"),
        Context.current());
  }

  private static List<KubeObject> decodeAll(List<byte[]> objects, String what)
      throws InvalidRequestException {
    var decoded = new ArrayList<KubeObject>(objects.size());
    for (int i = 0; i < objects.size(); i++) {
      decoded.add(KubeObject.decode(objects.get(i), what + i));
    }
    return List.copyOf(decoded);
  }

  /**
   * This request with {@code children} as the observed children, decoded from the JSON the operator
   * sends (as the SDK does for every call); for plugins' unit tests:
   *
   * <pre>{@code
   * var request = Request.decode("Hello", object).withChildren("""
   *     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "greeting"}}"""
   *     .getBytes(UTF_8));
   * }</pre>
   *
   * @throws InvalidRequestException with the protocol's message, e.g. "kplug: child #0 is not a
   *     JSON object"
   */
  public Request withChildren(byte[]... children) throws InvalidRequestException {
    return new Request(
        implementation, object, extensions, decodeAll(List.of(children), "child #"), call);
  }

  /**
   * The implementation the operator chose, one of the plugin's offers (for Finalize: the one
   * recorded on the object).
   */
  public String implementation() {
    return implementation;
  }

  /** The base object (apiVersion, kind, metadata, spec, status). */
  public KubeObject object() {
    return object;
  }

  /**
   * The extension objects of the kinds the plugin declared, in the order the base object references
   * them. Missing ones are never sent: the operator waits until they exist.
   */
  public List<KubeObject> extensions() {
    return extensions;
  }

  /**
   * The observed children of the base object that the operator manages for this plugin (of the
   * kinds its offer declares with {@link Offer#withChild}), as they are now: with their status
   * (e.g. a Deployment's {@code readyReplicas}), including those being deleted. Empty when the
   * offer declares no child kinds.
   */
  public List<KubeObject> children() {
    return children;
  }

  /**
   * The observed child of {@code kind} (e.g. "Deployment") named {@code name}; empty when there is
   * none (not created yet, or deleted since).
   */
  public Optional<KubeObject> child(String kind, String name) {
    return children.stream()
        .filter(c -> c.kind().equals(kind) && c.name().equals(name))
        .findFirst();
  }

  /** The base object's name. */
  public String name() {
    return object.name();
  }

  /** The base object's namespace; empty for a cluster-scoped object. */
  public String namespace() {
    return object.namespace();
  }

  /** The base object's {@code metadata.generation}, 0 when absent. */
  public long generation() {
    return object.generation();
  }

  /** The base object's spec; empty when absent or not a JSON object. */
  public Map<String, Object> spec() {
    return object.spec();
  }

  /** Decodes the base object's spec into your own type; see {@link KubeObject#decodeSpec}. */
  public <T> T decodeSpec(Class<T> type) {
    return object.decodeSpec(type);
  }

  /** The first extension of {@code kind} (e.g. "DatabaseTablePostgreSqlExtension"), if sent. */
  public Optional<KubeObject> extension(String kind) {
    return extensions.stream().filter(e -> e.kind().equals(kind)).findFirst();
  }

  /** The extensions of {@code kind}, in reference order. */
  public List<KubeObject> extensionsOf(String kind) {
    return extensions.stream().filter(e -> e.kind().equals(kind)).toList();
  }

  /**
   * When the operator stops waiting for this call (the plugin's {@link CallPolicy} deadline, else
   * the operator's); empty outside a call. Past it, the operator discards the answer and the SDK
   * interrupts the handler's thread: leave the work in a state the next call can pick up.
   */
  public Optional<Instant> deadline() {
    Deadline deadline = call.getDeadline();
    if (deadline == null) {
      return Optional.empty();
    }
    return Optional.of(Instant.now().plusNanos(deadline.timeRemaining(TimeUnit.NANOSECONDS)));
  }

  /** Whether the operator gave up on this call (its deadline passed, or it cancelled it). */
  public boolean isCancelled() {
    return call.isCancelled();
  }

  /** The base object's "Kind namespace/name". */
  @Override
  public String toString() {
    return object.toString();
  }
}
