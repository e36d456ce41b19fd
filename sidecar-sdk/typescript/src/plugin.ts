/**
 * The interface plugin authors implement.
 *
 * @module
 */

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
 * {@link Plugin.finalize} and {@link Plugin.ready} if needed.
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
   * Answer the operator's Probe; while not ready, no work is routed to the
   * plugin. `true`/`false` are short for `{ ready }`. Default: always ready.
   * An error thrown here answers not ready, with its message.
   */
  ready?(): Readiness | boolean | Promise<Readiness | boolean>;
}
