/**
 * What a plugin answers: an outcome, statuses, conditions, events and the
 * children it desires.
 *
 * Build one with {@link Response.ok}, {@link Response.retry} or
 * {@link Response.failed}, then chain what you have to report:
 *
 * ```ts
 * return Response.ok("table created")
 *   .withStatus({ columns: 3 })
 *   .extensionStatus(request.extension("DatabaseTablePostgreSqlExtension"), { partitions: 4 })
 *   .condition("TableReady", true, "Created", "the table exists")
 *   .event("TableCreated", "created table users");
 * ```
 *
 * The operator's rules apply, and break early here with a message that says
 * what to change: the status keys and condition types the operator owns are
 * refused, and statuses and events may only target objects the plugin was sent.
 *
 * @module
 */

import { InvalidResponseError } from "./errors.js";
import type { Duration } from "./gen/google/protobuf/duration.js";
import type {
  FinalizeResponse,
  ObjectStatus as WireObjectStatus,
  ReconcileResponse,
} from "./gen/kplug/v1/plugin.js";
import {
  type Children as WireChildren,
  ConditionStatus,
  EventType,
  Outcome as WireOutcome,
  type Condition as WireCondition,
  type Event as WireEvent,
} from "./gen/kplug/v1/types.js";
import {
  DEFAULT_RETRY_AFTER_SECONDS,
  RESERVED_CONDITION_TYPES,
  RESERVED_STATUS_KEYS,
} from "./protocol.js";
import {
  describeRef,
  refOf,
  type JsonObject,
  type JsonValue,
  type KubeObject,
  type ObjectRef,
} from "./request.js";

/** What a call achieved: done, not done yet (call again later), or failed. */
export type Outcome = "OK" | "RETRY" | "FAILED";

/** A condition on the base object; `status` null means Unknown. */
export interface Condition {
  /** CamelCase type, e.g. `TableReady`. */
  readonly type: string;
  /** Whether it holds; null when unknown. */
  readonly status: boolean | null;
  /** CamelCase machine-readable reason, e.g. `ColumnsAltered`. */
  readonly reason: string;
  /** Human-readable message. */
  readonly message: string;
}

/** A Kubernetes Event the operator records; `regarding` undefined means the base object. */
export interface Event {
  /** CamelCase reason, e.g. `TableCreated`. */
  readonly reason: string;
  /** Human-readable message. */
  readonly message: string;
  /** Warning (something needs attention) or Normal. */
  readonly warning: boolean;
  /** The object the event is about: the base object or an extension the plugin was sent. */
  readonly regarding: ObjectRef | undefined;
}

/** A status for one extension the plugin was sent, merged into its `.status`. */
export interface ObjectStatus {
  /** The extension. */
  readonly target: ObjectRef;
  /** The plugin's part of its status. */
  readonly status: JsonObject;
}

/** What an event is about: a Kubernetes object from the request, or its reference. */
export type Target = KubeObject | ObjectRef;

/** Options of {@link Response.event}. */
export interface EventOptions {
  /** A Warning event (something needs a user's attention) instead of a Normal one. */
  warning?: boolean;
  /** The object the event is about (default: the base object): one the plugin was sent. */
  regarding?: Target | undefined;
}

/**
 * A plugin's answer to `Reconcile` or `Finalize`.
 *
 * Finalize answers carry only the outcome, the message, the retry delay,
 * events and children: the object is going away, so statuses and conditions
 * are refused there. The builder methods change the response and return it,
 * so calls chain.
 */
export class Response {
  #outcome: Outcome;
  #message: string;
  #retryAfterSeconds: number | undefined;
  #status: JsonCopy | undefined;
  #extensionStatuses: ObjectStatus[] = [];
  #conditions: Condition[] = [];
  #events: Event[] = [];
  /** The desired children; undefined leaves them as they are. */
  #children: JsonCopy[] | undefined;
  /**
   * The children as {@link children} handed them out: from then on the set
   * sent, as the array the getter returned always was.
   */
  #childrenRead: JsonObject[] | undefined;

  private constructor(outcome: Outcome, message: string, retryAfterSeconds?: number) {
    this.#outcome = outcome;
    this.#message = message;
    this.#retryAfterSeconds = retryAfterSeconds;
  }

  /** Done: the object is reconciled (for Finalize: cleaned up, it may go). */
  static ok(message = ""): Response {
    return new Response("OK", message);
  }

  /**
   * Not done yet, nothing is wrong: call again after `afterSeconds` (default 10; may be fractional).
   *
   * @throws {InvalidResponseError} when `afterSeconds` is negative or not a finite number.
   */
  static retry(afterSeconds: number = DEFAULT_RETRY_AFTER_SECONDS, message = ""): Response {
    checkRetryDelay(afterSeconds);
    return new Response("RETRY", message, afterSeconds);
  }

  /** Failed: `message` says why (shown on the resource); the operator retries with backoff. */
  static failed(message: string): Response {
    return new Response("FAILED", message);
  }

  /** The outcome. */
  get outcome(): Outcome {
    return this.#outcome;
  }

  /** The message for humans (shown in the `Reconciled` condition). */
  get message(): string {
    return this.#message;
  }

  /** With {@link Response.retry}: when to call again, in seconds. */
  get retryAfterSeconds(): number | undefined {
    return this.#retryAfterSeconds;
  }

  /** The plugin's part of the base object's status, if any. */
  get status(): JsonObject | undefined {
    return this.#status?.object;
  }

  /** The statuses for extensions, in the order added. */
  get extensionStatuses(): readonly ObjectStatus[] {
    return this.#extensionStatuses;
  }

  /** The conditions, in the order added. */
  get conditions(): readonly Condition[] {
    return this.#conditions;
  }

  /** The events, in the order added. */
  get events(): readonly Event[] {
    return this.#events;
  }

  /**
   * The desired children, in the order added: undefined when the answer
   * leaves them as they are, else the whole set (even empty).
   */
  get children(): readonly JsonObject[] | undefined {
    if (this.#children === undefined) {
      return undefined;
    }
    this.#childrenRead ??= this.#children.map((child) => child.object);
    return this.#childrenRead;
  }

  /** The children to add to: those read back (and maybe changed since), else those set. */
  #currentChildren(): JsonCopy[] {
    const read = this.#childrenRead;
    this.#childrenRead = undefined;
    return read === undefined ? (this.#children ?? []) : read.map((child) => JsonCopy.ofObject(child));
  }

  /** Replaces the message. */
  withMessage(message: string): this {
    this.#message = message;
    return this;
  }

  /**
   * Merges `status` (its top-level keys) into the base object's status. It is
   * copied as JSON: later changes to `status` do not change the response.
   *
   * @throws {InvalidResponseError} when `status` is not a JSON object, cannot
   *   be encoded as JSON, or sets a key the operator owns (`implementation`,
   *   `plugin`, `observedGeneration`, `conditions`).
   */
  withStatus(status: object): this {
    const checked = checkStatus(status, "status");
    this.#status = this.#status === undefined ? checked : this.#status.merge(checked);
    return this;
  }

  /**
   * Merges `status` into the status of `target`: an extension the plugin was
   * sent (the object from `request.extensions`, or its reference).
   *
   * @throws {InvalidResponseError} when `target` is undefined (e.g.
   *   `request.extension(kind)` found none), or `status` is not a JSON object
   *   or sets a key the operator owns.
   */
  extensionStatus(target: Target | undefined | null, status: object): this {
    if (target === undefined || target === null) {
      throw new InvalidResponseError(
        "extensionStatus target is undefined: pass an extension from request.extensions " +
          "(request.extension(kind) returns undefined when none of that kind was sent)",
      );
    }
    const ref = toRef(target);
    const checked = checkStatus(status, `status of ${describeRef(ref)}`);
    const existing = this.#extensionStatuses.find((item) => sameRef(item.target, ref));
    if (existing) {
      mergeExtensionStatus(existing, checked);
    } else {
      this.#extensionStatuses.push(extensionStatusItem(ref, checked));
    }
    return this;
  }

  /**
   * Reports a condition on the base object: `status` true, false, or null for Unknown.
   *
   * @throws {InvalidResponseError} when `type` is empty or one the operator
   *   owns (`Ready`, `PluginAvailable`, `ExtensionsResolved`, `Reconciled`).
   */
  condition(type: string, status: boolean | null, reason = "", message = ""): this {
    checkConditionType(type);
    this.#conditions.push({ type, status, reason, message });
    return this;
  }

  /**
   * Adds a child: a Kubernetes object the operator applies for this base
   * object, with `apiVersion`, `kind`, `metadata.name` and the fields the
   * plugin manages. Its kind must be one the offer declares
   * (`Offer.children`); the operator puts it in the base object's
   * namespace, owns it and watches it. It is copied as JSON.
   *
   * An answer that adds a child, or calls {@link Response.withChildren},
   * carries the whole set: on OK the operator deletes the children no longer
   * listed (on RETRY it only applies them). An answer without either leaves
   * the children as they are.
   *
   * ```ts
   * return Response.ok().child({
   *   apiVersion: "v1",
   *   kind: "ConfigMap",
   *   metadata: { name: `${request.name}-greeting` },
   *   data: { greeting: `hello, ${request.name}` },
   * });
   * ```
   *
   * @throws {InvalidResponseError} when `object` is not a JSON object or
   *   cannot be encoded as JSON.
   */
  child(object: object): this {
    const checked = checkChild(object);
    this.#children = [...this.#currentChildren(), checked];
    return this;
  }

  /**
   * Sets the whole set of desired children (each as for {@link Response.child});
   * an empty set deletes every child on OK.
   *
   * @throws {InvalidResponseError} when one is not a JSON object or cannot be
   *   encoded as JSON; the set is then left as it was.
   */
  withChildren(objects: Iterable<object>): this {
    this.#children = Array.from(objects, checkChild);
    this.#childrenRead = undefined;
    return this;
  }

  /**
   * Records a Kubernetes Event on the base object, or on `options.regarding`
   * (an object the plugin was sent); `options.warning` makes it a Warning.
   */
  event(reason: string, message: string, options: EventOptions = {}): this {
    this.#events.push(newEvent(reason, message, options));
    return this;
  }

  /** Records a Warning event: `event(reason, message, { warning: true, regarding })`. */
  warning(reason: string, message: string, regarding?: Target): this {
    return this.event(reason, message, { warning: true, regarding });
  }

  /**
   * The desired children on the wire: no message when unset (the children
   * stay as they are), else the message, present even when empty (the empty
   * set deletes every child).
   */
  #wireChildren(): WireChildren | undefined {
    if (this.#childrenRead !== undefined) {
      return { objects: this.#childrenRead.map(encodeJson) };
    }
    return this.#children === undefined ? undefined : { objects: this.#children.map((child) => child.encode()) };
  }

  /**
   * The wire form of a Reconcile answer. `base` and `extensions` are the
   * objects the plugin was sent: extension statuses must target one of
   * `extensions`, events the base object or one of them.
   *
   * @throws {InvalidResponseError} where the operator would refuse the response.
   */
  toReconcileResponse(base: ObjectRef, extensions: readonly ObjectRef[]): ReconcileResponse {
    const extensionStatuses: WireObjectStatus[] = this.#extensionStatuses.map((item) => {
      if (sameObject(item.target, base)) {
        throw new InvalidResponseError(
          `extensionStatus targets the base object ${describeRef(item.target)}; set its status ` +
            "with withStatus()",
        );
      }
      checkSent(item.target, extensions, "a status");
      return { target: { ...item.target }, status: encodeExtensionStatus(item) };
    });
    return {
      outcome: wireOutcome(this.#outcome),
      message: this.#message,
      retryAfter: wireRetryAfter(this.#outcome, this.#retryAfterSeconds),
      status: this.#status === undefined ? Buffer.alloc(0) : this.#status.encode(),
      extensionStatuses,
      conditions: this.#conditions.map(wireCondition),
      events: wireEvents(this.#events, base, extensions),
      children: this.#wireChildren(),
    };
  }

  /**
   * The wire form of a Finalize answer.
   *
   * @throws {InvalidResponseError} when it carries a status, extension
   *   statuses or conditions (a Finalize answer cannot), or an event about an
   *   object the plugin was not sent.
   */
  toFinalizeResponse(base: ObjectRef, extensions: readonly ObjectRef[]): FinalizeResponse {
    if (
      this.#status !== undefined ||
      this.#extensionStatuses.length > 0 ||
      this.#conditions.length > 0
    ) {
      throw new InvalidResponseError(
        "a Finalize response carries no status, extension statuses or conditions (the object " +
          "is being deleted); return the outcome, a message and events only",
      );
    }
    return {
      outcome: wireOutcome(this.#outcome),
      message: this.#message,
      retryAfter: wireRetryAfter(this.#outcome, this.#retryAfterSeconds),
      events: wireEvents(this.#events, base, extensions),
      children: this.#wireChildren(),
    };
  }
}

/**
 * A JSON copy of `child`, which must be a JSON object. The wording is every
 * SDK's (sidecar-sdk/conformance/README.md, step 4c).
 */
function checkChild(child: unknown): JsonCopy {
  const text = stringify(child, "a child");
  if (!isObjectText(text)) {
    throw new InvalidResponseError(
      `a child must be a JSON object (with apiVersion, kind and metadata.name), got ${kindOf(JSON.parse(text) as JsonValue)}`,
    );
  }
  return JsonCopy.ofText(text);
}

/**
 * Refuses a retry delay the operator could not honour, for every answer that can ask to be retried.
 *
 * @throws {InvalidResponseError} when `afterSeconds` is negative or not a finite number.
 */
export function checkRetryDelay(afterSeconds: number): void {
  if (!Number.isFinite(afterSeconds) || afterSeconds < 0) {
    throw new InvalidResponseError(
      `retry delay must be a finite number of seconds, not negative, got ${afterSeconds}`,
    );
  }
}

/** An event as `event(reason, message, options)` records it: `options.regarding` as a reference. */
export function newEvent(reason: string, message: string, options: EventOptions): Event {
  const regarding = options.regarding === undefined ? undefined : toRef(options.regarding);
  return { reason, message, warning: options.warning ?? false, regarding };
}

/** The retry delay on the wire: only a RETRY answer carries one, the default when not told. */
export function wireRetryAfter(outcome: Outcome, retryAfterSeconds: number | undefined): Duration | undefined {
  if (outcome !== "RETRY") {
    return undefined;
  }
  return secondsToDuration(retryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS);
}

/**
 * The wire form of `events`. `base` and `extensions` are the objects the plugin was sent.
 *
 * @throws {InvalidResponseError} for an event about an object the plugin was not sent.
 */
export function wireEvents(events: readonly Event[], base: ObjectRef, extensions: readonly ObjectRef[]): WireEvent[] {
  return events.map((event) => {
    if (event.regarding !== undefined) {
      checkSent(event.regarding, [base, ...extensions], `event "${event.reason}"`);
    }
    return {
      type: event.warning ? EventType.EVENT_TYPE_WARNING : EventType.EVENT_TYPE_NORMAL,
      reason: event.reason,
      message: event.message,
      regarding: event.regarding === undefined ? undefined : { ...event.regarding },
    };
  });
}

/** A protobuf Duration of `seconds` (finite, not negative). */
export function secondsToDuration(seconds: number): Duration {
  let whole = Math.floor(seconds);
  let nanos = Math.round((seconds - whole) * 1e9);
  if (nanos >= 1e9) {
    whole += 1;
    nanos -= 1e9;
  }
  return { seconds: whole, nanos };
}

/** Seconds in a protobuf Duration. */
export function durationToSeconds(duration: Duration): number {
  return duration.seconds + duration.nanos / 1e9;
}

/**
 * Compact UTF-8 JSON, as every SDK sends it.
 *
 * @throws {InvalidResponseError} when `value` cannot be encoded (a cycle, a
 *   BigInt, NaN or Infinity).
 */
export function encodeJson(value: JsonValue): Buffer {
  return Buffer.from(stringify(value, "a value"), "utf8");
}

/**
 * `value` as JSON text, which must exist (JSON.stringify writes none for
 * undefined, a function or a symbol).
 *
 * @throws {InvalidResponseError} naming `what` when there is none, or
 *   `value` cannot be encoded.
 */
export function stringify(value: unknown, what: string): string {
  const text = jsonTextOf(value, what);
  if (text === undefined) {
    throw new InvalidResponseError(`${what} must be a JSON object, got ${typeof value}`);
  }
  return text;
}

/**
 * `value` as JSON text, or undefined where JSON.stringify gives none (for
 * undefined, a function or a symbol; each caller says what it expected).
 *
 * @throws {InvalidResponseError} naming `what` when `value` cannot be encoded
 *   (a cycle, a BigInt, NaN or Infinity).
 */
export function jsonTextOf(value: unknown, what: string): string | undefined {
  // JSON.stringify without a replacer takes V8's fast path, and writes what
  // it writes with the replacer below: the replacer only turns NaN and
  // ±Infinity, which JSON.stringify writes as null, into errors. So its text
  // stands unless it contains "null" (rarely, in a status), and where it
  // throws, the replacer's run throws what it always threw (e.g. for NaN
  // before a cycle).
  let text: string | undefined;
  try {
    text = stringifyAny(value);
  } catch {
    return checkedJsonTextOf(value, what);
  }
  return text?.includes("null") ? checkedJsonTextOf(value, what) : text;
}

/**
 * JSON.stringify, typed as it behaves: it gives undefined for undefined, a
 * function or a symbol, which its declared type omits.
 */
const stringifyAny: (value: unknown) => string | undefined = JSON.stringify;

/** {@link jsonTextOf}, refusing NaN and ±Infinity as it meets them. */
function checkedJsonTextOf(value: unknown, what: string): string | undefined {
  try {
    // JSON.stringify returns undefined for undefined, functions and symbols,
    // which its declared type omits; this function's return type says so.
    return JSON.stringify(value, (_key, item: unknown) => {
      if (typeof item === "number" && !Number.isFinite(item)) {
        throw new InvalidResponseError(`${what} cannot be encoded as JSON: ${item} is not a JSON number`);
      }
      return item;
    });
  } catch (error) {
    if (error instanceof InvalidResponseError) {
      throw error;
    }
    const reason = error instanceof Error ? error.message : String(error);
    throw new InvalidResponseError(`${what} cannot be encoded as JSON: ${reason}`);
  }
}

function kindOf(value: JsonValue): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return `a ${typeof value}`;
}

/** A JSON copy of `status`, checked to be a JSON object without operator-owned keys. */
function checkStatus(status: unknown, what: string): JsonCopy {
  const text = stringify(status, what);
  if (!isObjectText(text)) {
    throw new InvalidResponseError(`${what} must be a JSON object, got ${kindOf(JSON.parse(text) as JsonValue)}`);
  }
  const copy = JsonCopy.ofText(text);
  // Only a key `status` has can be in its JSON, unless a toJSON method wrote
  // the JSON: only then is the copy decoded to look at its keys.
  if (mayWriteReservedKey(status)) {
    for (const key of Object.keys(copy.peek())) {
      if (RESERVED_STATUS_KEYS.includes(key)) {
        throw new InvalidResponseError(
          `${what} key "${key}" is reserved for the operator (it owns ` +
            `${[...RESERVED_STATUS_KEYS].sort().join(", ")}); report it under another key, ` +
            "or as a condition",
        );
      }
    }
  }
  return copy;
}

/**
 * Whether JSON.stringify may write one of the operator's status keys at the
 * top level of `value`'s JSON: it writes an object's own enumerable keys
 * (own, so `Object.hasOwn` is true for each), or whatever its `toJSON`
 * method returns.
 */
function mayWriteReservedKey(value: unknown): boolean {
  const object = value as Record<string, unknown>;
  if (typeof object["toJSON"] === "function") {
    return true;
  }
  for (const key of RESERVED_STATUS_KEYS) {
    if (Object.hasOwn(object, key)) {
      return true;
    }
  }
  return false;
}

/** Whether `text`, written by JSON.stringify, is a JSON object (JSON.stringify starts no other value with `{`). */
export function isObjectText(text: string): boolean {
  return text.charCodeAt(0) === 0x7b;
}

/**
 * A JSON object copied from what a plugin passed: the text JSON.stringify
 * wrote, and the copy JSON.parse reads back from it, made only when asked
 * for. A status or child is thus stringified once, and sent as that text,
 * rather than stringified to copy it, parsed back, and stringified again to
 * send it. JSON.parse(JSON.stringify(x)) stringifies back to the same text,
 * so the bytes sent are the same.
 *
 * Once {@link object} has handed the copy out, a plugin may change it, and
 * the change is sent, as it was when the SDK kept only the copy: the text
 * is dropped, and the copy encoded when sent.
 *
 * @internal
 */
export class JsonCopy {
  /** The text to send, while the copy cannot have been changed. */
  #text: string | undefined;
  /** The copy, or its text until it is first read. */
  #object: JsonObject | string;

  private constructor(text: string | undefined, object: JsonObject | string) {
    this.#text = text;
    this.#object = object;
  }

  /** The copy of the object JSON.stringify wrote as `text` (a JSON object). */
  static ofText(text: string): JsonCopy {
    return new JsonCopy(text, text);
  }

  /** `object` itself, a JSON object (a copy already, or one a plugin may have changed). */
  static ofObject(object: JsonObject): JsonCopy {
    return new JsonCopy(undefined, object);
  }

  /** The copy, for the SDK to read without changing it; the text stays. */
  peek(): JsonObject {
    if (typeof this.#object === "string") {
      this.#object = JSON.parse(this.#object) as JsonObject;
    }
    return this.#object;
  }

  /** The copy, for a plugin, which may change it. */
  get object(): JsonObject {
    const object = this.peek();
    this.#text = undefined;
    return object;
  }

  /** A new copy with the top-level keys of `other` merged into this one's. */
  merge(other: JsonCopy): JsonCopy {
    return JsonCopy.ofObject({ ...this.peek(), ...other.peek() });
  }

  /**
   * Compact UTF-8 JSON: the text as written, else the copy encoded now.
   *
   * @throws {InvalidResponseError} when a plugin changed the copy into
   *   something JSON cannot carry.
   */
  encode(): Buffer {
    return this.#text === undefined ? encodeJson(this.peek()) : Buffer.from(this.#text, "utf8");
  }
}

/** The JSON copies of the extension statuses `extensionStatuses` lists, by item. */
const extensionCopies = new WeakMap<ObjectStatus, { copy: JsonCopy }>();

/**
 * A status for one extension, as `extensionStatuses` lists it: a plain
 * object (as it always was) whose `status` hands out the copy sent (see
 * {@link JsonCopy}); setting it replaces the status.
 */
function extensionStatusItem(target: ObjectRef, copy: JsonCopy): ObjectStatus {
  const held = { copy };
  const item = {
    target,
    get status(): JsonObject {
      return held.copy.object;
    },
    set status(status: JsonObject) {
      held.copy = JsonCopy.ofObject(status);
    },
  };
  extensionCopies.set(item, held);
  return item;
}

/** Merges `checked` into the status of `item`. */
function mergeExtensionStatus(item: ObjectStatus, checked: JsonCopy): void {
  const held = extensionCopies.get(item);
  if (held === undefined) {
    // An item a plugin put in the list itself.
    (item as { status: JsonObject }).status = { ...item.status, ...checked.peek() };
  } else {
    held.copy = held.copy.merge(checked);
  }
}

/**
 * The status of `item` as sent: its copy, or (for an item a plugin put in
 * the list itself) its `status` encoded now.
 */
function encodeExtensionStatus(item: ObjectStatus): Buffer {
  return extensionCopies.get(item)?.copy.encode() ?? encodeJson(item.status);
}

function checkConditionType(type: string): void {
  if (!type) {
    throw new InvalidResponseError(
      "condition type is empty; use a CamelCase type such as 'TableReady'",
    );
  }
  if (RESERVED_CONDITION_TYPES.includes(type)) {
    throw new InvalidResponseError(
      `condition type "${type}" is reserved for the operator (it owns ` +
        `${[...RESERVED_CONDITION_TYPES].sort().join(", ")}); use a type of your own, ` +
        "e.g. 'TableReady'",
    );
  }
}

/** Whether `target` is an object reference rather than a Kubernetes object. */
function isRef(target: Target): target is ObjectRef {
  const candidate = target as Partial<Record<keyof ObjectRef | "metadata", unknown>>;
  return (
    candidate.metadata === undefined &&
    typeof candidate.name === "string" &&
    typeof candidate.kind === "string" &&
    typeof candidate.apiVersion === "string"
  );
}

/** @internal */
export function toRef(target: Target): ObjectRef {
  if (isRef(target)) {
    return {
      apiVersion: target.apiVersion,
      kind: target.kind,
      namespace: typeof target.namespace === "string" ? target.namespace : "",
      name: target.name,
    };
  }
  return refOf(target);
}

function sameRef(a: ObjectRef, b: ObjectRef): boolean {
  return (
    a.apiVersion === b.apiVersion &&
    a.kind === b.kind &&
    a.namespace === b.namespace &&
    a.name === b.name
  );
}

function group(apiVersion: string): string {
  const slash = apiVersion.lastIndexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

/** Whether `a` and `b` name the same object as the operator compares them: the version may differ, the group may not. */
function sameObject(a: ObjectRef, b: ObjectRef): boolean {
  return (
    group(a.apiVersion) === group(b.apiVersion) &&
    a.kind === b.kind &&
    a.namespace === b.namespace &&
    a.name === b.name
  );
}

/** @internal */
export function checkSent(target: ObjectRef, sent: readonly ObjectRef[], what: string): void {
  if (!sent.some((candidate) => sameObject(target, candidate))) {
    throw new InvalidResponseError(
      `${what} targets ${describeRef(target)} (${target.apiVersion}), which was not sent to ` +
        "this plugin; target an object from the request",
    );
  }
}

/** @internal */
export function wireOutcome(outcome: Outcome): WireOutcome {
  switch (outcome) {
    case "OK":
      return WireOutcome.OUTCOME_OK;
    case "RETRY":
      return WireOutcome.OUTCOME_RETRY;
    case "FAILED":
      return WireOutcome.OUTCOME_FAILED;
  }
}

function wireCondition(condition: Condition): WireCondition {
  return {
    type: condition.type,
    status:
      condition.status === null
        ? ConditionStatus.CONDITION_STATUS_UNKNOWN
        : condition.status
          ? ConditionStatus.CONDITION_STATUS_TRUE
          : ConditionStatus.CONDITION_STATUS_FALSE,
    reason: condition.reason,
    message: condition.message,
  };
}
