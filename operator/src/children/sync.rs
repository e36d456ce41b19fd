//! Bringing one base's children to what its plugin desires: the rules,
//! then server-side apply of each allowed child, then pruning.

use std::collections::BTreeSet;

use kplug_proto::v1;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use serde::Serialize;

use super::apply::Applied;
use super::observed::Child;
use super::{Children, PLUGIN_LABEL};
use crate::status::{ChildKey, Intent};

/// A child as the base's status lists it (`status.children`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildState {
    /// `apiVersion`.
    pub(crate) api_version: String,
    /// Kind.
    pub(crate) kind: String,
    /// Name.
    pub(crate) name: String,
    /// The plugin that desires it.
    pub(crate) plugin: String,
    /// `Applied`, `Refused`, `Waiting` (for a mutator), `Failed` or
    /// `Deleting`.
    pub(crate) state: &'static str,
    /// Why it is not applied, for `Refused` and `Failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
}

/// What one sync of a plugin's children came to.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Each desired child's state.
    pub(crate) states: Vec<ChildState>,
    /// Refused children, each `<child>: <rule>`.
    pub(crate) refused: Vec<String>,
    /// Children held for a mutator, each `<child>: <why>`.
    pub(crate) held: Vec<String>,
    /// The mutators' warnings, for the base's Events.
    pub(crate) warnings: Vec<String>,
    /// The API server's refusal of an apply or a delete.
    pub(crate) failed: Option<String>,
}

/// What is asked of one sync.
pub(crate) struct Sync<'a> {
    /// The base object.
    pub(crate) base: &'a DynamicObject,
    /// How to reach the base's kind (for its owner reference).
    pub(crate) base_ar: &'a ApiResource,
    /// The plugin that desires the children.
    pub(crate) plugin: &'a str,
    /// The implementation that desires them.
    pub(crate) implementation: &'a str,
    /// The child kinds the plugin's offer declares.
    pub(crate) declared: &'a [v1::GroupVersionKind],
    /// The children it desires.
    pub(crate) intents: &'a [Intent],
    /// Whether the children no longer desired go (an OK answer).
    pub(crate) prune: bool,
    /// Whether other plugins' children of the base go first (one plugin
    /// serves a base under `--selection preferred`: theirs are left from
    /// before a reselect).
    pub(crate) prune_others: bool,
}

impl Children {
    /// Applies `sync.intents` (those the rules allow), then prunes.
    pub(crate) async fn sync(&self, sync: Sync<'_>) -> Report {
        let mut report = Report::default();
        let uid = sync.base.uid().unwrap_or_default();
        let observed = self.observed.of(&uid);
        if sync.prune_others {
            let others = observed.iter().filter(|(_, c)| !of_plugin(c, sync.plugin));
            self.delete_each(others, &mut report).await;
        }
        for (i, intent) in sync.intents.iter().enumerate() {
            let state = self
                .sync_one(&sync, intent, i, observed.get(&intent.key), &mut report)
                .await;
            report.states.push(state);
        }
        if sync.prune {
            let kept: BTreeSet<ChildKey> = sync.intents.iter().map(|i| i.key.clone()).collect();
            let stale = observed
                .iter()
                .filter(|(key, c)| !kept.contains(key) && of_plugin(c, sync.plugin));
            self.delete_each(stale, &mut report).await;
            if let Err(e) = self
                .sweep_unwatched(sync.base, Some(sync.plugin), &kept)
                .await
            {
                report.failed.get_or_insert(e);
            }
        }
        report
    }

    /// Brings the `index`th desired child to its intent, unless a rule
    /// refuses it; what became of it.
    async fn sync_one(
        &self,
        sync: &Sync<'_>,
        intent: &Intent,
        index: usize,
        cached: Option<&Child>,
        report: &mut Report,
    ) -> ChildState {
        if let Some(rule) = self.refusal(sync, intent, index).await {
            report.refused.push(format!("{}: {rule}", intent.key));
            return state(sync, intent, "Refused", Some(rule));
        }
        match self.apply(sync, intent, cached, report).await {
            Ok(Applied::Done) => state(sync, intent, "Applied", None),
            Ok(Applied::Deleting) => state(sync, intent, "Deleting", None),
            Ok(Applied::Refused(rule)) => {
                report.refused.push(format!("{}: {rule}", intent.key));
                state(sync, intent, "Refused", Some(rule))
            }
            Ok(Applied::Held(why)) => {
                report.held.push(format!("{}: {why}", intent.key));
                state(sync, intent, "Waiting", Some(why))
            }
            Err(message) => {
                report.failed.get_or_insert_with(|| message.clone());
                state(sync, intent, "Failed", Some(message))
            }
        }
    }

    /// Deletes each of `children`; the first failure goes on `report`.
    async fn delete_each<'c>(
        &self,
        children: impl Iterator<Item = (&'c ChildKey, &'c Child)>,
        report: &mut Report,
    ) {
        for (key, child) in children {
            if let Err(e) = self.delete(key, child).await {
                report.failed.get_or_insert(e);
            }
        }
    }
}

/// Whether `child` is `plugin`'s (its label).
fn of_plugin(child: &Child, plugin: &str) -> bool {
    child.labels().get(PLUGIN_LABEL).map(String::as_str) == Some(plugin)
}

fn state(
    sync: &Sync<'_>,
    intent: &Intent,
    state: &'static str,
    message: Option<String>,
) -> ChildState {
    ChildState {
        api_version: intent.api_version(),
        kind: intent.key.kind.clone(),
        name: intent.key.name.clone(),
        plugin: sync.plugin.to_owned(),
        state,
        message,
    }
}
