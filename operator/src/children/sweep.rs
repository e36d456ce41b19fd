//! Deleting children in bulk: all of a base's when its clean-up is done,
//! and those of kinds no longer watched (dropped from `--child-kinds`),
//! found by their label through the kinds the base's `status.children`
//! lists.

use std::collections::BTreeSet;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::apply::api_message;
use super::rules::not_ours;
use super::{BASE_UID_LABEL, Children, PLUGIN_LABEL, Scope};
use crate::status::ChildKey;

impl Children {
    /// Deletes every child of `base` (its clean-up is done): of the
    /// watched kinds, and of the kinds its status still lists.
    ///
    /// # Errors
    /// The API server's refusal, naming the child.
    pub(crate) async fn delete_all(&self, base: &DynamicObject) -> Result<(), String> {
        let uid = base.uid().unwrap_or_default();
        for (key, child) in self.observed.of(&uid) {
            self.delete(&key, &child).await?;
        }
        self.sweep_unwatched(base, None, &BTreeSet::new()).await
    }

    /// Deletes the children of `base` (of `plugin`, or of any) of kinds
    /// its status lists that are not watched, but those in `keep`.
    ///
    /// # Errors
    /// The API server's refusal, naming the child.
    pub(crate) async fn sweep_unwatched(
        &self,
        base: &DynamicObject,
        plugin: Option<&str>,
        keep: &BTreeSet<ChildKey>,
    ) -> Result<(), String> {
        let uid = base.uid().unwrap_or_default();
        for (group, version, kind) in listed_kinds(base) {
            let of_kind = ChildKey {
                group: group.clone(),
                kind: kind.clone(),
                name: String::new(),
            };
            if self.watched(&of_kind).is_some() {
                continue;
            }
            let Scope::Namespaced(ar) = self.scope(&group, &version, &kind).await else {
                continue;
            };
            let api: Api<DynamicObject> = Api::namespaced_with(
                self.client.clone(),
                &base.namespace().unwrap_or_default(),
                &ar,
            );
            let mut selector = format!("{BASE_UID_LABEL}={uid}");
            if let Some(plugin) = plugin {
                selector.push_str(&format!(",{PLUGIN_LABEL}={plugin}"));
            }
            let listed = api
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| format!("listing {kind} children: {}", api_message(&e)))?;
            for child in listed {
                let key = ChildKey {
                    name: child.name_any(),
                    ..of_kind.clone()
                };
                if not_ours(&child, base).is_none() && !keep.contains(&key) {
                    self.delete_with(&ar, &key, &child).await?;
                }
            }
        }
        Ok(())
    }
}

/// The kinds `base`'s status lists children of: `(group, version, kind)`.
fn listed_kinds(base: &DynamicObject) -> BTreeSet<(String, String, String)> {
    base.data
        .pointer("/status/children")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let api_version = c.get("apiVersion")?.as_str()?;
            let kind = c.get("kind")?.as_str()?;
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            Some((group.to_owned(), version.to_owned(), kind.to_owned()))
        })
        .collect()
}
