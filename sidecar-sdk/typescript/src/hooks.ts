/**
 * Hooks and call policies: what a plugin declares in its
 * {@link PluginInfo} beyond its offers, the call a hook gets and the
 * answer it gives.
 *
 * A hook runs at one phase of the lifecycle of every object of one base
 * kind, whichever implementation reconciles it (a plugin may hook into a
 * kind it does not offer):
 *
 * ```ts
 * const info: PluginInfo = {
 *   name: "backup",
 *   version: "1.0.0",
 *   offers: [],
 *   hooks: [{ name: "snapshot", base: { group: "myorg.org", kind: "DatabaseTable" },
 *             phase: "BEFORE_FINALIZE", behaviour: "SYNC_ENFORCE" }],
 *   callPolicies: [{ call: "HOOK", deadlineSeconds: 120 }],
 * };
 * const backup: Plugin = {
 *   reconcile: async () => Response.ok(),
 *   async hook(call) {
 *     await snapshot(call.request.name);
 *     return HookResponse.ok("snapshot taken").withStatus({ lastSnapshot: new Date().toISOString() });
 *   },
 * };
 * ```
 *
 * @module
 */

import { InvalidResponseError, StartupError } from "./errors.js";
import type { HookRequest, HookResponse as WireHookResponse } from "./gen/kplug/v1/plugin.js";
import {
  Call as WireCall,
  type CallPolicy as WireCallPolicy,
  FailurePolicy as WireFailurePolicy,
  type Hook as WireHook,
  HookBehaviour as WireHookBehaviour,
  HookPhase as WireHookPhase,
  Outcome as WireOutcome,
} from "./gen/kplug/v1/types.js";
import type { GroupKind } from "./info.js";
import { DEFAULT_RETRY_AFTER_SECONDS, MAX_CALL_POLICIES, MAX_HOOKS, MAX_NAME_LENGTH } from "./protocol.js";
import { type JsonObject, type ObjectRef, Request } from "./request.js";
import {
  checkRetryDelay,
  type Event,
  type EventOptions,
  newEvent,
  type Outcome,
  secondsToDuration,
  isObjectText,
  JsonCopy,
  stringify,
  wireEvents,
  wireOutcome,
  wireRetryAfter,
} from "./response.js";

/** Where in an object's lifecycle a hook runs. */
export type HookPhase = "BEFORE_RECONCILE" | "AFTER_RECONCILE" | "BEFORE_FINALIZE" | "AFTER_FINALIZE";

/**
 * How a hook's result affects the step it surrounds: `SYNC_ENFORCE` (the
 * operator waits; anything but OK stops the step), `SYNC_BYPASS` (it waits;
 * a failure is a Warning Event and the step goes on), `ASYNC` (queued,
 * never waited for).
 */
export type HookBehaviour = "SYNC_ENFORCE" | "SYNC_BYPASS" | "ASYNC";

/** A hook the plugin declares in {@link PluginInfo.hooks}. */
export interface Hook {
  /** A DNS label, unique within the plugin; names the hook in calls, conditions, Events and metrics. */
  readonly name: string;
  /** The base kind whose objects the hook is called for. */
  readonly base: GroupKind;
  /** When the hook is called. */
  readonly phase: HookPhase;
  /** How its result affects the step. */
  readonly behaviour: HookBehaviour;
  /** Hooks of one phase and kind run by increasing order (default 0), then plugin name, then hook name. */
  readonly order?: number;
}

/** A call of the Plugin service, for {@link CallPolicy}; `HOOK` is every hook of the plugin. */
export type Call = "RECONCILE" | "FINALIZE" | "VALIDATE" | "DEFAULT" | "HOOK" | "MUTATE";

/** What admission does when a Validate or Default call fails: refuse the object, or admit it with a warning. */
export type FailurePolicy = "FAIL" | "IGNORE";

/**
 * How the plugin asks to be called for one call (one policy per call). The
 * operator clamps the deadline to its bounds (at least 1 s, at most 10 min,
 * and at most 10 s for Validate and Default); a call past it is a timeout,
 * and the plugin stays registered.
 */
export interface CallPolicy {
  /** The call this policy is for. */
  readonly call: Call;
  /** How long the operator waits, in seconds (positive); unset for the operator's default. */
  readonly deadlineSeconds?: number;
  /** For VALIDATE and DEFAULT: refuse or admit when the call fails; unset for the operator's default. */
  readonly failurePolicy?: FailurePolicy;
}

const PHASES: Record<HookPhase, WireHookPhase> = {
  BEFORE_RECONCILE: WireHookPhase.HOOK_PHASE_BEFORE_RECONCILE,
  AFTER_RECONCILE: WireHookPhase.HOOK_PHASE_AFTER_RECONCILE,
  BEFORE_FINALIZE: WireHookPhase.HOOK_PHASE_BEFORE_FINALIZE,
  AFTER_FINALIZE: WireHookPhase.HOOK_PHASE_AFTER_FINALIZE,
};
const BEHAVIOURS: Record<HookBehaviour, WireHookBehaviour> = {
  SYNC_ENFORCE: WireHookBehaviour.HOOK_BEHAVIOUR_SYNC_ENFORCE,
  SYNC_BYPASS: WireHookBehaviour.HOOK_BEHAVIOUR_SYNC_BYPASS,
  ASYNC: WireHookBehaviour.HOOK_BEHAVIOUR_ASYNC,
};
const CALLS: Record<Call, WireCall> = {
  RECONCILE: WireCall.CALL_RECONCILE,
  FINALIZE: WireCall.CALL_FINALIZE,
  VALIDATE: WireCall.CALL_VALIDATE,
  DEFAULT: WireCall.CALL_DEFAULT,
  HOOK: WireCall.CALL_HOOK,
  MUTATE: WireCall.CALL_MUTATE,
};
const FAILURE_POLICIES: Record<FailurePolicy, WireFailurePolicy> = {
  FAIL: WireFailurePolicy.FAILURE_POLICY_FAIL,
  IGNORE: WireFailurePolicy.FAILURE_POLICY_IGNORE,
};
const OUTCOMES: Partial<Record<WireOutcome, Outcome>> = {
  [WireOutcome.OUTCOME_OK]: "OK",
  [WireOutcome.OUTCOME_RETRY]: "RETRY",
  [WireOutcome.OUTCOME_FAILED]: "FAILED",
};

const has = <K extends string>(table: Record<K, unknown>, key: unknown): key is K =>
  typeof key === "string" && Object.hasOwn(table, key);

/** The wire form of a hook. */
export function wireHook(hook: Hook): WireHook {
  return {
    name: hook.name,
    base: { group: hook.base.group, kind: hook.base.kind },
    phase: PHASES[hook.phase],
    behaviour: BEHAVIOURS[hook.behaviour],
    order: hook.order ?? 0,
  };
}

/** The wire form of a call policy. */
export function wireCallPolicy(policy: CallPolicy): WireCallPolicy {
  return {
    call: CALLS[policy.call],
    deadline: policy.deadlineSeconds === undefined ? undefined : secondsToDuration(policy.deadlineSeconds),
    failurePolicy:
      policy.failurePolicy === undefined
        ? WireFailurePolicy.FAILURE_POLICY_UNSPECIFIED
        : FAILURE_POLICIES[policy.failurePolicy],
  };
}

/**
 * The operator's checks on declared hooks and call policies, made at
 * start-up so that a mistake stops the plugin with a message instead of
 * every heartbeat being refused. Checked at run time too: plugins may be
 * written in JavaScript.
 *
 * @throws {StartupError} naming the hook or policy and what is wrong.
 */
export function validateDeclarations(
  plugin: string,
  hooks: readonly Hook[],
  policies: readonly CallPolicy[],
  hasHookHandler: boolean,
): void {
  const refuse = (problem: string) => new StartupError(`plugin ${plugin} cannot start: ${problem}`);
  if (hooks.length > MAX_HOOKS) {
    throw refuse(`${hooks.length} hooks are declared; at most ${MAX_HOOKS} are accepted`);
  }
  const names = new Set<string>();
  for (const hook of hooks) {
    const name: unknown = hook.name;
    // Checked at run time: plugins may be written in JavaScript.
    const base = hook.base as GroupKind | undefined;
    let problem: string | undefined;
    if (typeof name !== "string" || name.length > MAX_NAME_LENGTH || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
      problem =
        "its name must be a DNS label: lowercase letters, digits and '-', starting and ending " +
        `with a letter or digit, at most ${MAX_NAME_LENGTH} characters`;
    } else if (names.has(name)) {
      problem = "it is declared twice; hook names are unique within a plugin";
    } else if (typeof base?.kind !== "string" || base.kind === "") {
      problem = "it names no base kind";
    } else if (!has(PHASES, hook.phase)) {
      problem = `its phase ${JSON.stringify(hook.phase)} is not one of ${Object.keys(PHASES).join(", ")}`;
    } else if (!has(BEHAVIOURS, hook.behaviour)) {
      problem = `its behaviour ${JSON.stringify(hook.behaviour)} is not one of ${Object.keys(BEHAVIOURS).join(", ")}`;
    } else if (hook.order !== undefined && !(Number.isInteger(hook.order) && hook.order >= -(2 ** 31) && hook.order < 2 ** 31)) {
      problem = `its order must be a 32-bit integer, got ${hook.order}`;
    }
    if (problem !== undefined) {
      throw refuse(`hook ${JSON.stringify(String(name))}: ${problem}`);
    }
    names.add(name as string);
  }
  if (hooks.length > 0 && !hasHookHandler) {
    throw refuse("it declares hooks but does not implement Plugin.hook");
  }
  if (policies.length > MAX_CALL_POLICIES) {
    throw refuse(`${policies.length} call policies are declared; at most ${MAX_CALL_POLICIES} are accepted`);
  }
  const calls = new Set<Call>();
  for (const policy of policies) {
    const deadline: unknown = policy.deadlineSeconds;
    let problem: string | undefined;
    if (!has(CALLS, policy.call)) {
      problem = `the call is not one of ${Object.keys(CALLS).join(", ")}`;
    } else if (calls.has(policy.call)) {
      problem = "declared twice; one policy per call";
    } else if (deadline !== undefined && !(typeof deadline === "number" && Number.isFinite(deadline) && deadline > 0)) {
      problem = `the deadline must be a positive number of seconds, got ${typeof deadline === "number" ? String(deadline) : JSON.stringify(deadline)} (leave it unset for the operator's default)`;
    } else if (policy.failurePolicy !== undefined && !has(FAILURE_POLICIES, policy.failurePolicy)) {
      problem = `the failure policy ${JSON.stringify(policy.failurePolicy)} is not FAIL or IGNORE`;
    }
    if (problem !== undefined) {
      throw refuse(`call policy for ${policy.call}: ${problem}`);
    }
    calls.add(policy.call);
  }
}

/**
 * A `Hook` call: which hook runs, at which phase, and the objects the
 * implementation is (or was) sent.
 */
export class HookCall {
  /** The hook's name, as declared. */
  readonly hook: string;
  /** The phase being run; undefined for one this SDK does not know (a newer operator). */
  readonly phase: HookPhase | undefined;
  /** The implementation chosen for the object (possibly another plugin's), the object and the extensions it is sent. */
  readonly request: Request;
  /** In after-* phases: the outcome of the implementation's call (FAILED too when the call failed); undefined before. */
  readonly outcome: Outcome | undefined;
  /** In after-* phases: the message of that call; empty before. */
  readonly message: string;

  /** A call from an already decoded request (for tests of your plugin). */
  constructor(hook: string, phase: HookPhase | undefined, request: Request, outcome?: Outcome, message = "") {
    this.hook = hook;
    this.phase = phase;
    this.request = request;
    this.outcome = outcome;
    this.message = message;
  }

  /**
   * Decodes the call the operator sent.
   *
   * @throws {InvalidRequestError} when an object is not a JSON object.
   */
  static decode(wire: HookRequest): HookCall {
    const request = Request.decode(wire.implementation, wire.object, wire.extensions);
    const phase = (Object.keys(PHASES) as HookPhase[]).find((p) => PHASES[p] === wire.phase);
    return new HookCall(wire.hook, phase, request, OUTCOMES[wire.outcome], wire.message);
  }
}

/**
 * A hook's answer: an outcome, a message, a status (a JSON object the
 * operator writes under `status.hooks.<plugin>` of the base object, where
 * the operator's reserved keys may be used) and events. With RETRY from a
 * sync-enforce hook, the delay says when to try the step again.
 */
export class HookResponse {
  #outcome: Outcome;
  #message: string;
  #retryAfterSeconds: number | undefined;
  #status: JsonCopy | undefined;
  #events: Event[] = [];

  private constructor(outcome: Outcome, message: string, retryAfterSeconds?: number) {
    this.#outcome = outcome;
    this.#message = message;
    this.#retryAfterSeconds = retryAfterSeconds;
  }

  /** Done: the step may go on. */
  static ok(message = ""): HookResponse {
    return new HookResponse("OK", message);
  }

  /**
   * Not done yet: a sync-enforce hook's step is tried again after `afterSeconds` (default 10).
   *
   * @throws {InvalidResponseError} when `afterSeconds` is negative or not a finite number.
   */
  static retry(afterSeconds: number = DEFAULT_RETRY_AFTER_SECONDS, message = ""): HookResponse {
    checkRetryDelay(afterSeconds);
    return new HookResponse("RETRY", message, afterSeconds);
  }

  /** Failed: `message` says why; the hook's behaviour says what follows. */
  static failed(message: string): HookResponse {
    return new HookResponse("FAILED", message);
  }

  /** The outcome. */
  get outcome(): Outcome {
    return this.#outcome;
  }

  /** The message. */
  get message(): string {
    return this.#message;
  }

  /** With RETRY: when to try again, in seconds. */
  get retryAfterSeconds(): number | undefined {
    return this.#retryAfterSeconds;
  }

  /** The hook's status, if any. */
  get status(): JsonObject | undefined {
    return this.#status?.object;
  }

  /** The events, in the order added. */
  get events(): readonly Event[] {
    return this.#events;
  }

  /** Replaces the message. */
  withMessage(message: string): this {
    this.#message = message;
    return this;
  }

  /**
   * Merges `status` (its top-level keys) into the hook's status, a JSON copy.
   * The operator's reserved keys are allowed: it lands under `status.hooks.<plugin>`.
   *
   * @throws {InvalidResponseError} when `status` is not a JSON object or cannot be encoded.
   */
  withStatus(status: object): this {
    const text = stringify(status, "a value");
    if (!isObjectText(text)) {
      const copy = JSON.parse(text) as unknown;
      throw new InvalidResponseError(
        `status must be a JSON object, got ${Array.isArray(copy) ? "an array" : typeof copy}`,
      );
    }
    const copy = JsonCopy.ofText(text);
    this.#status = this.#status === undefined ? copy : this.#status.merge(copy);
    return this;
  }

  /** Records a Kubernetes Event on the base object, or on `options.regarding` (an object the plugin was sent). */
  event(reason: string, message: string, options: EventOptions = {}): this {
    this.#events.push(newEvent(reason, message, options));
    return this;
  }

  /** Records a Warning event. */
  warning(reason: string, message: string, regarding?: EventOptions["regarding"]): this {
    return this.event(reason, message, { warning: true, regarding });
  }

  /**
   * The wire form. `base` and `extensions` are the objects the implementation is sent.
   *
   * @throws {InvalidResponseError} for an event about an object the plugin was not sent.
   */
  toHookResponse(base: ObjectRef, extensions: readonly ObjectRef[]): WireHookResponse {
    return {
      outcome: wireOutcome(this.#outcome),
      message: this.#message,
      status: this.#status === undefined ? Buffer.alloc(0) : this.#status.encode(),
      events: wireEvents(this.#events, base, extensions),
      retryAfter: wireRetryAfter(this.#outcome, this.#retryAfterSeconds),
    };
  }
}
