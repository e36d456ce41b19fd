/**
 * What a plugin is asked to do: the decoded base object, its extensions and
 * the children the operator manages for it.
 *
 * @module
 */

import { InvalidRequestError } from "./errors.js";

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;

/** A JSON object: a decoded Kubernetes object, a `spec`, a `status`... */
export interface JsonObject {
  [key: string]: JsonValue;
}

/**
 * A Kubernetes object as the API server serves it (`apiVersion`, `kind`,
 * `metadata`, `spec`, `status`), decoded from the JSON the operator sent.
 */
export type KubeObject = JsonObject;

/** Points at one Kubernetes object; `namespace` is empty for cluster-scoped ones. */
export interface ObjectRef {
  /** `group/version` (or `v1` for the core group), as in the object's `apiVersion`. */
  readonly apiVersion: string;
  /** Kind in CamelCase. */
  readonly kind: string;
  /** Namespace; empty for cluster-scoped objects. */
  readonly namespace: string;
  /** Object name. */
  readonly name: string;
}

/** `value` if it is a JSON object (not an array, not null), else undefined. */
export function asObject(value: JsonValue | undefined): JsonObject | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? value : undefined;
}

function text(value: JsonValue | undefined): string {
  return typeof value === "string" ? value : "";
}

/** The reference to a Kubernetes object (missing fields are empty strings). */
export function refOf(object: KubeObject): ObjectRef {
  const metadata = asObject(object["metadata"]) ?? {};
  return {
    apiVersion: text(object["apiVersion"]),
    kind: text(object["kind"]),
    namespace: text(metadata["namespace"]),
    name: text(metadata["name"]),
  };
}

/** `Kind namespace/name` (or `Kind name` for a cluster-scoped object), for messages. */
export function describeRef(ref: ObjectRef): string {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/${ref.name}` : ref.name}`;
}

// Strict UTF-8: invalid bytes are an error, and a byte order mark is kept
// (so JSON.parse refuses it, as the Rust and Python SDKs do).
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Decodes one object the operator sent. The messages are the ones every SDK
 * uses (sidecar-sdk/conformance/README.md).
 *
 * @throws {InvalidRequestError} when `data` is not valid JSON or not a JSON object.
 */
export function decodeObject(what: string, data: Uint8Array): KubeObject {
  let value: JsonValue;
  try {
    // JSON.parse accepts exactly JSON: no NaN, no Infinity.
    value = JSON.parse(utf8.decode(data)) as JsonValue;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new InvalidRequestError(`kplug: ${what} is not valid JSON: ${reason}`);
  }
  const object = asObject(value);
  if (object === undefined) {
    throw new InvalidRequestError(`kplug: ${what} is not a JSON object`);
  }
  return object;
}

/**
 * A `Reconcile` or `Finalize` call: the base object, the extensions of the
 * kinds the plugin declared for the chosen implementation, and the children
 * the operator manages for it.
 */
export class Request {
  /** The implementation the operator chose: one of the plugin's offers. */
  readonly implementation: string;
  /** The base object, as the API server serves it. */
  readonly object: KubeObject;
  /** The extension objects, in the order the base object references them. */
  readonly extensions: readonly KubeObject[];
  /**
   * The children the operator manages for this base object on this plugin's
   * behalf, as they are now (with their status, e.g. a Deployment's
   * `readyReplicas`), including those being deleted. Empty when the offer
   * declares no child kinds.
   */
  readonly children: readonly KubeObject[];

  /**
   * A request from already decoded objects, for tests of your plugin:
   * `children` are the observed children the operator would send.
   */
  constructor(
    implementation: string,
    object: KubeObject,
    extensions: readonly KubeObject[] = [],
    children: readonly KubeObject[] = [],
  ) {
    this.implementation = implementation;
    this.object = object;
    this.extensions = extensions;
    this.children = children;
  }

  /**
   * Decodes the JSON the operator sent.
   *
   * @throws {InvalidRequestError} when the base object, an extension or a
   *   child is not valid JSON or not a JSON object; the message says which.
   */
  static decode(
    implementation: string,
    object: Uint8Array,
    extensions: readonly Uint8Array[],
    children: readonly Uint8Array[] = [],
  ): Request {
    return new Request(
      implementation,
      decodeObject("the base object", object),
      extensions.map((extension, i) => decodeObject(`extension #${i}`, extension)),
      children.map((child, i) => decodeObject(`child #${i}`, child)),
    );
  }

  /** The base object's `metadata` (empty when absent). */
  get metadata(): JsonObject {
    return asObject(this.object["metadata"]) ?? {};
  }

  /** The base object's `spec` (empty when absent or not an object). */
  get spec(): JsonObject {
    return asObject(this.object["spec"]) ?? {};
  }

  /** The base object's `metadata.name`. */
  get name(): string {
    return text(this.metadata["name"]);
  }

  /** The base object's `metadata.namespace`; empty for a cluster-scoped object. */
  get namespace(): string {
    return text(this.metadata["namespace"]);
  }

  /** The base object's `metadata.generation` (0 when absent). */
  get generation(): number {
    const generation = this.metadata["generation"];
    return typeof generation === "number" && Number.isInteger(generation) ? generation : 0;
  }

  /** Whether the base object is being deleted (`metadata.deletionTimestamp` is set; always in Finalize). */
  get deleting(): boolean {
    const timestamp = this.metadata["deletionTimestamp"];
    return timestamp !== undefined && timestamp !== null;
  }

  /** The first extension of `kind` (e.g. `"DatabaseTablePostgreSqlExtension"`), or undefined if none was sent. */
  extension(kind: string): KubeObject | undefined {
    return this.extensions.find((extension) => extension["kind"] === kind);
  }

  /** All extensions of `kind`, in reference order. */
  extensionsOf(kind: string): KubeObject[] {
    return this.extensions.filter((extension) => extension["kind"] === kind);
  }

  /** The observed child of `kind` (e.g. `"Deployment"`) named `name`, or undefined if it does not exist (yet). */
  child(kind: string, name: string): KubeObject | undefined {
    return this.children.find((child) => child["kind"] === kind && refOf(child).name === name);
  }

  /** The observed children of `kind`, in the order the operator sent them. */
  childrenOf(kind: string): KubeObject[] {
    return this.children.filter((child) => child["kind"] === kind);
  }

  /**
   * The reference to `object` (default: the base object), e.g. for
   * {@link Response.extensionStatus} or an event's `regarding`.
   */
  ref(object: KubeObject = this.object): ObjectRef {
    return refOf(object);
  }

  /** `Kind namespace/name` of the base object. */
  toString(): string {
    return describeRef(this.ref());
  }
}
