//! The Events of a reconcile: the operator's own about the object, and
//! those a plugin returned.

use kube::Resource;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::EventType;

use super::super::Core;
use crate::events::Events;
use crate::status::PluginEvent;

/// Records an Event about `obj`.
pub(in crate::reconcile) async fn event<B>(
    core: &Core<B>,
    obj: &DynamicObject,
    type_: EventType,
    reason: &str,
    action: &str,
    note: impl Into<String>,
) {
    about(
        &core.events,
        &core.target.api_resource,
        obj,
        type_,
        reason,
        action,
        note,
    )
    .await;
}

/// Records the Events plugin `plugin` returned from `call`, as
/// `<controller>/<plugin>`.
pub(in crate::reconcile) async fn plugin_events<B>(
    core: &Core<B>,
    plugin: &str,
    events: &[PluginEvent],
    call: &str,
) {
    from_plugin(&core.events, plugin, events, call).await;
}

/// Records an Event about `obj` (of kind `api_resource`) with `recorder`.
pub(super) async fn about(
    recorder: &Events,
    api_resource: &ApiResource,
    obj: &DynamicObject,
    type_: EventType,
    reason: &str,
    action: &str,
    note: impl Into<String>,
) {
    let reference = obj.object_ref(api_resource);
    recorder
        .publish(&reference, type_, reason, action, note)
        .await;
}

/// Records `events`, returned by plugin `plugin` from `call`, with `recorder`.
pub(super) async fn from_plugin(
    recorder: &Events,
    plugin: &str,
    events: &[PluginEvent],
    call: &str,
) {
    for event in events {
        recorder
            .publish_from_plugin(
                plugin,
                &event.regarding,
                event.severity,
                &event.reason,
                call,
                event.message.clone(),
            )
            .await;
    }
}
