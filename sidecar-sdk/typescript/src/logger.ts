/**
 * Where the SDK logs: state changes at info (serving, registered, lost the
 * operator, shutting down), problems at warn and error, retries at debug.
 *
 * @module
 */

/**
 * A logger the SDK writes to. `console` fits, and so do pino, winston and
 * most other Node.js loggers.
 */
export interface Logger {
  /** Details, e.g. every heartbeat retry. */
  debug(message: string): void;
  /** State changes. */
  info(message: string): void;
  /** Something went wrong; the plugin carries on. */
  warn(message: string): void;
  /** Something needs fixing. */
  error(message: string): void;
}

/** Log levels, from the most verbose. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

/**
 * A logger writing `<ISO time> <LEVEL> kplug: <message>` lines to stderr,
 * dropping messages below `level` (default `info`).
 */
export function stderrLogger(level: LogLevel = "info"): Logger {
  const threshold = LEVELS.indexOf(level);
  const write = (at: LogLevel) =>
    LEVELS.indexOf(at) >= threshold
      ? (message: string) => {
          process.stderr.write(`${new Date().toISOString()} ${at.toUpperCase()} kplug: ${message}\n`);
        }
      : dropped;
  return { debug: write("debug"), info: write("info"), warn: write("warn"), error: write("error") };
}

/** What {@link stderrLogger} logs below its level with: nothing. */
function dropped(_message: string): void {}

/**
 * Whether `logger` may write at `level`: false only for the levels a
 * {@link stderrLogger} drops, so that a message made for every call (each
 * Reconcile's, at debug) is not made for nothing.
 */
export function writes(logger: Logger, level: LogLevel): boolean {
  return logger[level] !== dropped;
}

/** The text of a thrown value: `"<name>: <message>"` for an Error, as shown on the resource. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    return error.message ? `${error.name}: ${error.message}` : error.name;
  }
  return String(error);
}
