/**
 * Registration with the operator: heartbeats with backoff, and Unregister on
 * shutdown.
 *
 * Every heartbeat carries the plugin's full description, so an operator that
 * restarted (and forgot the instance) simply registers it again: there is no
 * separate "register" step to redo.
 *
 * @module
 */

import { dirname } from "node:path";

import {
  type ClientUnaryCall,
  credentials,
  Metadata,
  type ServiceError,
  status as GrpcStatus,
} from "@grpc/grpc-js";

import {
  type HeartbeatRequest,
  type HeartbeatResponse,
  RegistryClient,
  type UnregisterResponse,
} from "./gen/kplug/v1/registry.js";
import { describeError, type Logger } from "./logger.js";
import {
  BACKOFF_FACTOR,
  BACKOFF_INITIAL_SECONDS,
  BACKOFF_JITTER,
  HEARTBEAT_TIMEOUT_SECONDS,
  registryWaitingMessage,
  type SocketDirOrigin,
  UNREGISTER_TIMEOUT_SECONDS,
} from "./protocol.js";
import { durationToSeconds } from "./response.js";
import { isLive } from "./socket.js";

/**
 * The protocol's wait, in seconds, after the `attempt`-th failed heartbeat in
 * a row (counting from 1; 0 counts as 1), for `unit` drawn uniformly from
 * [0, 1): `base = min(capSeconds, 0.1 × 2^(attempt − 1))`, then
 * `base × (1 − 0.1 × unit)`. The jitter only shortens the wait, so it never
 * exceeds `capSeconds`, the heartbeat interval in force. A `unit` outside
 * [0, 1] (or NaN) is clamped.
 */
export function backoffDelay(attempt: number, capSeconds: number, unit: number): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 64);
  const base = Math.min(BACKOFF_INITIAL_SECONDS * BACKOFF_FACTOR ** exponent, capSeconds);
  const clamped = Number.isNaN(unit) ? 0 : Math.min(Math.max(unit, 0), 1);
  return base * (1 - BACKOFF_JITTER * clamped);
}

/** gRPC channel options for the Unix socket of the registry. */
export function channelOptions(intervalSeconds: number): Record<string, string | number> {
  return {
    // The :authority must be a valid host name: the operator's HTTP/2
    // server resets streams whose authority is a socket path.
    "grpc.default_authority": "localhost",
    // Our own channel, not one shared through grpc-js's global subchannel
    // pool, which keeps its reconnect backoff (1 s growing to 2 min) across
    // clients and would override ours.
    "grpc.use_local_subchannel_pool": 1,
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": Math.max(100, Math.round(intervalSeconds * 1000)),
  };
}

function deadline(seconds: number): Date {
  return new Date(Date.now() + seconds * 1000);
}

/** `"<gRPC status code name>: <details>"` for a failed call. */
function describeStatus(error: unknown): string {
  const failed = error as Partial<ServiceError> | undefined;
  if (typeof failed?.code !== "number") {
    return describeError(error);
  }
  const code = (GrpcStatus as unknown as Record<number, string>)[failed.code] ?? String(failed.code);
  return `${code}: ${failed.details || failed.message || "no details"}`;
}

type State = "starting" | "registered" | "refused" | "unreachable";

/** Heartbeats one plugin instance to the registry socket, from {@link start} until {@link stop}. */
export class Heartbeat {
  readonly #registrySocket: string;
  readonly #request: HeartbeatRequest;
  readonly #logger: Logger;
  #interval: number;
  #client: RegistryClient | undefined;
  #call: ClientUnaryCall | undefined;
  #state: State = "starting";
  #refusal = "";
  #note = "";
  #stopped = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  readonly #origin: SocketDirOrigin;

  /**
   * @param registrySocket - the absolute path of `registry.sock`
   * @param request - sent as is in every heartbeat
   * @param intervalSeconds - until the operator asks for another
   * @param origin - where the socket dir came from, for the warning while
   *   `registry.sock` is missing before the operator ever answered
   */
  constructor(
    registrySocket: string,
    request: HeartbeatRequest,
    intervalSeconds: number,
    logger: Logger,
    origin: SocketDirOrigin = "program",
  ) {
    this.#registrySocket = registrySocket;
    this.#origin = origin;
    this.#request = request;
    this.#interval = intervalSeconds;
    this.#logger = logger;
  }

  /** The current interval in seconds: the configured one, then the one the operator asks for. */
  get intervalSeconds(): number {
    return this.#interval;
  }

  /** Whether the operator accepted the last heartbeat. */
  get registered(): boolean {
    return this.#state === "registered";
  }

  /** Starts heartbeating (once). */
  start(): void {
    this.#loop ??= this.#run();
  }

  /** Stops heartbeating: cancels a heartbeat in flight and waits for the loop to end. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#call?.cancel();
    this.#wake?.();
    await this.#loop;
  }

  /**
   * Tells the operator this instance is going away; errors are logged and
   * ignored. The operator answers once the calls in flight to this instance
   * are done, so this can take a while (bounded by a 10 s deadline).
   */
  async unregister(): Promise<void> {
    const name = this.#request.name;
    try {
      const response = await new Promise<UnregisterResponse>((resolve, reject) => {
        this.#stub().unregister(
          { name, instanceId: this.#request.instanceId },
          new Metadata(),
          { deadline: deadline(UNREGISTER_TIMEOUT_SECONDS) },
          (error, reply) => (error ? reject(error) : resolve(reply)),
        );
      });
      this.#logger.info(
        `plugin ${name}: unregistered from the operator` +
          (response.removed ? "" : " (it did not know this instance)"),
      );
    } catch (error) {
      this.#logger.warn(
        `plugin ${name}: Unregister at ${this.#registrySocket} failed (` +
          `${describeStatus(error)}); exiting anyway, the operator will notice ` +
          "the socket is gone",
      );
    } finally {
      this.#state = "starting";
      this.#closeClient();
    }
  }

  async #run(): Promise<void> {
    let failures = 0;
    try {
      while (!this.#stopped) {
        let delay: number;
        try {
          const response = await this.#heartbeat();
          failures = 0;
          this.#succeeded(response);
          delay = this.#interval;
        } catch (error) {
          if (this.#isStopped()) {
            break; // the call was cancelled by stop()
          }
          failures += 1;
          delay = backoffDelay(failures, this.#interval, Math.random());
          const absent = this.#state === "starting" && (await this.#registryAbsent());
          this.#failed(error, failures, delay, absent);
          // A fresh channel next time: grpc-js's own reconnect backoff must
          // not override ours.
          this.#closeClient();
        }
        await this.#sleep(delay);
      }
    } catch (error) {
      this.#logger.error(`plugin ${this.#request.name}: heartbeats stopped: ${describeError(error)}`);
    }
  }

  // A method, so that the compiler does not assume the flag is unchanged
  // across an await.
  #isStopped(): boolean {
    return this.#stopped;
  }

  #heartbeat(): Promise<HeartbeatResponse> {
    return new Promise((resolve, reject) => {
      this.#call = this.#stub().heartbeat(
        this.#request,
        new Metadata(),
        { deadline: deadline(HEARTBEAT_TIMEOUT_SECONDS) },
        (error, response) => {
          this.#call = undefined;
          if (error) {
            reject(error);
          } else {
            resolve(response);
          }
        },
      );
    });
  }

  #sleep(seconds: number): Promise<void> {
    if (this.#stopped) {
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = undefined;
        resolve();
      }, seconds * 1000);
      this.#wake = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
    });
  }

  #stub(): RegistryClient {
    this.#client ??= new RegistryClient(
      `unix:${this.#registrySocket}`,
      credentials.createInsecure(),
      channelOptions(this.#interval),
    );
    return this.#client;
  }

  #closeClient(): void {
    this.#client?.close();
    this.#client = undefined;
  }

  #succeeded(response: HeartbeatResponse): void {
    const name = this.#request.name;
    if (response.interval !== undefined) {
      const wanted = durationToSeconds(response.interval);
      if (wanted > 0) {
        this.#interval = wanted;
      }
    }
    if (response.accepted) {
      if (this.#state !== "registered") {
        const ttl = response.ttl === undefined ? 0 : durationToSeconds(response.ttl);
        this.#logger.info(
          `plugin ${name}: registered with the operator at ${this.#registrySocket} ` +
            `(heartbeat every ${this.#interval}s, ttl ${ttl}s)`,
        );
      }
      if (response.reason && response.reason !== this.#note) {
        this.#logger.info(`plugin ${name}: the operator says: ${response.reason}`);
      }
      this.#note = response.reason;
      this.#state = "registered";
      return;
    }
    if (this.#state !== "refused" || response.reason !== this.#refusal) {
      this.#logger.error(
        `plugin ${name}: the operator refused the registration: ` +
          `${response.reason || "no reason given"} (heartbeats go on, an upgraded operator may ` +
          "accept it)",
      );
    }
    this.#state = "refused";
    this.#refusal = response.reason;
  }

  /** Whether `registry.sock` is missing or refuses connections (not merely slow). */
  async #registryAbsent(): Promise<boolean> {
    return isLive(this.#registrySocket).then(
      (live) => !live,
      () => false, // cannot be told (e.g. no permission): not "absent"
    );
  }

  // The first failure of a run at warn level, the retries at debug level.
  #failed(error: unknown, failures: number, delay: number, absent: boolean): void {
    const name = this.#request.name;
    if (this.#state === "starting" && absent) {
      this.#logger.warn(
        `plugin ${name}: ${registryWaitingMessage(dirname(this.#registrySocket), this.#origin)}`,
      );
    } else if (this.#state !== "unreachable") {
      const why = `at ${this.#registrySocket} (${describeStatus(error)}); retrying with backoff`;
      const what = this.#state === "starting" ? "cannot reach the operator's registry" : "lost the operator";
      this.#logger.warn(`plugin ${name}: ${what} ${why}`);
    }
    this.#state = "unreachable";
    this.#note = "";
    this.#logger.debug(
      `plugin ${name}: heartbeat failed ${failures} time(s) in a row; next try in ` +
        `${delay.toFixed(3)}s`,
    );
  }
}
