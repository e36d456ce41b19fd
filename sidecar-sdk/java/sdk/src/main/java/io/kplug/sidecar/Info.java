package io.kplug.sidecar;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Describes a plugin. It is sent in every heartbeat and answered by GetInfo, hooks, call policies
 * and mutations included, so the two always agree. (Its capabilities follow from the methods the
 * plugin overrides: see {@link Plugin}; and CHILDREN from the child kinds of its offers, {@link
 * Offer#withChild}.)
 *
 * <pre>{@code
 * Info info = Info.builder("hello")
 *     .version("1.0.0")
 *     .description("greets Greeting objects")
 *     .offer(Offer.of(new GroupKind("example.com", "Greeting"), "Hello"))
 *     .build();
 * }</pre>
 *
 * @param name a DNS label, stable across versions and restarts, e.g. "postgresql"; the plugin
 *     serves on {@code <socket dir>/plugins/<name>/plugin.sock}
 * @param version free-form; semver is recommended, e.g. "1.4.2"
 * @param description one line for humans, shown in logs and Events
 * @param offers what the plugin serves
 * @param hooks the hooks the plugin declares; the plugin must override {@link Plugin#hook}
 * @param callPolicies a deadline (and, for Validate and Default, a failure policy) per call
 * @param mutations the kinds of objects the plugin patches before the operator applies them; the
 *     plugin must override {@link Plugin#mutate}
 */
public record Info(
    String name,
    String version,
    String description,
    List<Offer> offers,
    List<Hook> hooks,
    List<CallPolicy> callPolicies,
    List<GroupVersionKind> mutations) {

  private static final Pattern DNS_LABEL = Pattern.compile("[a-z0-9]([-a-z0-9]*[a-z0-9])?");

  /** Copies the lists and checks that nothing is null. */
  public Info {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(version, "version");
    Objects.requireNonNull(description, "description");
    offers = List.copyOf(offers);
    hooks = List.copyOf(hooks);
    callPolicies = List.copyOf(callPolicies);
    mutations = List.copyOf(mutations);
  }

  /** A builder for a plugin named {@code name}. */
  public static Builder builder(String name) {
    return new Builder(name);
  }

  /** Builds an {@link Info}; every method but {@link #build()} returns the builder. */
  public static final class Builder {
    private final String name;
    private String version = "";
    private String description = "";
    private final List<Offer> offers = new ArrayList<>();
    private final List<Hook> hooks = new ArrayList<>();
    private final List<CallPolicy> callPolicies = new ArrayList<>();
    private final List<GroupVersionKind> mutations = new ArrayList<>();

    private Builder(String name) {
      this.name = Objects.requireNonNull(name, "name");
    }

    /** The plugin's version, e.g. "1.4.2". */
    public Builder version(String version) {
      this.version = Objects.requireNonNull(version, "version");
      return this;
    }

    /** One line for humans, shown in logs and Events. */
    public Builder description(String description) {
      this.description = Objects.requireNonNull(description, "description");
      return this;
    }

    /** Adds an offer: an implementation of a base kind. */
    public Builder offer(Offer offer) {
      offers.add(Objects.requireNonNull(offer, "offer"));
      return this;
    }

    /**
     * Declares a hook. Checked at start-up as the operator checks it (a DNS-label name, unique; at
     * most 16 hooks).
     */
    public Builder hook(Hook hook) {
      hooks.add(Objects.requireNonNull(hook, "hook"));
      return this;
    }

    /** Declares a call policy: one per call, checked at start-up. */
    public Builder callPolicy(CallPolicy policy) {
      callPolicies.add(Objects.requireNonNull(policy, "policy"));
      return this;
    }

    /**
     * Declares a kind of object the plugin patches, by {@code apiVersion} and kind, e.g. {@code
     * mutation("apps/v1", "Deployment")}; the plugin must override {@link Plugin#mutate}, which
     * advertises MUTATE. At most 16, checked at start-up. The operator sends only the kinds its
     * {@code --mutators} allows for the plugin.
     */
    public Builder mutation(String apiVersion, String kind) {
      mutations.add(GroupVersionKind.of(apiVersion, kind));
      return this;
    }

    /** The description. */
    public Info build() {
      return new Info(name, version, description, offers, hooks, callPolicies, mutations);
    }
  }

  static boolean isDnsLabel(String name) {
    return name.length() <= Protocol.MAX_NAME_LENGTH && DNS_LABEL.matcher(name).matches();
  }

  /** Refuses names the operator would refuse. */
  static void validateName(String name) throws StartupException {
    if (!isDnsLabel(name)) {
      throw new StartupException(
          StartupException.Kind.INVALID_NAME,
          "invalid plugin name \""
              + name
              + "\": it must be a DNS label (lowercase letters, digits and '-', starting and"
              + " ending with a letter or digit, at most "
              + Protocol.MAX_NAME_LENGTH
              + " characters), e.g. \"postgresql\"");
    }
  }

  /**
   * Makes the operator's checks on the hooks, call policies and mutations at start-up, so that a
   * mistake stops the plugin with a message instead of every heartbeat being refused.
   */
  void validateDeclarations(Capabilities capabilities) throws StartupException {
    if (hooks.size() > Protocol.MAX_HOOKS) {
      throw refuse(
          hooks.size() + " hooks are declared; at most " + Protocol.MAX_HOOKS + " are accepted");
    }
    var names = new HashSet<String>();
    for (Hook h : hooks) {
      String problem = null;
      if (!isDnsLabel(h.name())) {
        problem =
            "its name must be a DNS label: lowercase letters, digits and '-', starting and ending"
                + " with a letter or digit, at most "
                + Protocol.MAX_NAME_LENGTH
                + " characters";
      } else if (!names.add(h.name())) {
        problem = "it is declared twice; hook names are unique within a plugin";
      } else if (h.base().kind().isEmpty()) {
        problem = "it names no base kind";
      }
      if (problem != null) {
        throw refuse("hook \"" + h.name() + "\": " + problem);
      }
    }
    if (!hooks.isEmpty() && !capabilities.hooks()) {
      throw refuse("it declares hooks but does not override Plugin.hook");
    }
    if (callPolicies.size() > Protocol.MAX_CALL_POLICIES) {
      throw refuse(
          callPolicies.size()
              + " call policies are declared; at most "
              + Protocol.MAX_CALL_POLICIES
              + " are accepted");
    }
    var calls = new HashSet<Call>();
    for (CallPolicy p : callPolicies) {
      String problem = null;
      if (!calls.add(p.call())) {
        problem = "declared twice; one policy per call";
      } else if (p.deadline() != null && (p.deadline().isNegative() || p.deadline().isZero())) {
        problem = "the deadline must be positive (leave it null for the operator's default)";
      }
      if (problem != null) {
        throw refuse("call policy for " + p.call() + ": " + problem);
      }
    }
    validateMutations(capabilities);
  }

  /**
   * The operator's checks (at most 16, each naming a version and kind), and the SDK's own: the
   * handler and the kinds go together, since either alone means a plugin that is never called or a
   * kind that is never answered.
   */
  private void validateMutations(Capabilities capabilities) throws StartupException {
    if (mutations.size() > Protocol.MAX_MUTATIONS) {
      throw refuse(
          mutations.size()
              + " mutations are declared; at most "
              + Protocol.MAX_MUTATIONS
              + " are accepted");
    }
    for (int i = 0; i < mutations.size(); i++) {
      GroupVersionKind m = mutations.get(i);
      if (m.version().isEmpty() || m.kind().isEmpty()) {
        throw refuse(
            "mutation #"
                + i
                + " ("
                + Json.encodeString(m.apiVersion())
                + ", "
                + Json.encodeString(m.kind())
                + ") names no version or kind; use mutation(\"apps/v1\", \"Deployment\")");
      }
    }
    if (!mutations.isEmpty() && !capabilities.mutates()) {
      throw refuse("it declares mutations but does not override Plugin.mutate");
    }
    if (capabilities.mutates() && mutations.isEmpty()) {
      throw refuse(
          "it overrides Plugin.mutate but declares no kind to mutate (Info.Builder.mutation)");
    }
  }

  private StartupException refuse(String why) {
    return new StartupException(
        StartupException.Kind.INVALID_DECLARATION, "plugin " + name + " cannot start: " + why);
  }
}
