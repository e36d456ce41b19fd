package io.kplug.sidecar;

/**
 * A plugin could not start. The message names the plugin, the path or setting involved and what to
 * do; {@link #kind()} tells the cases apart.
 */
public final class StartupException extends Exception {
  private static final long serialVersionUID = 1L;

  /** Why a plugin could not start. */
  public enum Kind {
    /** The plugin name is not a DNS label. */
    INVALID_NAME,
    /** A builder setting or an environment variable has an invalid value. */
    INVALID_CONFIG,
    /**
     * The plugin's hooks, call policies or mutations are ones the operator would refuse (a hook
     * name that is not a DNS label or is declared twice, hooks without a {@link Plugin#hook}
     * handler, a call policy declared twice, mutations without a {@link Plugin#mutate} handler or
     * the handler without mutations...).
     */
    INVALID_DECLARATION,
    /** Another live process serves the plugin's socket; it is never taken over. */
    SOCKET_IN_USE,
    /** Something that is not a socket sits where the socket must go; it is never deleted. */
    NOT_A_SOCKET,
    /** The socket could not be bound for another reason (permissions, a path too long...). */
    SOCKET
  }

  private final Kind kind;

  StartupException(Kind kind, String message) {
    super(message);
    this.kind = kind;
  }

  StartupException(Kind kind, String message, Throwable cause) {
    super(message, cause);
    this.kind = kind;
  }

  /** Why the plugin could not start. */
  public Kind kind() {
    return kind;
  }
}
