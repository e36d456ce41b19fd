// Shared test helpers: short socket dirs, a fake operator registry (a real
// grpc-js server on a real Unix socket), Plugin clients, captured logs.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import {
  type CallOptions,
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type sendUnaryData,
  type ServiceError,
} from "@grpc/grpc-js";

import { type Logger, type LogLevel, proto, secondsToDurationForTests } from "./sdk.js";

/** A fresh socket dir under /tmp (Unix socket paths must stay under 108 bytes). */
export async function tempSocketDir(): Promise<string> {
  return mkdtemp("/tmp/kplug-ts-");
}

/** Removes a temp dir. */
export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** Polls `predicate` until it holds, or fails with `what` after `timeoutMs`. */
export async function waitUntil(predicate: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(10);
  }
}

/** One log line. */
export interface LogLine {
  level: LogLevel;
  message: string;
}

/** A logger that keeps every line, for assertions. */
export class CapturingLogger implements Logger {
  readonly lines: LogLine[] = [];
  debug(message: string): void {
    this.lines.push({ level: "debug", message });
  }
  info(message: string): void {
    this.lines.push({ level: "info", message });
  }
  warn(message: string): void {
    this.lines.push({ level: "warn", message });
  }
  error(message: string): void {
    this.lines.push({ level: "error", message });
  }
  /** Lines whose message contains `text`. */
  matching(text: string | RegExp): LogLine[] {
    return this.lines.filter((line) =>
      typeof text === "string" ? line.message.includes(text) : text.test(line.message),
    );
  }
}

const CLIENT_OPTIONS = { "grpc.default_authority": "localhost", "grpc.use_local_subchannel_pool": 1 };

/** Call options with a deadline `timeoutSeconds` from now. */
export function within(timeoutSeconds: number): Partial<CallOptions> {
  return { deadline: new Date(Date.now() + timeoutSeconds * 1000) };
}

/** Awaits a unary call made by `call` with the callback it is given. */
export function unary<Res>(call: (callback: (error: ServiceError | null, response: Res) => void) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    call((error, response) => {
      if (error) {
        reject(error);
      } else {
        resolve(response);
      }
    });
  });
}

/** A Plugin client on a socket path, as the operator dials it. */
export class Dialer {
  readonly #clients: proto.PluginClient[] = [];

  /** Opens a client on `path`. */
  open(path: string): PluginStub {
    const client = new proto.PluginClient(`unix:${path}`, credentials.createInsecure(), {
      ...CLIENT_OPTIONS,
      "grpc.max_receive_message_length": -1,
    });
    this.#clients.push(client);
    return new PluginStub(client);
  }

  /** Closes every client opened. */
  close(): void {
    for (const client of this.#clients) {
      client.close();
    }
  }
}

/** Promise-based calls of the Plugin service. */
export class PluginStub {
  constructor(readonly client: proto.PluginClient) {}

  getInfo(timeoutSeconds = 5): Promise<proto.GetInfoResponse> {
    return unary((done) => this.client.getInfo({}, new Metadata(), within(timeoutSeconds), done));
  }

  probe(timeoutSeconds = 5): Promise<proto.ProbeResponse> {
    return unary((done) => this.client.probe({}, new Metadata(), within(timeoutSeconds), done));
  }

  reconcile(request: proto.ReconcileRequest, timeoutSeconds = 5): Promise<proto.ReconcileResponse> {
    return unary((done) => this.client.reconcile(request, new Metadata(), within(timeoutSeconds), done));
  }

  finalize(request: proto.FinalizeRequest, timeoutSeconds = 5): Promise<proto.FinalizeResponse> {
    return unary((done) => this.client.finalize(request, new Metadata(), within(timeoutSeconds), done));
  }

  validate(request: proto.ValidateRequest, timeoutSeconds = 5): Promise<proto.ValidateResponse> {
    return unary((done) => this.client.validate(request, new Metadata(), within(timeoutSeconds), done));
  }

  default(request: proto.DefaultRequest, timeoutSeconds = 5): Promise<proto.DefaultResponse> {
    return unary((done) => this.client.default(request, new Metadata(), within(timeoutSeconds), done));
  }

  hook(request: proto.HookRequest, timeoutSeconds = 5): Promise<proto.HookResponse> {
    return unary((done) => this.client.hook(request, new Metadata(), within(timeoutSeconds), done));
  }

  mutate(request: proto.MutateRequest, timeoutSeconds = 5): Promise<proto.MutateResponse> {
    return unary((done) => this.client.mutate(request, new Metadata(), within(timeoutSeconds), done));
  }
}

/** What the fake operator learned by dialing a new instance back. */
export interface Handshake {
  info?: proto.GetInfoResponse;
  probe?: proto.ProbeResponse;
  error?: string;
}

/** One recorded call, with its arrival time (ms, monotonic) and :authority. */
export interface Recorded<T> {
  at: number;
  authority: string;
  request: T;
}

/**
 * A kplug.v1.Registry on `<socketDir>/registry.sock` that records what
 * plugins send. Like the operator, it dials a new instance back during its
 * first heartbeat (GetInfo, then Probe) before answering, so a plugin that
 * heartbeats before it serves shows up as a failed handshake.
 */
export class FakeRegistry {
  accepted = true;
  reason = "";
  /** The interval to ask for, in seconds; undefined sends none. */
  interval: number | undefined;
  readonly heartbeats: Recorded<proto.HeartbeatRequest>[] = [];
  readonly unregisters: Recorded<proto.UnregisterRequest>[] = [];
  readonly handshakes = new Map<string, Handshake>();
  #server: Server | undefined;

  constructor(readonly socketDir: string) {}

  /** The registry socket. */
  get path(): string {
    return join(this.socketDir, "registry.sock");
  }

  /** Starts serving. */
  async start(): Promise<this> {
    const server = new Server();
    const handlers: proto.RegistryServer = {
      heartbeat: (
        call: ServerUnaryCall<proto.HeartbeatRequest, proto.HeartbeatResponse>,
        callback: sendUnaryData<proto.HeartbeatResponse>,
      ) => {
        void this.#heartbeat(call).then((response) => callback(null, response));
      },
      unregister: (
        call: ServerUnaryCall<proto.UnregisterRequest, proto.UnregisterResponse>,
        callback: sendUnaryData<proto.UnregisterResponse>,
      ) => {
        this.unregisters.push({ at: performance.now(), authority: call.getHost(), request: call.request });
        callback(null, { removed: this.handshakes.has(call.request.instanceId) });
      },
    };
    server.addService(proto.RegistryService, handlers);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix:${this.path}`, ServerCredentials.createInsecure(), (error) =>
        error ? reject(error) : resolve(),
      ),
    );
    this.#server = server;
    return this;
  }

  /** Stops at once (the socket file goes away with it). */
  stop(): void {
    this.#server?.forceShutdown();
    this.#server = undefined;
  }

  /** Waits until `count` heartbeats (or unregisters) arrived. */
  async waitFor(what: "heartbeats" | "unregisters", count = 1, timeoutMs = 5000): Promise<void> {
    const records = what === "heartbeats" ? this.heartbeats : this.unregisters;
    await waitUntil(() => records.length >= count, `${count} ${what} (got ${records.length})`, timeoutMs);
  }

  async #heartbeat(
    call: ServerUnaryCall<proto.HeartbeatRequest, proto.HeartbeatResponse>,
  ): Promise<proto.HeartbeatResponse> {
    const request = call.request;
    if (!this.handshakes.has(request.instanceId)) {
      this.handshakes.set(request.instanceId, await this.#handshake(request));
    }
    this.heartbeats.push({ at: performance.now(), authority: call.getHost(), request });
    return {
      accepted: this.accepted,
      reason: this.reason,
      ttl: { seconds: 15, nanos: 0 },
      interval: this.interval === undefined ? undefined : secondsToDurationForTests(this.interval),
      // What the operator supports today; the SDK declares only what it does.
      capabilities: [
        proto.Capability.CAPABILITY_RECONCILE,
        proto.Capability.CAPABILITY_FINALIZE,
        proto.Capability.CAPABILITY_VALIDATE,
        proto.Capability.CAPABILITY_DEFAULT,
        proto.Capability.CAPABILITY_HOOKS,
        proto.Capability.CAPABILITY_CHILDREN,
        proto.Capability.CAPABILITY_MUTATE,
      ],
    };
  }

  async #handshake(request: proto.HeartbeatRequest): Promise<Handshake> {
    const dialer = new Dialer();
    try {
      const stub = dialer.open(join(this.socketDir, request.socket));
      const info = await stub.getInfo(1);
      const probe = await stub.probe(1);
      return { info, probe };
    } catch (error) {
      return { error: String(error) };
    } finally {
      dialer.close();
    }
  }
}

/** A child process whose stderr is collected. */
export interface Child {
  process: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Starts `node <script>` with extra environment variables. */
export function startNode(script: string, env: Record<string, string>): Child {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "inherit", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => resolve(code));
  });
  return { process: child, stderr: () => stderr, exited };
}

/** Resolves with the exit code, or fails after `timeoutMs`. */
export async function exitCode(child: Child, timeoutMs = 10000): Promise<number | null> {
  return Promise.race([
    child.exited,
    sleep(timeoutMs, undefined, { ref: false }).then(() => {
      throw new Error(`the process did not exit within ${timeoutMs} ms; stderr:\n${child.stderr()}`);
    }),
  ]);
}

/** Kills the process if it still runs. */
export async function killChild(child: Child): Promise<void> {
  if (child.process.exitCode === null && child.process.signalCode === null) {
    child.process.kill("SIGKILL");
    await child.exited;
  }
}
