package io.kplug.sidecar;

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
 */
public record Offer(GroupKind base, String implementation, List<GroupKind> extensions) {
  /** Copies the extensions and checks that nothing is null. */
  public Offer {
    Objects.requireNonNull(base, "base");
    Objects.requireNonNull(implementation, "implementation");
    extensions = List.copyOf(extensions);
  }

  /** An offer of {@code implementation} for {@code base}, with these extension kinds. */
  public static Offer of(GroupKind base, String implementation, GroupKind... extensions) {
    return new Offer(base, implementation, List.of(extensions));
  }

  kplug.v1.Types.Offer toProto() {
    var offer = kplug.v1.Types.Offer.newBuilder().setBase(base.toProto());
    offer.setImplementation(implementation);
    extensions.forEach(e -> offer.addExtensions(e.toProto()));
    return offer.build();
  }
}
