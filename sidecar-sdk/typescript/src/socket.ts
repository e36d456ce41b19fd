/**
 * The plugin's socket file: claiming the path safely, and removing only our own.
 *
 * The protocol's rule (docs/protocol.md), the same in every SDK:
 * - nothing there: bind;
 * - a socket nobody answers on (connect refused, or the file vanished): a
 *   crashed instance left it; remove it and bind;
 * - a socket something answers on: another live instance; refuse;
 * - anything else (a file, a directory, a symlink): refuse, never delete it.
 *
 * @module
 */

import { access, chmod, constants, lstat, mkdir, rmdir, stat, unlink } from "node:fs/promises";
import { connect } from "node:net";
import { dirname, join } from "node:path";

import { NotASocketError, SocketInUseError, StartupError } from "./errors.js";
import {
  MAX_SOCKET_PATH_BYTES,
  PLUGIN_SOCKET,
  PLUGINS_DIR,
  type SocketDirOrigin,
  socketDirMissingMessage,
} from "./protocol.js";

const CONNECT_TIMEOUT_MS = 1000;

/** `<socket dir>/plugins/<name>/plugin.sock`. */
export function pluginSocketPath(socketDir: string, name: string): string {
  return join(socketDir, PLUGINS_DIR, name, PLUGIN_SOCKET);
}

/**
 * Removes the plugin's own directory, `<socket dir>/plugins/<name>/`, if it
 * is empty (call it once the socket is gone); true if removed. One that
 * holds anything (a newer instance's socket, a file) stays, and so does one
 * that cannot be removed (a volume mounted there, in Kubernetes).
 */
export async function removePluginDir(own: string): Promise<boolean> {
  try {
    await rmdir(own); // only an empty directory, atomically: nothing in it is ever lost
    return true;
  } catch {
    return false;
  }
}

/** Creates `dir` (its parent exists) with `mode` when it is missing. */
async function makeDir(dir: string, mode: number): Promise<void> {
  try {
    await mkdir(dir);
  } catch (error) {
    if (errorCode(error) === "EEXIST") {
      return;
    }
    throw error;
  }
  // Only its owner can change its mode, and that is us.
  await chmod(dir, mode).catch(() => undefined);
}

function errorCode(error: unknown): string | undefined {
  return error instanceof Error && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined;
}

/**
 * Whether something accepts connections on the socket at `path`. A refused
 * connect or a missing file means nobody does: the socket is stale. A connect
 * that hangs or finds the backlog full (`EAGAIN`) means a live, busy server.
 *
 * @throws {StartupError} on any other error (e.g. no permission): then it
 *   cannot be told, and the socket must not be treated as stale.
 */
export function isLive(path: string, plugin = ""): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = connect({ path });
    const done = (live: boolean | Error) => {
      clearTimeout(timer);
      socket.destroy();
      if (live instanceof Error) {
        reject(live);
      } else {
        resolve(live);
      }
    };
    const timer = setTimeout(() => done(true), CONNECT_TIMEOUT_MS);
    socket.once("connect", () => done(true));
    socket.once("error", (error) => {
      const code = errorCode(error);
      if (code === "ECONNREFUSED" || code === "ENOENT") {
        done(false);
      } else if (code === "EAGAIN") {
        done(true);
      } else {
        done(
          new StartupError(
            `${plugin ? `plugin ${plugin}: ` : ""}cannot tell whether ${path} is in use: ` +
              `${error.message}; check the permissions of the socket directory`,
          ),
        );
      }
    });
  });
}

/**
 * Makes `path` free to bind for `plugin`: creates its directory and removes a
 * stale socket. The socket dir must exist: it is the volume shared with the
 * operator, so a missing one is a wrong setting (reported with where it came
 * from, `origin`), and is never created.
 *
 * @throws {StartupError} ({@link SocketInUseError}, {@link NotASocketError})
 *   saying why the path cannot be used and what to do.
 */
export async function claimSocket(
  path: string,
  plugin: string,
  origin: SocketDirOrigin = "program",
): Promise<void> {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) {
    throw new StartupError(
      `plugin ${plugin}: socket path ${path} is longer than ${MAX_SOCKET_PATH_BYTES} bytes, ` +
        "the limit of Unix sockets; set KPLUG_SOCKET_DIR to a shorter directory",
    );
  }
  // path is <socket dir>/plugins/<name>/plugin.sock. plugins/ is open to all
  // and sticky (like /tmp): plugins of one pod run as different UIDs, each
  // adds its own directory and can remove only its own. The plugin's
  // directory is writable by this UID only. In Kubernetes both exist already
  // (the plugin's is a volume of its own).
  const own = dirname(path);
  const plugins = dirname(own);
  const socketDir = dirname(plugins);
  const missing = await stat(socketDir).then(
    () => false,
    (error: unknown) => errorCode(error) === "ENOENT",
  );
  if (missing) {
    throw new StartupError(`plugin ${plugin}: ${socketDirMissingMessage(socketDir, origin)}`);
  }
  try {
    await makeDir(plugins, 0o1777);
    await makeDir(own, 0o755);
  } catch (error) {
    throw new StartupError(
      `plugin ${plugin}: cannot create the socket directory ${own}: ` +
        `${(error as Error).message}; check KPLUG_SOCKET_DIR and that the shared volume is ` +
        "mounted and writable",
    );
  }
  try {
    await access(own, constants.W_OK | constants.X_OK);
  } catch {
    const owner = await stat(own).then(
      (s) => `UID ${s.uid}`,
      () => "another UID",
    );
    throw new StartupError(
      `plugin ${plugin}: cannot create a socket in ${own}: it belongs to ${owner} and this ` +
        `process (UID ${process.geteuid?.() ?? "?"}) may not write to it. Another container ` +
        `holds this plugin's name: give each plugin a volume of its own at ${own} ` +
        "(see docs/security.md)",
    );
  }
  let stats;
  try {
    stats = await lstat(path);
  } catch (error) {
    if (errorCode(error) === "ENOENT") {
      return;
    }
    throw new StartupError(`plugin ${plugin}: cannot inspect ${path}: ${(error as Error).message}`);
  }
  if (!stats.isSocket()) {
    throw new NotASocketError(
      `plugin ${plugin}: ${path} exists and is not a socket; refusing to delete it. ` +
        "Remove it by hand if it is not needed, or pick another plugin name",
    );
  }
  if (await isLive(path, plugin)) {
    throw new SocketInUseError(
      `plugin ${plugin}: ${path} is served by another live process; refusing to take it ` +
        "over. Stop the other instance, or give this plugin another name",
    );
  }
  try {
    await unlink(path); // stale: left behind by a crashed instance
  } catch (error) {
    if (errorCode(error) !== "ENOENT") {
      throw new StartupError(
        `plugin ${plugin}: cannot remove the stale socket ${path}: ${(error as Error).message}`,
      );
    }
  }
}

/** The identity of a socket file we bound, to tell it from a successor's. */
export class SocketFile {
  private constructor(
    /** The path. */
    readonly path: string,
    private readonly device: number,
    private readonly inode: number,
  ) {}

  /** The socket file now at `path` (call it right after binding). */
  static async boundAt(path: string): Promise<SocketFile> {
    const stats = await lstat(path);
    return new SocketFile(path, stats.dev, stats.ino);
  }

  /**
   * Removes the file if it is still the one we bound and nobody serves on
   * it (call it once our server stopped); true if removed.
   */
  async remove(): Promise<boolean> {
    let stats;
    try {
      stats = await lstat(this.path);
    } catch {
      return false; // Node.js removes it when the server closes
    }
    if (stats.dev !== this.device || stats.ino !== this.inode) {
      return false; // a newer instance bound the path since: not ours
    }
    // Inode numbers are reused at once, so the same number does not prove it
    // is still our file: a live server on it is a successor's.
    try {
      if (await isLive(this.path)) {
        return false;
      }
      await unlink(this.path);
      return true;
    } catch {
      return false;
    }
  }
}
