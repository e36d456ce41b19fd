package io.kplug.sidecar;

import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * The plugin's socket file: claiming the path safely, and removing only our own. The rule every
 * kplug SDK and the operator share:
 *
 * <ul>
 *   <li>nothing there: bind;
 *   <li>a socket whose connect is refused (or fails with "no such file"): a crashed instance left
 *       it; remove it and bind;
 *   <li>a socket something accepts connections on: another live instance; refuse, never steal it;
 *   <li>anything else (a file, a directory, a symlink): refuse, never delete it.
 * </ul>
 *
 * <p>Netty deletes a domain socket's file when its server channel closes, whoever's file the path
 * holds by then. So the server binds a private name in the plugin's directory, and the socket is
 * then hard-linked to {@code plugin.sock} (which fails if anything appeared there since the check:
 * a successor is never replaced) and the private name unlinked: Netty's delete at close finds
 * nothing, and {@link #remove()} removes {@code plugin.sock} only while it is still ours.
 */
final class BoundSocket {
  private static final int S_IFMT = 0170000;
  private static final int S_IFSOCK = 0140000;

  private final Path path;
  private final Object fileKey;

  private BoundSocket(Path path, Object fileKey) {
    this.path = path;
    this.fileKey = fileKey;
  }

  /** Binds a socket: how the server listens on a path. */
  interface Binder {
    /** Listens on {@code path}, which does not exist yet. */
    void bind(Path path) throws IOException;
  }

  /**
   * Applies the rule above and serves on {@code path} with {@code binder}. {@code plugin} names the
   * plugin in error messages, {@code origin} where the socket dir came from. The socket dir must
   * exist: it is the volume shared with the operator, so a missing one is a wrong setting, and is
   * never created.
   */
  static BoundSocket bind(Path path, String plugin, SocketDirOrigin origin, Binder binder)
      throws StartupException {
    int length = path.toString().getBytes(StandardCharsets.UTF_8).length;
    if (length > Protocol.MAX_SOCKET_PATH_BYTES) {
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin "
              + plugin
              + ": socket path "
              + path
              + " is "
              + length
              + " bytes long, longer than "
              + Protocol.MAX_SOCKET_PATH_BYTES
              + " bytes, the limit of Unix sockets; set "
              + Protocol.SOCKET_DIR_ENV
              + " to a shorter directory");
    }
    // path is <socket dir>/plugins/<name>/plugin.sock. plugins/ is open to all and sticky (like
    // /tmp): plugins of one pod run as different UIDs, each adds its own directory and can remove
    // only its own. The plugin's directory is writable by this UID only. In Kubernetes both exist
    // already (the plugin's is a volume of its own).
    Path own = path.getParent();
    Path plugins = own.getParent();
    Path socketDir = plugins.getParent();
    if (!Files.exists(socketDir)) {
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin " + plugin + ": " + origin.socketDirMissingMessage(socketDir));
    }
    try {
      makeDir(plugins, 01777);
      makeDir(own, 0755);
    } catch (IOException e) {
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin "
              + plugin
              + ": cannot create the socket directory "
              + own
              + ": "
              + e
              + "; check "
              + Protocol.SOCKET_DIR_ENV
              + " and that the shared volume is mounted and writable",
          e);
    }
    if (!Files.isWritable(own) || !Files.isExecutable(own)) {
      String owner = "another UID";
      try {
        owner = "UID " + Files.getAttribute(own, "unix:uid", LinkOption.NOFOLLOW_LINKS);
      } catch (IOException | UnsupportedOperationException e) {
        // the message names "another UID" then
      }
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin "
              + plugin
              + ": cannot create a socket in "
              + own
              + ": it belongs to "
              + owner
              + " and this process may not write to it. Another container holds this plugin's"
              + " name: give each plugin a volume of its own at "
              + own
              + " (see docs/security.md)");
    }
    claim(path, plugin);

    byte[] random = new byte[4];
    new SecureRandom().nextBytes(random);
    Path bound = own.resolve(".b" + HexFormat.of().formatHex(random));
    try {
      binder.bind(bound);
      // The operator runs as another UID: anyone in the pod may connect, and the operator tells
      // callers apart by their credentials (SO_PEERCRED).
      Files.setPosixFilePermissions(bound, PosixFilePermissions.fromString("rw-rw-rw-"));
      Files.createLink(path, bound);
    } catch (FileAlreadyExistsException e) {
      // Another instance bound the path between our check and our link.
      throw inUse(path, plugin);
    } catch (IOException e) {
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin "
              + plugin
              + ": cannot listen on "
              + path
              + ": "
              + e
              + "; check that the socket directory is writable",
          e);
    } finally {
      try {
        Files.deleteIfExists(bound);
      } catch (IOException e) {
        // A private name left behind only costs a directory entry.
      }
    }
    try {
      return new BoundSocket(path, fileKey(path));
    } catch (IOException e) {
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin " + plugin + ": cannot stat the socket " + path + " just bound: " + e,
          e);
    }
  }

  /**
   * Removes the plugin's own directory, {@code <socket dir>/plugins/<name>/}, if it is empty (call
   * it once the socket is gone); returns whether it did. One that holds anything (a newer
   * instance's socket, a file) stays, and so does one that cannot be removed (a volume mounted
   * there, in Kubernetes).
   */
  static boolean removePluginDir(Path own) {
    if (!Files.isDirectory(own, LinkOption.NOFOLLOW_LINKS)) {
      return false;
    }
    try {
      // Only an empty directory, atomically: nothing that appears in it is ever lost.
      Files.delete(own);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  /** Creates {@code dir} (its parent exists) with {@code mode} when it is missing. */
  private static void makeDir(Path dir, int mode) throws IOException {
    try {
      Files.createDirectory(dir);
    } catch (FileAlreadyExistsException e) {
      return;
    }
    // Only its owner can change its mode, and that is us. (PosixFilePermissions cannot say
    // sticky: the unix view's mode can.)
    try {
      Files.setAttribute(dir, "unix:mode", mode);
    } catch (IOException | UnsupportedOperationException e) {
      // The mode is a convenience for local runs; Kubernetes volumes come with their own.
    }
  }

  /** Makes {@code path} free to bind, or says why it cannot be. */
  private static void claim(Path path, String plugin) throws StartupException {
    int mode;
    try {
      mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
    } catch (NoSuchFileException e) {
      return;
    } catch (IOException e) {
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin "
              + plugin
              + ": cannot inspect "
              + path
              + ": "
              + e
              + "; check the permissions of the socket directory",
          e);
    }
    if ((mode & S_IFMT) != S_IFSOCK) {
      throw new StartupException(
          StartupException.Kind.NOT_A_SOCKET,
          "plugin "
              + plugin
              + ": "
              + path
              + " exists and is not a socket; refusing to delete it. Remove it by hand if it is"
              + " not needed, or pick another plugin name");
    }
    boolean live;
    try {
      live = isLive(path);
    } catch (IOException e) {
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin "
              + plugin
              + ": cannot tell whether "
              + path
              + " is in use: "
              + e
              + "; check the permissions of the socket directory",
          e);
    }
    if (live) {
      throw inUse(path, plugin);
    }
    // Stale: left behind by a crashed instance.
    try {
      Files.deleteIfExists(path);
    } catch (IOException e) {
      throw new StartupException(
          StartupException.Kind.SOCKET,
          "plugin "
              + plugin
              + ": cannot remove the stale socket "
              + path
              + ": "
              + e
              + "; check the permissions of the socket directory",
          e);
    }
  }

  private static StartupException inUse(Path path, String plugin) {
    return new StartupException(
        StartupException.Kind.SOCKET_IN_USE,
        "plugin "
            + plugin
            + ": "
            + path
            + " is served by another live process; refusing to take it over. Stop the other"
            + " instance, or give this plugin another name");
  }

  /**
   * Whether something accepts connections on the socket at {@code path}. A refused connect, or a
   * missing file, means nobody does; a connect that would block (a full backlog) means a busy, live
   * server. Other errors (e.g. permission denied) are thrown: it cannot be told.
   */
  static boolean isLive(Path path) throws IOException {
    try (SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX)) {
      channel.configureBlocking(false);
      // true: connected; false: pending, which on a Unix socket means the backlog is full.
      channel.connect(UnixDomainSocketAddress.of(path));
      return true;
    } catch (ConnectException | NoSuchFileException e) {
      return false;
    } catch (AccessDeniedException e) {
      throw e;
    } catch (SocketException e) {
      if (String.valueOf(e.getMessage()).contains("No such file")) {
        return false;
      }
      throw e;
    }
  }

  private static Object fileKey(Path path) throws IOException {
    // (device, inode), as the JDK reads them with lstat.
    return Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS)
        .fileKey();
  }

  /**
   * Deletes the socket file if it is still the one we bound and nobody serves on it (call it once
   * our server is stopped). Returns whether it removed the file.
   */
  boolean remove() {
    try {
      int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
      if (!fileKey.equals(fileKey(path)) || (mode & S_IFMT) != S_IFSOCK) {
        return false; // replaced since (by a newer instance, or by hand)
      }
      // Inode numbers are reused at once, so the same number does not prove it is still our
      // file: a live server on it is a successor's.
      if (isLive(path)) {
        return false;
      }
      return Files.deleteIfExists(path);
    } catch (IOException e) {
      return false; // gone, or cannot be told: leave it
    }
  }
}
