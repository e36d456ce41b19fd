/**
 * Lifecycle mutation: a plugin that patches the objects other plugins
 * desire before the operator applies them (`Mutate`), as a backup plugin
 * adds a sidecar container to every Deployment:
 *
 * ```ts
 * const backup: Plugin = {
 *   reconcile: async () => Response.ok(),
 *   async mutate() {
 *     return Mutation.none().add("/spec/template/spec/containers/-", { name: "backup", image: "backup:1" });
 *   },
 * };
 * run(backup, { name: "backup", version: "1.0.0", offers: [], mutations: [{ apiVersion: "apps/v1", kind: "Deployment" }] });
 * ```
 *
 * The operator sends a plugin only the kinds it declares *and* its admin
 * allows for it (`--mutators backup=apps/v1/Deployment`), in the flag's
 * order after the plugin that desires the object. The answer must be
 * deterministic: the operator judges drift by the mutated object, so a
 * patch that changes from call to call would re-apply the object every time.
 *
 * @module
 */

import { boundedWarnings, jsonText, type PatchOperation } from "./admission.js";
import { InvalidResponseError, StartupError } from "./errors.js";
import type { MutateRequest, MutateResponse } from "./gen/kplug/v1/plugin.js";
import type { Mutation as WireMutation } from "./gen/kplug/v1/types.js";
import { isApiVersion, wireChildKind } from "./info.js";
import { DEFAULT_PATCH_PREFIXES, MAX_MUTATIONS, MAX_PATCH_BYTES } from "./protocol.js";
import { asObject, decodeObject, describeRef, type JsonObject, type JsonValue, type KubeObject, refOf } from "./request.js";

/**
 * A kind of object the plugin patches, by `apiVersion` and kind, as the
 * objects themselves say it: `{ apiVersion: "apps/v1", kind: "Deployment" }`.
 * The operator sends objects of this kind in this version, and only when
 * its admin allows this plugin for the kind (`--mutators`).
 */
export interface MutationKind {
  /** `group/version`, or `v1` for the core group. */
  readonly apiVersion: string;
  /** Kind in CamelCase, e.g. `Deployment`. */
  readonly kind: string;
}

/** Why a path is refused: the operator's rule, in the words every SDK uses. */
export const MUTATION_PATHS = "a mutation may only change /spec and single labels and annotations, not kplug.io/ ones";

/** The kplug.io/ labels and annotations (`~1` is `/` in a JSON Pointer): the operator's own. */
const KPLUG_KEYS = ["/metadata/labels/kplug.io~1", "/metadata/annotations/kplug.io~1"];

/**
 * Whether a Mutate patch may touch `path`, as the operator judges it: `/spec`
 * or below it, or a single label or annotation that is not a `kplug.io/`
 * one (the whole map would take kplug's own labels with it).
 */
export function mutationPathAllowed(path: string): boolean {
  const underAllowed = DEFAULT_PATCH_PREFIXES.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
  const wholeMap = path === "/metadata/labels" || path === "/metadata/annotations";
  return underAllowed && !wholeMap && !KPLUG_KEYS.some((prefix) => path.startsWith(prefix));
}

function text(value: JsonValue | undefined): string {
  return typeof value === "string" ? value : "";
}

/** A `Mutate` call: the object about to be applied, as it is so far. */
export class MutateCall {
  /** The implementation that desires the object; empty for an embedding operator's own object. */
  readonly implementation: string;
  /**
   * The object about to be applied: what the plugin that desires it
   * answered, with kplug's labels and owner reference, and the patches of
   * the mutators before this one.
   */
  readonly object: KubeObject;
  /** The object as it is in the cluster now; undefined when it does not exist yet. */
  readonly live: KubeObject | undefined;
  /** The base object the object is a child of; undefined for an embedding operator's own object. */
  readonly base: KubeObject | undefined;

  /** A call from already decoded objects (for tests of your plugin). */
  constructor(implementation: string, object: KubeObject, live?: KubeObject, base?: KubeObject) {
    this.implementation = implementation;
    this.object = object;
    this.live = live;
    this.base = base;
  }

  /**
   * Decodes the call the operator sent; empty `live` and `base` bytes mean none.
   *
   * @throws {InvalidRequestError} (answered with `INVALID_ARGUMENT`) when an
   *   object is not a JSON object; the message says which.
   */
  static decode(wire: MutateRequest): MutateCall {
    return new MutateCall(
      wire.implementation,
      decodeObject("the object", wire.object),
      wire.live.length > 0 ? decodeObject("the live object", wire.live) : undefined,
      wire.base.length > 0 ? decodeObject("the base object", wire.base) : undefined,
    );
  }

  /** The object's `metadata` (empty when absent). */
  get metadata(): JsonObject {
    return asObject(this.object["metadata"]) ?? {};
  }

  /** The object's `spec` (empty when absent or not an object). */
  get spec(): JsonObject {
    return asObject(this.object["spec"]) ?? {};
  }

  /** The object's kind, e.g. `Deployment`. */
  get kind(): string {
    return text(this.object["kind"]);
  }

  /** The object's `metadata.name`. */
  get name(): string {
    return text(this.metadata["name"]);
  }

  /** The object's `metadata.namespace`; empty for a cluster-scoped object. */
  get namespace(): string {
    return text(this.metadata["namespace"]);
  }

  /** `Kind namespace/name` of the object. */
  toString(): string {
    return describeRef(refOf(this.object));
  }
}

/**
 * A plugin's answer to `Mutate`: a JSON Patch (RFC 6902) against
 * {@link MutateCall.object}, built operation by operation, and warnings.
 * The builder methods change it and return it, so calls chain:
 *
 * ```ts
 * return Mutation.none()
 *   .add("/spec/template/spec/volumes/-", { name: "backup", emptyDir: {} })
 *   .add("/metadata/annotations/backup.example~1enabled", "true");
 * ```
 *
 * Paths are JSON Pointers (`~1` stands for `/` in a key). They may only be
 * `/spec` (or below it) and single labels and annotations
 * (`/metadata/labels/<key>`), never a `kplug.io/` one nor the whole map;
 * another path throws {@link InvalidResponseError} at once, as the
 * operator would refuse the object.
 */
export class Mutation {
  readonly #operations: PatchOperation[] = [];
  readonly #warnings: string[] = [];

  private constructor() {}

  /** No change, so far. */
  static none(): Mutation {
    return new Mutation();
  }

  /** Sets `value` at `path` (a new member, or the member replaced; `-` appends to a list; its parent must exist, or be added first). */
  add(path: string, value: JsonValue): this {
    return this.#push("add", path, value);
  }

  /** Replaces the value at `path`, which must exist. */
  replace(path: string, value: JsonValue): this {
    return this.#push("replace", path, value);
  }

  /** Removes the value at `path`, which must exist. */
  remove(path: string): this {
    return this.#push("remove", path, undefined);
  }

  /** A warning for humans, which the operator logs with the object's name. */
  warning(warning: string): this {
    this.#warnings.push(warning);
    return this;
  }

  /** The operations, in the order added. */
  get patch(): readonly PatchOperation[] {
    return this.#operations;
  }

  /** The warnings, in the order added. */
  get warnings(): readonly string[] {
    return this.#warnings;
  }

  /** Whether no operation was added (the object is applied as it is). */
  get empty(): boolean {
    return this.#operations.length === 0;
  }

  #push(op: PatchOperation["op"], path: string, value: JsonValue | undefined): this {
    if (!mutationPathAllowed(path)) {
      throw new InvalidResponseError(`${MUTATION_PATHS}; ${op} ${JSON.stringify(path)} is outside them`);
    }
    if (op === "remove") {
      this.#operations.push({ op, path });
    } else {
      // A JSON copy: later changes to `value` do not change the patch, and a
      // value JSON cannot carry fails here, at the line that added it.
      const copy = JSON.parse(jsonText(value, `the value of ${op} ${JSON.stringify(path)}`)) as JsonValue;
      this.#operations.push({ op, path, value: copy });
    }
    return this;
  }

  /**
   * The wire form: warnings bounded as for admission (16, each cut to 256
   * characters).
   *
   * @throws {InvalidResponseError} when the patch is larger than the operator takes.
   */
  toMutateResponse(): MutateResponse {
    const patch = this.#operations.length === 0 ? Buffer.alloc(0) : Buffer.from(JSON.stringify(this.#operations), "utf8");
    if (patch.length > MAX_PATCH_BYTES) {
      throw new InvalidResponseError(
        `the mutation's JSON Patch is ${patch.length} bytes; at most ${MAX_PATCH_BYTES} are accepted`,
      );
    }
    return { patch, warnings: boundedWarnings(this.#warnings) };
  }
}

/**
 * Checks the declared mutations as the operator would (at most 16, each
 * with a kind and an `apiVersion` of the form `v1` or `group/version`), and
 * that they go with a `mutate` method: declared without one, the operator
 * would route objects to a plugin that cannot answer; a `mutate` method
 * without any would never be called. Checked at run time: plugins may be
 * written in JavaScript.
 *
 * @throws {StartupError} naming the problem.
 */
export function validateMutations(plugin: string, mutations: readonly MutationKind[], hasMutateHandler: boolean): void {
  const refuse = (problem: string) => new StartupError(`plugin ${plugin} cannot start: ${problem}`);
  const declared: unknown = mutations;
  if (!Array.isArray(declared)) {
    throw refuse("mutations must be an array of { apiVersion, kind }");
  }
  if (declared.length > MAX_MUTATIONS) {
    throw refuse(`${declared.length} mutations are declared; at most ${MAX_MUTATIONS} are accepted`);
  }
  for (const item of declared as unknown[]) {
    const candidate = item as Partial<Record<keyof MutationKind, unknown>> | null | undefined;
    const apiVersion = candidate?.apiVersion;
    const kind = candidate?.kind;
    if (typeof apiVersion !== "string" || !isApiVersion(apiVersion) || typeof kind !== "string" || kind === "") {
      const shown = typeof item === "object" && item !== null ? JSON.stringify(item) : String(item);
      throw refuse(
        `mutation ${shown} needs an apiVersion ("v1" or "<group>/<version>") and a kind, ` +
          'e.g. { apiVersion: "apps/v1", kind: "Deployment" }',
      );
    }
  }
  if (declared.length > 0 && !hasMutateHandler) {
    throw refuse("it declares mutations but does not implement Plugin.mutate");
  }
  if (hasMutateHandler && declared.length === 0) {
    throw refuse("it implements Plugin.mutate but declares no kind to mutate (PluginInfo.mutations)");
  }
}

/** The wire form of a declared mutation. */
export function wireMutation(kind: MutationKind): WireMutation {
  return { kind: wireChildKind(kind) };
}
