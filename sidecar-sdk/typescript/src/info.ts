/**
 * What a plugin is and serves: its name, version and offers.
 *
 * @module
 */

import { InvalidNameError } from "./errors.js";
import type { Offer as WireOffer } from "./gen/kplug/v1/types.js";
import type { CallPolicy, Hook } from "./hooks.js";
import { MAX_NAME_LENGTH } from "./protocol.js";

/** A Kubernetes kind independently of its version; `group` is empty for the core group. */
export interface GroupKind {
  /** API group, e.g. `myorg.org`; empty for the core group. */
  readonly group: string;
  /** Kind in CamelCase, e.g. `DatabaseTable`. */
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

/** The wire form of an offer. */
export function wireOffer(offer: Offer): WireOffer {
  return {
    base: { group: offer.base.group, kind: offer.base.kind },
    implementation: offer.implementation,
    extensions: (offer.extensions ?? []).map((e) => ({ group: e.group, kind: e.kind })),
  };
}
