/**
 * What a plugin is and serves: its name, version and offers.
 *
 * @module
 */

import { InvalidNameError, StartupError } from "./errors.js";
import type { GroupVersionKind, Offer as WireOffer } from "./gen/kplug/v1/types.js";
import type { CallPolicy, Hook } from "./hooks.js";
import type { MutationKind } from "./mutate.js";
import { MAX_CHILD_KINDS_PER_OFFER, MAX_NAME_LENGTH } from "./protocol.js";

/** A Kubernetes kind independently of its version; `group` is empty for the core group. */
export interface GroupKind {
  /** API group, e.g. `myorg.org`; empty for the core group. */
  readonly group: string;
  /** Kind in CamelCase, e.g. `DatabaseTable`. */
  readonly kind: string;
}

/**
 * A kind of Kubernetes object a plugin manages for each base object (its
 * children), by `apiVersion` and kind as the objects themselves say it:
 * `{ apiVersion: "apps/v1", kind: "Deployment" }`, `{ apiVersion: "v1", kind: "ConfigMap" }`.
 * The operator sends and reads the children in this version.
 */
export interface ChildKind {
  /** `group/version`, or `v1` for the core group. */
  readonly apiVersion: string;
  /** Kind in CamelCase, e.g. `Deployment`. */
  readonly kind: string;
}

/** One implementation the plugin provides for one base kind. */
export interface Offer {
  /** The base kind this offer reconciles, e.g. `{ group: "myorg.org", kind: "DatabaseTable" }`. */
  readonly base: GroupKind;
  /** The name users put in `spec.preferredImplementation`, e.g. `PostgreSQL`. */
  readonly implementation: string;
  /** Extension kinds the plugin understands for this base; only extensions of these kinds are sent. */
  readonly extensions?: readonly GroupKind[];
  /**
   * Kinds of the Kubernetes objects this implementation manages for each
   * base object: its answers carry the desired ones (`Response.child`),
   * its requests the observed ones (`Request.children`), and the
   * operator applies, owns, watches and prunes them (only the kinds its
   * `--child-kinds` allows). Declaring one advertises the CHILDREN capability.
   */
  readonly children?: readonly ChildKind[];
}

/**
 * Describes a plugin; sent in every heartbeat and answered by `GetInfo`,
 * hooks and call policies included, so the two always agree.
 */
export interface PluginInfo {
  /** The plugin name: a DNS label (e.g. `postgresql`), stable across versions and restarts. */
  readonly name: string;
  /** The plugin version, free-form (semver recommended). */
  readonly version: string;
  /** What the plugin serves. */
  readonly offers: readonly Offer[];
  /** One line for humans, shown in logs and Events. */
  readonly description?: string;
  /**
   * Whether the plugin advertises the FINALIZE capability (the operator then
   * adds a finalizer and calls {@link Plugin.finalize} before deletion).
   * Default: when the plugin has a `finalize` method.
   */
  readonly finalize?: boolean;
  /**
   * The hooks the plugin declares; the plugin must have a `hook` method.
   * Checked at start-up as the operator checks them (DNS-label names,
   * unique; a base kind; a known phase and behaviour; at most 16).
   */
  readonly hooks?: readonly Hook[];
  /**
   * A deadline (and, for Validate and Default, a failure policy) per call:
   * one policy per call, checked at start-up.
   */
  readonly callPolicies?: readonly CallPolicy[];
  /**
   * The kinds the plugin patches before the operator applies them
   * ({@link Plugin.mutate}), e.g. `[{ apiVersion: "apps/v1", kind: "Deployment" }]`;
   * the plugin must have a `mutate` method, and one that has it must
   * declare at least one kind. Checked at start-up (at most 16).
   */
  readonly mutations?: readonly MutationKind[];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * Checks that `name` is a DNS label (lowercase letters, digits and '-',
 * starting and ending with a letter or digit, at most 63 characters), as the
 * operator demands: it becomes part of socket paths, field manager names and
 * metric labels.
 *
 * @throws {InvalidNameError} when it is not.
 */
export function validateName(name: string): void {
  if (name.length > MAX_NAME_LENGTH || !DNS_LABEL.test(name)) {
    throw new InvalidNameError(
      `invalid plugin name ${JSON.stringify(name)}: it must be a DNS label (lowercase letters, ` +
        `digits and '-', starting and ending with a letter or digit, at most ${MAX_NAME_LENGTH} ` +
        "characters), e.g. 'postgresql'",
    );
  }
}

/**
 * Checks the child kinds of each offer as the operator would (a kind and an
 * `apiVersion` of the form `v1` or `group/version`; at most 16 per offer),
 * so that a mistake stops the plugin with a message instead of every
 * heartbeat being refused. Checked at run time: plugins may be written in
 * JavaScript.
 *
 * @throws {StartupError} naming the offer and the child kind.
 */
export function validateOffers(plugin: string, offers: readonly Offer[]): void {
  for (const offer of offers) {
    const where = `plugin ${plugin} cannot start: offer ${JSON.stringify(offer.implementation)}`;
    const children: unknown = offer.children ?? [];
    if (!Array.isArray(children)) {
      throw new StartupError(`${where}: children must be an array of { apiVersion, kind }`);
    }
    if (children.length > MAX_CHILD_KINDS_PER_OFFER) {
      throw new StartupError(
        `${where}: ${children.length} child kinds are declared; at most ${MAX_CHILD_KINDS_PER_OFFER} are accepted`,
      );
    }
    for (const child of children as unknown[]) {
      const candidate = child as Partial<Record<keyof ChildKind, unknown>> | null | undefined;
      const apiVersion = candidate?.apiVersion;
      const kind = candidate?.kind;
      if (typeof apiVersion !== "string" || !isApiVersion(apiVersion) || typeof kind !== "string" || kind === "") {
        throw new StartupError(
          `${where}: child kind ${typeof child === "object" && child !== null ? JSON.stringify(child) : String(child)} needs an apiVersion ` +
            '("v1" or "<group>/<version>") and a kind, e.g. { apiVersion: "apps/v1", kind: "Deployment" }',
        );
      }
    }
  }
}

/** Whether `apiVersion` is `<version>` or `<group>/<version>`, neither part empty. */
export function isApiVersion(apiVersion: string): boolean {
  const parts = apiVersion.split("/");
  return parts.length <= 2 && parts.every((part) => part !== "");
}

/** A child (or mutated) kind as the protocol names it: the core group is `""`. */
export function wireChildKind(child: ChildKind): GroupVersionKind {
  const slash = child.apiVersion.lastIndexOf("/");
  return {
    group: slash < 0 ? "" : child.apiVersion.slice(0, slash),
    version: child.apiVersion.slice(slash + 1),
    kind: child.kind,
  };
}

/** Whether an offer of `info` declares child kinds (the CHILDREN capability). */
export function declaresChildren(info: PluginInfo): boolean {
  return info.offers.some((offer) => (offer.children ?? []).length > 0);
}

/** The wire form of an offer. */
export function wireOffer(offer: Offer): WireOffer {
  return {
    base: { group: offer.base.group, kind: offer.base.kind },
    implementation: offer.implementation,
    extensions: (offer.extensions ?? []).map((e) => ({ group: e.group, kind: e.kind })),
    children: (offer.children ?? []).map(wireChildKind),
  };
}
