package io.kplug.sidecar;

import java.nio.file.Path;

/**
 * Where a plugin's socket dir came from, which its messages about the socket dir name (the origins
 * of rules.json's {@code socket_dir} rule).
 */
enum SocketDirOrigin {
  /** {@code $KPLUG_SOCKET_DIR} is unset or empty: {@link Protocol#DEFAULT_SOCKET_DIR}. */
  DEFAULT("default"),
  /** {@code $KPLUG_SOCKET_DIR}. */
  ENVIRONMENT("environment"),
  /** The builder's {@code socketDir}; the variable is not read. */
  PROGRAM("program");

  private final String name;

  SocketDirOrigin(String name) {
    this.name = name;
  }

  /** Its name in rules.json. */
  String ruleName() {
    return name;
  }

  /** Where the directory came from, for the parentheses of a message. */
  private String said() {
    return switch (this) {
      case DEFAULT ->
          Protocol.SOCKET_DIR_ENV + " is not set; the default is " + Protocol.DEFAULT_SOCKET_DIR;
      case ENVIRONMENT -> "from " + Protocol.SOCKET_DIR_ENV;
      case PROGRAM -> "set by the program; " + Protocol.SOCKET_DIR_ENV + " is not read";
    };
  }

  /** What to do when the directory is the wrong one. */
  private String fix() {
    return this == PROGRAM
        ? "have the program use the directory shared with the operator"
        : "set " + Protocol.SOCKET_DIR_ENV + " to the directory shared with the operator";
  }

  /**
   * What a plugin logs, once at WARNING level, while {@code registry.sock} in its socket dir is
   * missing or refuses connections: where it looked, where that came from, and what to do.
   */
  String registryWaitingMessage(Path socketDir) {
    return "no operator registry at "
        + socketDir.resolve(Protocol.REGISTRY_SOCKET)
        + " yet ("
        + said()
        + "): "
        + fix()
        + ", unless the operator is still starting; retrying with backoff";
  }

  /**
   * The start-up error of a plugin whose socket dir does not exist: a plugin never creates it,
   * since it is the volume shared with the operator.
   */
  String socketDirMissingMessage(Path socketDir) {
    return "the socket dir "
        + socketDir
        + " does not exist ("
        + said()
        + "): "
        + fix()
        + " (a plugin does not create the socket dir: it is a volume shared with the operator)";
  }
}
