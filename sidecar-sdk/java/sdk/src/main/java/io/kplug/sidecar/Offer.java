package io.kplug.sidecar;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One implementation the plugin provides for one base kind.
 *
 * @param base the kind this offer reconciles, e.g. myorg.org/DatabaseTable
 * @param implementation the name users put in {@code spec.preferredImplementation} and the operator
 *     records in {@code status.implementation}, e.g. "PostgreSQL"
 * @param extensions the extension kinds the plugin understands for this base; only extensions of
 *     these kinds are sent to it
 * @param children the kinds of the Kubernetes objects this implementation manages for each base
 *     object (see {@link #withChild})
 */
public record Offer(
    GroupKind base,
    String implementation,
    List<GroupKind> extensions,
    List<GroupVersionKind> children) {
  /** Copies the lists and checks that nothing is null. */
  public Offer {
    Objects.requireNonNull(base, "base");
    Objects.requireNonNull(implementation, "implementation");
    extensions = List.copyOf(extensions);
    children = List.copyOf(children);
  }

  /** An offer without child kinds. */
  public Offer(GroupKind base, String implementation, List<GroupKind> extensions) {
    this(base, implementation, extensions, List.of());
  }

  /** An offer of {@code implementation} for {@code base}, with these extension kinds. */
  public static Offer of(GroupKind base, String implementation, GroupKind... extensions) {
    return new Offer(base, implementation, List.of(extensions));
  }

  /**
   * This offer with one more kind of child, by {@code apiVersion} and kind, e.g. {@code
   * withChild("apps/v1", "Deployment")} or {@code withChild("v1", "ConfigMap")}.
   *
   * <p>Declaring one makes the plugin advertise the CHILDREN capability: its Reconcile and Finalize
   * answers may then carry the desired children ({@link Response#withChild}) and its requests carry
   * the observed ones ({@link Request#children()}). The operator applies only the kinds its {@code
   * --child-kinds} allows, and sends and reads them in this version.
   */
  public Offer withChild(String apiVersion, String kind) {
    var more = new ArrayList<>(children);
    more.add(GroupVersionKind.of(apiVersion, kind));
    return new Offer(base, implementation, extensions, more);
  }

  kplug.v1.Types.Offer toProto() {
    var offer = kplug.v1.Types.Offer.newBuilder().setBase(base.toProto());
    offer.setImplementation(implementation);
    extensions.forEach(e -> offer.addExtensions(e.toProto()));
    children.forEach(c -> offer.addChildren(c.toProto()));
    return offer.build();
  }
}
