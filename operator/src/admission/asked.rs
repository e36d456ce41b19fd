//! Which plugins are asked about an object at admission
//! (docs/protocol.md, "Admission: Validate and Default").
//!
//! - A base object: the plugin the reconcile would choose, by the same
//!   selection ([`crate::selection`]: recorded, else preferred, else the
//!   first ready one); with `--selection all`, every ready plugin offering
//!   the kind. Only a plugin that advertises the capability is asked: one
//!   that does not has no opinion, and the object is admitted as it is.
//! - An extension object: every ready plugin with an offer that declares
//!   its kind and advertises the capability.
//!
//! The start-up grace of the reconcile (waiting for a preferred plugin that
//! has not registered yet) does not apply: admission cannot wait, and the
//! choice it makes is not recorded anywhere.

use std::sync::Arc;

use kplug_proto::v1::{Capability, GroupKind};
use kube::api::DynamicObject;

use crate::plugin::{PluginInstance, same_kind};
use crate::reconcile::{SelectionMode, Settings};
use crate::registry::Registry;
use crate::selection::{self, Recorded, Selection};

/// One plugin to ask.
#[derive(Clone, Debug)]
pub(crate) struct Ask {
    /// The plugin, by name.
    pub(crate) plugin: String,
    /// The implementation it is asked for (`ValidateRequest.implementation`).
    pub(crate) implementation: String,
}

/// The plugins to ask about one object.
#[derive(Clone, Debug)]
pub(crate) enum Asked {
    /// Ask these, in this order.
    Plugins(Vec<Ask>),
    /// No plugin can be asked: why, for the client.
    NoPlugin(String),
}

/// What the object is to the operator.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Role<'a> {
    /// Of the managed kind.
    Base,
    /// Of an extension kind.
    Extension(&'a GroupKind),
}

/// The plugins to ask about `object` (its stored version `old`, on update:
/// the recorded choice lives in the status, which a client's update may
/// leave out) for `capability`.
pub(crate) fn asked(
    registry: &Registry,
    base: &GroupKind,
    settings: &Settings,
    role: Role<'_>,
    object: &DynamicObject,
    old: Option<&DynamicObject>,
    capability: Capability,
) -> Asked {
    match role {
        Role::Extension(kind) => for_extension(registry, kind, capability),
        Role::Base => {
            let none = || {
                Asked::NoPlugin(format!(
                    "no ready plugin serves {} (plugins register on {})",
                    display(base),
                    registry.socket_path().display()
                ))
            };
            let candidates = registry.candidates(base);
            match settings.selection {
                SelectionMode::All => {
                    let all = selection::select_all(&candidates);
                    if all.is_empty() {
                        return none();
                    }
                    Asked::Plugins(
                        all.into_iter()
                            .filter(|c| capable(registry, &c.plugin, capability))
                            .map(|c| Ask {
                                plugin: c.plugin,
                                implementation: c.implementation,
                            })
                            .collect(),
                    )
                }
                SelectionMode::Preferred => {
                    let recorded = Recorded::of(object).or_else(|| old.and_then(Recorded::of));
                    let preferred = preferred(object, &settings.preferred_field);
                    match selection::select(recorded.as_ref(), preferred, &candidates) {
                        Selection::Chosen { candidate, .. }
                            if capable(registry, &candidate.plugin, capability) =>
                        {
                            Asked::Plugins(vec![Ask {
                                plugin: candidate.plugin,
                                implementation: candidate.implementation,
                            }])
                        }
                        Selection::Chosen { .. } => Asked::Plugins(Vec::new()),
                        Selection::RecordedUnavailable { recorded } => {
                            for_unavailable(registry, base, recorded, capability)
                        }
                        Selection::NoCandidates => none(),
                    }
                }
            }
        }
    }
}

/// Whether `plugin` is registered and advertises `capability`.
fn capable(registry: &Registry, plugin: &str, capability: Capability) -> bool {
    registry.get(plugin).is_some_and(|p| p.has(capability))
}

/// Every ready plugin with an offer that declares the extension `kind`
/// and advertises `capability`.
fn for_extension(registry: &Registry, kind: &GroupKind, capability: Capability) -> Asked {
    let declaring: Vec<(Arc<PluginInstance>, String)> = registry
        .ready()
        .into_iter()
        .filter_map(|p| {
            let implementation = p
                .offers()
                .iter()
                .find(|o| o.extensions.iter().any(|e| same_kind(e, kind)))?
                .implementation
                .clone();
            Some((p, implementation))
        })
        .collect();
    if declaring.is_empty() {
        return Asked::NoPlugin(format!(
            "no ready plugin declares the extension kind {} (plugins register on {})",
            display(kind),
            registry.socket_path().display()
        ));
    }
    Asked::Plugins(
        declaring
            .into_iter()
            .filter(|(p, _)| p.has(capability))
            .map(|(p, implementation)| Ask {
                plugin: p.name().to_owned(),
                implementation,
            })
            .collect(),
    )
}

/// An object bound to a plugin that is not ready: asking it fails, and its
/// failure policy decides (not the no-plugin choice: this object has a
/// plugin, it is down).
fn for_unavailable(
    registry: &Registry,
    base: &GroupKind,
    recorded: Recorded,
    capability: Capability,
) -> Asked {
    // Still registered (not ready): it tells whether it would have been
    // asked at all.
    let registered = registry.instances().into_iter().find(|p| {
        recorded.plugin.as_ref().is_none_or(|name| name == p.name())
            && p.offer(base, &recorded.implementation).is_some()
    });
    if registered.as_ref().is_some_and(|p| !p.has(capability)) {
        return Asked::Plugins(Vec::new());
    }
    let plugin = recorded
        .plugin
        .clone()
        .or_else(|| registered.map(|p| p.name().to_owned()));
    match plugin {
        Some(plugin) => Asked::Plugins(vec![Ask {
            plugin,
            implementation: recorded.implementation,
        }]),
        None => Asked::NoPlugin(format!(
            "implementation {} (recorded) has no ready plugin",
            recorded.implementation
        )),
    }
}

/// The object's preferred implementation (`--preferred-field`), unless
/// empty.
pub(super) fn preferred<'a>(object: &'a DynamicObject, field: &[String]) -> Option<&'a str> {
    let mut value = &object.data;
    for key in field {
        value = value.get(key)?;
    }
    value.as_str().filter(|p| !p.is_empty())
}

/// `Kind.group`, for messages.
pub(crate) fn display(kind: &GroupKind) -> String {
    if kind.group.is_empty() {
        kind.kind.clone()
    } else {
        format!("{}.{}", kind.kind, kind.group)
    }
}
