/**
 * Running a plugin: start-up, serving, heartbeats and the SIGTERM drain.
 *
 * The order is the protocol's (docs/protocol.md): validate the name, claim
 * the socket, serve, and only then heartbeat, because the operator dials back
 * on the first heartbeat. On SIGTERM: Unregister, stop taking calls and let
 * the ones in flight finish (10 s grace), remove our socket, exit 0.
 *
 * @module
 */

import { randomUUID } from "node:crypto";
import { chmod } from "node:fs/promises";
import { lstat } from "node:fs/promises";
import { dirname, relative, resolve } from "node:path";

import { Server, ServerCredentials } from "@grpc/grpc-js";

import { StartupError } from "./errors.js";
import { PluginService } from "./gen/kplug/v1/plugin.js";
import { Heartbeat } from "./heartbeat.js";
import { type PluginInfo, validateName, validateOffers, wireOffer } from "./info.js";
import { describeError, type Logger, stderrLogger } from "./logger.js";
import type { Plugin } from "./plugin.js";
import { exportSpans } from "./tracing.js";
import {
  DEFAULT_GRACE_SECONDS,
  DEFAULT_HEARTBEAT_INTERVAL_SECONDS,
  DEFAULT_SOCKET_DIR,
  HEARTBEAT_INTERVAL_ENV,
  MAX_MESSAGE_BYTES,
  PROTOCOL,
  REGISTRY_SOCKET,
  SOCKET_DIR_ENV,
  type SocketDirOrigin,
} from "./protocol.js";
import { validateDeclarations } from "./hooks.js";
import { validateMutations } from "./mutate.js";
import { capabilities, declarations, pluginHandlers } from "./service.js";
import { claimSocket, pluginSocketPath, removePluginDir, SocketFile } from "./socket.js";

/** Settings of a {@link PluginServer}; {@link serve} and {@link run} take them too. */
export interface ServeOptions {
  /**
   * The directory shared with the operator. Default: `$KPLUG_SOCKET_DIR`,
   * then `/var/run/kplug`. It must exist (the plugin creates `plugins/<name>/`
   * in it, never the directory itself).
   */
  socketDir?: string;
  /**
   * Seconds between heartbeats until the operator asks for another (may be
   * fractional). Default: `$KPLUG_HEARTBEAT_INTERVAL`, then 5.
   */
  heartbeatIntervalSeconds?: number;
  /** How long calls in flight may take to finish at shutdown, in seconds. Default: 10. */
  graceSeconds?: number;
  /** Where to log. Default: lines on stderr, from info up ({@link stderrLogger}). */
  logger?: Logger;
}

// A plain decimal number, as Rust's f64 parser reads it (no hex, no spaces).
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** The heartbeat interval in seconds: `configured`, else `$KPLUG_HEARTBEAT_INTERVAL`, else 5. */
function heartbeatInterval(plugin: string, configured: number | undefined): number {
  let value: number;
  let what: string;
  if (configured === undefined) {
    const text = process.env[HEARTBEAT_INTERVAL_ENV];
    if (!text) {
      return DEFAULT_HEARTBEAT_INTERVAL_SECONDS;
    }
    value = DECIMAL.test(text) ? Number(text) : Number.NaN;
    what = `${HEARTBEAT_INTERVAL_ENV}=${JSON.stringify(text)}`;
  } else {
    value = configured;
    what = `heartbeatIntervalSeconds=${String(configured)}`;
  }
  if (!(Number.isFinite(value) && value > 0)) {
    throw new StartupError(
      `plugin ${plugin}: invalid ${what}: the heartbeat interval is a positive number of ` +
        "seconds, e.g. 5 or 0.5",
    );
  }
  return value;
}

/**
 * One running plugin instance: its socket server and its heartbeats.
 *
 * {@link run} (or {@link serve}) is what plugins use; this class is for
 * embedding a plugin in a larger program, or a test, that decides itself
 * when to stop.
 */
export class PluginServer {
  /** The plugin. */
  readonly plugin: Plugin;
  /** Its description. */
  readonly info: PluginInfo;
  /** The socket dir, absolute. */
  readonly socketDir: string;
  /** Where the socket dir came from; the messages about it say so. */
  readonly socketDirOrigin: SocketDirOrigin;
  /** `<socket dir>/plugins/<name>/plugin.sock`. */
  readonly socketPath: string;
  /** A fresh random id (UUIDv4) for this instance. */
  readonly instanceId: string;
  /** How long calls in flight may take to finish at shutdown, in seconds. */
  readonly graceSeconds: number;
  readonly #logger: Logger;
  readonly #heartbeat: Heartbeat;
  #server: Server | undefined;
  #socketFile: SocketFile | undefined;
  #heartbeating = false;
  #stopping: Promise<void> | undefined;

  /**
   * Checks the settings; nothing runs until {@link start}.
   *
   * @throws {StartupError} when the name is not a DNS label or the heartbeat
   *   interval is not a positive number.
   */
  constructor(plugin: Plugin, info: PluginInfo, options: ServeOptions = {}) {
    validateName(info.name);
    validateOffers(info.name, info.offers);
    validateDeclarations(
      info.name,
      info.hooks ?? [],
      info.callPolicies ?? [],
      typeof plugin.hook === "function",
    );
    validateMutations(info.name, info.mutations ?? [], typeof plugin.mutate === "function");
    this.plugin = plugin;
    this.info = info;
    this.#logger = options.logger ?? stderrLogger();
    this.socketDirOrigin = options.socketDir
      ? "program"
      : process.env[SOCKET_DIR_ENV]
        ? "environment"
        : "default";
    this.socketDir = resolve(options.socketDir || process.env[SOCKET_DIR_ENV] || DEFAULT_SOCKET_DIR);
    this.socketPath = pluginSocketPath(this.socketDir, info.name);
    this.instanceId = randomUUID();
    this.graceSeconds = options.graceSeconds ?? DEFAULT_GRACE_SECONDS;
    this.#heartbeat = new Heartbeat(
      resolve(this.socketDir, REGISTRY_SOCKET),
      {
        name: info.name,
        version: info.version,
        instanceId: this.instanceId,
        protocol: PROTOCOL,
        socket: relative(this.socketDir, this.socketPath),
        offers: info.offers.map(wireOffer),
        capabilities: capabilities(plugin, info),
        ...declarations(info),
      },
      heartbeatInterval(info.name, options.heartbeatIntervalSeconds),
      this.#logger,
      this.socketDirOrigin,
    );
  }

  /** Whether the operator accepted the last heartbeat. */
  get registered(): boolean {
    return this.#heartbeat.registered;
  }

  /** The current heartbeat interval in seconds: the configured one, then the operator's. */
  get heartbeatIntervalSeconds(): number {
    return this.#heartbeat.intervalSeconds;
  }

  /**
   * Claims the socket, serves on it, then starts heartbeating.
   *
   * @throws {StartupError} when the socket cannot be claimed or bound; the
   *   message names the path and what to do.
   */
  async start(): Promise<void> {
    if (this.#server !== undefined || this.#stopping !== undefined) {
      throw new StartupError(`plugin ${this.info.name}: start() was called twice`);
    }
    const name = this.info.name;
    await claimSocket(this.socketPath, name, this.socketDirOrigin);
    const server = new Server({ "grpc.max_receive_message_length": MAX_MESSAGE_BYTES });
    server.addService(PluginService, pluginHandlers(this.plugin, this.info, this.#logger));
    try {
      await new Promise<number>((resolve, reject) => {
        server.bindAsync(`unix:${this.socketPath}`, ServerCredentials.createInsecure(), (error, port) =>
          error ? reject(error) : resolve(port),
        );
      });
    } catch (error) {
      server.forceShutdown();
      throw new StartupError(
        `plugin ${name}: cannot listen on ${this.socketPath}: ${describeError(error)}; check ` +
          "that the socket directory is writable and no other instance just started",
      );
    }
    this.#server = server;
    // The operator runs as another UID: anyone in the pod may connect, and
    // the operator tells callers apart by their credentials (SO_PEERCRED).
    await chmod(this.socketPath, 0o666);
    this.#socketFile = await SocketFile.boundAt(this.socketPath);
    this.#logger.info(
      `plugin ${name} ${this.info.version}: serving on ${this.socketPath} (instance ${this.instanceId})`,
    );
    // Serve first: the operator dials back on the first heartbeat.
    this.#heartbeat.start();
    this.#heartbeating = true;
  }

  /**
   * Unregisters, drains the calls in flight (up to `graceSeconds`, then
   * cancels them), removes the socket, and then the plugin's own directory,
   * `plugins/<name>/`, if that left it empty. Calling it again waits for the
   * first stop.
   */
  stop(graceSeconds: number = this.graceSeconds): Promise<void> {
    this.#stopping ??= this.#stop(graceSeconds);
    return this.#stopping;
  }

  async #stop(graceSeconds: number): Promise<void> {
    const name = this.info.name;
    if (this.#heartbeating) {
      await this.#heartbeat.stop();
      // The server still serves here: the operator waits for our calls in
      // flight before it answers.
      await this.#heartbeat.unregister();
      this.#heartbeating = false;
    }
    const server = this.#server;
    if (server !== undefined) {
      this.#logger.info(
        `plugin ${name}: stopped taking calls; draining those in flight (up to ${graceSeconds}s)`,
      );
      const drained = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), graceSeconds * 1000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      if (!drained) {
        this.#logger.warn(
          `plugin ${name}: calls still in flight after the grace period (${graceSeconds}s); ` +
            "cancelling them",
        );
        server.forceShutdown();
      }
      this.#server = undefined;
    }
    if (this.#socketFile !== undefined) {
      await this.#socketFile.remove();
      this.#socketFile = undefined;
      const gone = await lstat(this.socketPath).then(
        () => false,
        () => true,
      );
      if (gone) {
        await removePluginDir(dirname(this.socketPath));
      }
    }
    this.#logger.info(`plugin ${name}: stopped`);
  }

  /**
   * Stops at once: no Unregister, calls in flight are cancelled. For a
   * second signal, when the user does not want to wait for the drain.
   */
  async abort(): Promise<void> {
    this.#server?.forceShutdown();
    this.#server = undefined;
    await this.#socketFile?.remove();
    this.#socketFile = undefined;
  }
}

const SIGNALS = ["SIGTERM", "SIGINT"] as const;

/**
 * Serves `plugin` until SIGTERM or SIGINT, then unregisters, drains and
 * resolves. A second signal during the drain cancels the calls in flight,
 * removes the socket and exits the process with status 1 at once.
 *
 * @throws {StartupError} when the plugin cannot start.
 */
export async function serve(plugin: Plugin, info: PluginInfo, options: ServeOptions = {}): Promise<void> {
  const logger = options.logger ?? stderrLogger();
  const server = new PluginServer(plugin, info, { ...options, logger });
  const stopTracing = exportSpans(info.name);
  let signalled: (signal: NodeJS.Signals) => void = () => {};
  const stopRequested = new Promise<NodeJS.Signals>((resolve) => {
    signalled = resolve;
  });
  let received = false;
  // Set by a second signal: the abort, which ends the process with status 1.
  let aborting: Promise<void> | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!received) {
      received = true;
      logger.info(`plugin ${info.name}: ${signal} received; shutting down`);
      signalled(signal);
      return;
    }
    logger.warn(`plugin ${info.name}: ${signal} received again; stopping now`);
    aborting = server.abort().finally(() => process.exit(1));
  };
  for (const signal of SIGNALS) {
    process.on(signal, onSignal);
  }
  try {
    await server.start();
    await stopRequested;
    await server.stop();
    // The abort cancels the calls in flight, which ends the drain too: wait
    // for it here, or `run` would exit 0 before the abort exits 1.
    if (aborting) {
      await aborting;
    }
  } finally {
    for (const signal of SIGNALS) {
      process.off(signal, onSignal);
    }
    await stopTracing?.();
  }
}

/**
 * The body of a plugin's main module: {@link serve}, then exit 0. When the
 * plugin cannot start, logs the reason (one line) and exits with status 1.
 */
export function run(plugin: Plugin, info: PluginInfo, options: ServeOptions = {}): void {
  const logger = options.logger ?? stderrLogger();
  serve(plugin, info, { ...options, logger }).then(
    () => process.exit(0),
    (error: unknown) => {
      logger.error(
        error instanceof StartupError
          ? error.message
          : `plugin ${info.name}: ${error instanceof Error && error.stack ? error.stack : describeError(error)}`,
      );
      process.exit(1);
    },
  );
}
