/**
 * Admission: what a plugin is asked when an object is created or changed
 * (`Validate`, `Default`), and how it answers.
 *
 * ```ts
 * const tables: Plugin = {
 *   reconcile: async () => Response.ok(),
 *   async validate(request) {
 *     const verdict = Validation.allowed();
 *     const columns = Array.isArray(request.spec["columns"]) ? request.spec["columns"] : [];
 *     columns.forEach((type, i) => {
 *       if (type !== "text") verdict.error(`spec.columns[${i}]`, type, "use text");
 *     });
 *     return verdict;
 *   },
 *   async default(request) {
 *     return "engine" in request.spec ? Defaults.none() : Defaults.none().add("/spec/engine", "InnoDB");
 *   },
 * };
 * ```
 *
 * An error thrown by either handler means the plugin could not decide: the
 * SDK answers with a gRPC `INTERNAL` error carrying `"<name>: <message>"`,
 * and the failure policy (the plugin's {@link CallPolicy}, else the
 * operator's) refuses or admits the object. To refuse, return field errors.
 *
 * @module
 */

import { InvalidRequestError, InvalidResponseError } from "./errors.js";
import type { DefaultResponse, ValidateResponse } from "./gen/kplug/v1/plugin.js";
import { Operation as WireOperation } from "./gen/kplug/v1/types.js";
import {
  DEFAULT_PATCH_PREFIXES,
  MAX_FIELD_ERRORS,
  MAX_MESSAGE_CHARS,
  MAX_PATCH_BYTES,
  MAX_WARNING_CHARS,
  MAX_WARNINGS,
} from "./protocol.js";
import { asObject, decodeObject, type JsonObject, type JsonValue, type KubeObject } from "./request.js";
import { jsonTextOf } from "./response.js";

/** Whether the object is being created or changed. */
export type Operation = "CREATE" | "UPDATE";

function text(value: JsonValue | undefined): string {
  return typeof value === "string" ? value : "";
}

/** A `Validate` or `Default` call: the object being admitted and, on update, the object as stored now. */
export class AdmissionRequest {
  /**
   * For a base object, the implementation it is (or would be) reconciled by;
   * for an extension object, the implementation of this plugin's offer that
   * declares its kind.
   */
  readonly implementation: string;
  /** Create or update. */
  readonly operation: Operation;
  /** The object being admitted: a base object or an extension (see {@link kind}). */
  readonly object: KubeObject;
  /** On update, the object as it is stored now; undefined on create. */
  readonly oldObject: KubeObject | undefined;

  /** A request from already decoded objects (for tests of your plugin). */
  constructor(implementation: string, operation: Operation, object: KubeObject, oldObject?: KubeObject) {
    this.implementation = implementation;
    this.operation = operation;
    this.object = object;
    this.oldObject = oldObject;
  }

  /**
   * Decodes the request the operator sent.
   *
   * @throws {InvalidRequestError} (answered with `INVALID_ARGUMENT`) when
   *   the operation is neither CREATE nor UPDATE, or an object is not a JSON
   *   object.
   */
  static decode(
    implementation: string,
    operation: WireOperation,
    object: Uint8Array,
    oldObject: Uint8Array,
  ): AdmissionRequest {
    let op: Operation;
    if (operation === WireOperation.OPERATION_CREATE) {
      op = "CREATE";
    } else if (operation === WireOperation.OPERATION_UPDATE) {
      op = "UPDATE";
    } else {
      throw new InvalidRequestError(
        `kplug: the admission request's operation ${operation} is neither CREATE nor UPDATE`,
      );
    }
    return new AdmissionRequest(
      implementation,
      op,
      decodeObject("the object", object),
      oldObject.length > 0 ? decodeObject("the old object", oldObject) : undefined,
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

  /** The object's kind: a base kind or an extension kind. */
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
}

/** One reason an object is refused. */
export interface FieldError {
  /** The field in Kubernetes' notation, e.g. `spec.columns[1].type`; empty for the object as a whole. */
  readonly path: string;
  /** The refused value as JSON text (`"varchar2"` with its quotes); empty when there is none. */
  readonly value: string;
  /** Why the value is refused. */
  readonly message: string;
}

/** `text` cut to `limit` characters (code points), the last one an ellipsis when cut. */
export function cut(text: string, limit: number): string {
  const chars = Array.from(text);
  return chars.length <= limit ? text : `${chars.slice(0, limit - 1).join("")}…`;
}

/**
 * At most 16 warnings (the last one kept says how many more there were),
 * each cut to 256 characters: what the operator passes on (Validate,
 * Default and Mutate alike).
 */
export function boundedWarnings(warnings: readonly string[]): string[] {
  let kept = [...warnings];
  if (kept.length > MAX_WARNINGS) {
    const more = kept.length - (MAX_WARNINGS - 1);
    kept = [...kept.slice(0, MAX_WARNINGS - 1), `and ${more} more warnings`];
  }
  return kept.map((w) => cut(w, MAX_WARNING_CHARS));
}

/** Compact JSON text of `value`; throws {@link InvalidResponseError} naming `what` when JSON cannot carry it. */
export function jsonText(value: unknown, what: string): string {
  const text = jsonTextOf(value, what);
  if (text === undefined) {
    throw new InvalidResponseError(`${what} cannot be encoded as JSON: got ${typeof value}`);
  }
  return text;
}

/**
 * A plugin's answer to `Validate`: allowed when it holds no errors. The
 * builder methods change it and return it, so calls chain:
 *
 * ```ts
 * return Validation.allowed()
 *   .error("spec.columns[1].type", "varchar2", "unknown column type")
 *   .warning("spec.comment is ignored");
 * ```
 */
export class Validation {
  readonly #errors: FieldError[] = [];
  readonly #warnings: string[] = [];

  private constructor() {}

  /** Allowed, so far: add errors to refuse. */
  static allowed(): Validation {
    return new Validation();
  }

  /**
   * Refuses the value at `path` (`""` for the object as a whole); `value` is
   * sent as JSON text (a string keeps its quotes). A value JSON cannot carry
   * (undefined, a cycle, a BigInt, NaN) is sent as no value, as the Rust SDK
   * does.
   */
  error(path: string, value: unknown, message: string): this {
    let text = "";
    try {
      text = jsonText(value, `the value at ${JSON.stringify(path)}`);
    } catch {
      // sent without a value
    }
    this.#errors.push({ path, value: text, message });
    return this;
  }

  /** Refuses the object for a field without a value to show (e.g. a missing one). */
  errorAt(path: string, message: string): this {
    this.#errors.push({ path, value: "", message });
    return this;
  }

  /** A warning shown to the client (kubectl prints it), allowed or not. */
  warning(warning: string): this {
    this.#warnings.push(warning);
    return this;
  }

  /** Whether no error was added. */
  get allowed(): boolean {
    return this.#errors.length === 0;
  }

  /** The field errors, in the order added. */
  get errors(): readonly FieldError[] {
    return this.#errors;
  }

  /** The warnings, in the order added. */
  get warnings(): readonly string[] {
    return this.#warnings;
  }

  /**
   * The wire form, within the protocol's bounds: past 64 errors the last one
   * kept says how many more there were; warnings likewise past 16, each cut
   * to 256 characters; messages and values cut to 1024 characters.
   */
  toValidateResponse(): ValidateResponse {
    let errors = [...this.#errors];
    if (errors.length > MAX_FIELD_ERRORS) {
      const more = errors.length - (MAX_FIELD_ERRORS - 1);
      errors = [...errors.slice(0, MAX_FIELD_ERRORS - 1), { path: "", value: "", message: `and ${more} more errors` }];
    }
    return {
      errors: errors.map((e) => ({
        path: e.path,
        value: cut(e.value, MAX_MESSAGE_CHARS),
        message: cut(e.message, MAX_MESSAGE_CHARS),
      })),
      warnings: boundedWarnings(this.#warnings),
    };
  }
}

/** One JSON Patch operation (RFC 6902) of a {@link Defaults} or a `Mutation`. */
export interface PatchOperation {
  readonly op: "add" | "replace" | "remove";
  readonly path: string;
  readonly value?: JsonValue;
}

/** Whether a Default patch may touch `path`: one of the allowed prefixes, or below one. */
export function defaultPatchPathAllowed(path: string): boolean {
  return DEFAULT_PATCH_PREFIXES.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
}

/**
 * A plugin's answer to `Default`: JSON Patch operations on the object,
 * limited to `/spec`, `/metadata/labels` and `/metadata/annotations` (or
 * below them). Paths are JSON Pointers (`~1` stands for `/` in a key, as in
 * `/metadata/labels/app.kubernetes.io~1name`). A path outside those throws
 * {@link InvalidResponseError} at once: the operator would refuse the
 * whole patch.
 */
export class Defaults {
  readonly #operations: PatchOperation[] = [];
  readonly #warnings: string[] = [];

  private constructor() {}

  /** Nothing to default, so far. */
  static none(): Defaults {
    return new Defaults();
  }

  /** Sets `value` at `path` (a new member, or the member replaced; its parent must exist, or be added first). */
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

  /** A warning shown to the client (kubectl prints it). */
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

  /** Whether no operation was added. */
  get empty(): boolean {
    return this.#operations.length === 0;
  }

  #push(op: PatchOperation["op"], path: string, value: JsonValue | undefined): this {
    if (!defaultPatchPathAllowed(path)) {
      throw new InvalidResponseError(
        "a default may only change /spec, /metadata/labels and /metadata/annotations; " +
          `${op} ${JSON.stringify(path)} is outside them`,
      );
    }
    if (op === "remove") {
      this.#operations.push({ op, path });
    } else {
      // A JSON copy: later changes to `value` do not change the patch.
      const copy = JSON.parse(jsonText(value, `the value of ${op} ${JSON.stringify(path)}`)) as JsonValue;
      this.#operations.push({ op, path, value: copy });
    }
    return this;
  }

  /**
   * The wire form.
   *
   * @throws {InvalidResponseError} when the patch is larger than the operator takes.
   */
  toDefaultResponse(): DefaultResponse {
    const patch = this.#operations.length === 0 ? Buffer.alloc(0) : Buffer.from(JSON.stringify(this.#operations), "utf8");
    if (patch.length > MAX_PATCH_BYTES) {
      throw new InvalidResponseError(
        `the defaults' JSON Patch is ${patch.length} bytes; at most ${MAX_PATCH_BYTES} are accepted`,
      );
    }
    return { patch, warnings: boundedWarnings(this.#warnings) };
  }
}
