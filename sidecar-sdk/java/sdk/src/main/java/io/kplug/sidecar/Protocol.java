package io.kplug.sidecar;

import java.time.Duration;
import java.util.List;

/**
 * The protocol's fixed names and numbers, shared by every kplug SDK and the operator (see
 * docs/protocol.md in the kplug repository). Their source is the Rust crate kplug-proto; {@code
 * RulesTest} checks these values against sidecar-sdk/conformance/rules.json, which kplug-proto's
 * own test keeps equal to it.
 */
public final class Protocol {
  private Protocol() {}

  /** The protocol this SDK speaks, sent in heartbeats and GetInfo. */
  public static final String PROTOCOL = "kplug.v1";

  /** The environment variable that overrides the socket dir. */
  public static final String SOCKET_DIR_ENV = "KPLUG_SOCKET_DIR";

  /** The socket dir when neither the builder nor {@code $KPLUG_SOCKET_DIR} says otherwise. */
  public static final String DEFAULT_SOCKET_DIR = "/var/run/kplug";

  /** The operator's socket, relative to the socket dir. */
  public static final String REGISTRY_SOCKET = "registry.sock";

  /** The directory holding one directory per plugin, relative to the socket dir. */
  public static final String PLUGINS_DIR = "plugins";

  /**
   * The plugin's socket in its own directory: {@code plugins/<name>/plugin.sock}. A directory per
   * plugin lets it be a volume of its own, writable only by that plugin's container.
   */
  public static final String PLUGIN_SOCKET = "plugin.sock";

  /** The environment variable holding the heartbeat interval in seconds (e.g. {@code 0.5}). */
  public static final String HEARTBEAT_INTERVAL_ENV = "KPLUG_HEARTBEAT_INTERVAL";

  /** The heartbeat interval until the operator asks for another one. */
  public static final Duration DEFAULT_HEARTBEAT_INTERVAL = Duration.ofSeconds(5);

  /** How long calls in flight may take to finish at shutdown, unless configured otherwise. */
  public static final Duration DEFAULT_GRACE_PERIOD = Duration.ofSeconds(10);

  /** The delay of a RETRY outcome when the plugin has no better idea (the operator's too). */
  public static final Duration DEFAULT_RETRY_AFTER = Duration.ofSeconds(10);

  /**
   * The largest gRPC message the plugin accepts or sends: Kubernetes objects can be large, and
   * gRPC's 4 MiB default would turn a big object into a transport error.
   */
  public static final int MAX_MESSAGE_BYTES = 64 << 20;

  /** The status keys the operator owns; a plugin status that sets one is refused. */
  public static final List<String> RESERVED_STATUS_KEYS =
      List.of("implementation", "plugin", "observedGeneration", "conditions");

  /** The condition types the operator owns. */
  public static final List<String> RESERVED_CONDITION_TYPES =
      List.of("Ready", "PluginAvailable", "ExtensionsResolved", "Reconciled");

  /** The paths a Default patch may change (each, or anything below it). */
  public static final List<String> DEFAULT_PATCH_PREFIXES =
      List.of("/spec", "/metadata/labels", "/metadata/annotations");

  /** The deadline of one Heartbeat call. */
  static final Duration HEARTBEAT_TIMEOUT = Duration.ofSeconds(2);

  /** The deadline of the Unregister call at shutdown. */
  static final Duration UNREGISTER_TIMEOUT = Duration.ofSeconds(10);

  /** The first wait after a failed heartbeat. */
  static final Duration BACKOFF_INITIAL = Duration.ofMillis(100);

  /** What each further failure in a row multiplies the wait by, up to the interval. */
  static final int BACKOFF_FACTOR = 2;

  /** The largest fraction by which a wait is shortened at random (never lengthened). */
  static final double BACKOFF_JITTER = 0.1;

  /** The longest plugin name (a DNS label). */
  static final int MAX_NAME_LENGTH = 63;

  /** The longest message the operator keeps; a field error's message and value are cut to it. */
  static final int MAX_MESSAGE_CHARS = 1024;

  /** At most this many hooks per plugin. */
  static final int MAX_HOOKS = 16;

  /** At most this many call policies per plugin. */
  static final int MAX_CALL_POLICIES = 16;

  /** At most this many kinds a plugin mutates. */
  static final int MAX_MUTATIONS = 16;

  /** Field errors per Validate answer; past it, the last one says how many more there were. */
  static final int MAX_FIELD_ERRORS = 64;

  /** Warnings per admission answer; past it, the last one says how many more there were. */
  static final int MAX_WARNINGS = 16;

  /** The longest warning, in characters. */
  static final int MAX_WARNING_CHARS = 256;

  /** The largest Default or Mutate patch, in bytes. */
  static final int MAX_PATCH_BYTES = 256 << 10;

  /** What {@code sockaddr_un.sun_path} holds on Linux, without the final NUL. */
  static final int MAX_SOCKET_PATH_BYTES = 107;
}
