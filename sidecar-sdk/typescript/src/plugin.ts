/**
 * The interface plugin authors implement.
 *
 * @module
 */

import type { AdmissionRequest, Defaults, Validation } from "./admission.js";
import type { HookCall, HookResponse } from "./hooks.js";
import type { MutateCall, Mutation } from "./mutate.js";
import type { Request } from "./request.js";
import type { Response } from "./response.js";

/** Whether the plugin can take work now; `message` says why not, for humans. */
export interface Readiness {
  /** When false, the operator routes no work to the plugin. */
  readonly ready: boolean;
  /** Why the plugin is not ready. */
  readonly message?: string;
}

/**
 * A kplug plugin: implement {@link Plugin.reconcile}, and
 * {@link Plugin.finalize}, {@link Plugin.validate}, {@link Plugin.default},
 * {@link Plugin.hook}, {@link Plugin.mutate} and {@link Plugin.ready} if
 * needed. Having `finalize`, `validate`, `default`, `hook` or `mutate` is
 * what advertises the FINALIZE, VALIDATE, DEFAULT, HOOKS or MUTATE
 * capability (CHILDREN comes from an offer's `children`); the operator calls
 * only what is advertised.
 *
 * Several calls can run at once, for different objects: handlers run on the
 * event loop, so use asynchronous I/O (a handler that blocks stops every
 * call, and the heartbeats). An error thrown by a handler becomes an
 * `OUTCOME_FAILED` response with the message `"<name>: <message>"`, shown on
 * the resource; it does not stop the plugin.
 *
 * ```ts
 * const hello: Plugin = {
 *   async reconcile(request) {
 *     return Response.ok().withStatus({ greeting: `hello, ${request.name}` });
 *   },
 * };
 * ```
 */
export interface Plugin {
  /**
   * Drive the real world towards the base object's spec; return what was
   * achieved. Must be idempotent: the operator calls it again after every
   * change, on resync, and after a retry.
   */
  reconcile(request: Request): Response | Promise<Response>;

  /**
   * Clean up before the base object is deleted (or moved to another
   * implementation: the annotation `kplug.io/reselect`); `Response.ok()` lets it go,
   * anything else keeps the finalizer. Having this method makes the plugin
   * advertise the FINALIZE capability (see {@link PluginInfo.finalize});
   * without it, Finalize answers done at once.
   */
  finalize?(request: Request): Response | Promise<Response>;

  /**
   * Decide, at admission, whether an object may be created or changed: an
   * object of a base kind this plugin offers, or an extension of a kind one
   * of its offers declares (`request.implementation` says which offer).
   * Field errors refuse it, and `kubectl apply` prints them. Having this
   * method advertises the VALIDATE capability.
   *
   * An error thrown here means the plugin could not decide: the SDK answers
   * with a gRPC `INTERNAL` error carrying `"<name>: <message>"`, and the
   * failure policy refuses or admits the object. To refuse, return field
   * errors.
   */
  validate?(request: AdmissionRequest): Validation | Promise<Validation>;

  /**
   * Fill in defaults, at admission, of the same objects as
   * {@link Plugin.validate} (which then sees the defaulted object): a JSON
   * Patch built with {@link Defaults}, limited to `/spec`,
   * `/metadata/labels` and `/metadata/annotations`. Having this method
   * advertises the DEFAULT capability; an error thrown here is answered with
   * a gRPC `INTERNAL` error carrying its message.
   */
  default?(request: AdmissionRequest): Defaults | Promise<Defaults>;

  /**
   * Run one of the hooks declared in {@link PluginInfo.hooks} (`call.hook`
   * names it). Having this method advertises the HOOKS capability;
   * declaring hooks without it is a start-up error. An error thrown here
   * becomes `OUTCOME_FAILED` with its message, as for `reconcile`.
   */
  hook?(call: HookCall): HookResponse | Promise<HookResponse>;

  /**
   * Patch an object of a kind declared in {@link PluginInfo.mutations}
   * before the operator applies it: a child another plugin desires (when
   * the operator's `--mutators` allows this plugin for its kind), or an
   * embedding operator's own object. Return a {@link Mutation}, a JSON
   * Patch against `call.object` limited to `/spec` and single labels and
   * annotations.
   *
   * The answer must be deterministic, the same call the same patch: the
   * operator judges drift by the mutated object. Having this method
   * advertises the MUTATE capability; declaring mutations without it, or
   * having it without declaring any, is a start-up error. An error thrown
   * here (a path outside those, too) is answered with a gRPC `INTERNAL`
   * error carrying `"<name>: <message>"`, and the operator holds the object
   * until a call succeeds.
   */
  mutate?(call: MutateCall): Mutation | Promise<Mutation>;

  /**
   * Answer the operator's Probe; while not ready, no work is routed to the
   * plugin. `true`/`false` are short for `{ ready }`. Default: always ready.
   * An error thrown here answers not ready, with its message.
   */
  ready?(): Readiness | boolean | Promise<Readiness | boolean>;
}
