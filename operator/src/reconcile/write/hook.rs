//! The writes of a lifecycle hook's answer: its status under
//! `status.hooks.<plugin>`, its Events, and the operator's Warnings about
//! it. Detached from the reconcile, as an async hook runs after it
//! returned.

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Client, ResourceExt};
use serde_json::{Map, Value, json};

use super::super::{Core, api_of};
use super::{about, from_plugin};
use crate::events::Events;
use crate::status::{self, PluginEvent};

/// Everything a hook's writes need, cloned out of the reconcile's [`Core`].
#[derive(Clone)]
pub(crate) struct HookWriter {
    client: Client,
    api_resource: ApiResource,
    namespaced: bool,
    events: Events,
}

impl HookWriter {
    /// The writer for objects of `core`'s kind.
    pub(crate) fn of<B>(core: &Core<B>) -> Self {
        Self {
            client: core.client.clone(),
            api_resource: core.target.api_resource.clone(),
            namespaced: core.target.namespaced,
            events: core.events.clone(),
        }
    }

    /// Applies hook `hook`'s status of `obj` under `status.hooks.<plugin>`,
    /// as a field manager of its own (`kplug-plugin-<plugin>-hook-<hook>`):
    /// it neither removes nor is removed by the plugin's Reconcile status or
    /// its other hooks.
    pub(crate) async fn status(
        &self,
        plugin: &str,
        hook: &str,
        obj: &DynamicObject,
        status: &Map<String, Value>,
    ) -> Result<(), kube::Error> {
        let api = api_of(&self.client, &self.api_resource, self.namespaced, obj);
        let manager = format!("{}-hook-{hook}", status::plugin_manager(plugin));
        let body = json!({ "hooks": { plugin: Value::Object(status.clone()) } });
        api.patch_status(
            &obj.name_any(),
            &PatchParams::apply(&manager).force(),
            &Patch::Apply(status::apply_body(obj, body)),
        )
        .await
        .map(drop)
    }

    /// Records the Events plugin `plugin`'s hook returned.
    pub(crate) async fn plugin_events(&self, plugin: &str, events: &[PluginEvent]) {
        from_plugin(&self.events, plugin, events, "Hook").await;
    }

    /// A Warning Event about `obj` from the operator, on a hook's behalf.
    pub(crate) async fn warn(&self, obj: &DynamicObject, reason: &str, note: String) {
        let (recorder, kind) = (&self.events, &self.api_resource);
        about(
            recorder,
            kind,
            obj,
            EventType::Warning,
            reason,
            "Hook",
            note,
        )
        .await;
    }
}
