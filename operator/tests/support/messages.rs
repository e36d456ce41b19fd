//! The check that every condition and Event message a test produced is
//! fit for people (DESIGN.md, "Observability"): no UUIDs (instance ids,
//! object uids), no Rust Debug text, no terminal escape codes.

use std::path::Path;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::DynamicObject;

use super::{
    greeting_ext_resource, greeting_resource, maria_ext_resource, pg_ext_resource,
    sqlite_ext_resource, table_resource,
};

/// Every message in `ns` that is not fit, with where it is and why.
pub async fn unfit(kubeconfig: &Path, ns: &str) -> Vec<String> {
    let client = kplug_testenv::client_from_kubeconfig(kubeconfig)
        .await
        .expect("a client for the message check");
    let mut messages: Vec<(String, String)> = Vec::new();
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    for event in events
        .list(&Default::default())
        .await
        .expect("list Events")
        .items
    {
        let what = format!(
            "Event {} on {}",
            event.reason.unwrap_or_default(),
            event.regarding.and_then(|r| r.name).unwrap_or_default()
        );
        messages.push((what, event.note.unwrap_or_default()));
    }
    for resource in [
        table_resource(),
        pg_ext_resource(),
        maria_ext_resource(),
        sqlite_ext_resource(),
        greeting_resource(),
        greeting_ext_resource(),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
        let Ok(objects) = api.list(&Default::default()).await else {
            continue;
        };
        for obj in objects.items {
            let conditions = obj
                .data
                .pointer("/status/conditions")
                .and_then(|c| c.as_array())
                .cloned()
                .unwrap_or_default();
            for c in conditions {
                let what = format!(
                    "condition {} of {} {}",
                    c["type"].as_str().unwrap_or_default(),
                    resource.kind,
                    obj.metadata.name.as_deref().unwrap_or_default()
                );
                messages.push((what, c["message"].as_str().unwrap_or_default().to_owned()));
            }
        }
    }
    messages
        .into_iter()
        .filter_map(|(what, message)| {
            why_unfit(&message).map(|why| format!("{what}: {why}: {message}"))
        })
        .collect()
}

/// Why `message` is not for people, if it is not.
pub fn why_unfit(message: &str) -> Option<&'static str> {
    if message.contains('\u{1b}') {
        Some("an escape code")
    } else if has_uuid(message) {
        Some("a UUID")
    } else if message.contains("{ ") || message.contains("Some(") || message.contains("\\\"") {
        Some("Debug text")
    } else {
        None
    }
}

/// Whether `text` holds a UUID (8-4-4-4-12 hexadecimal digits).
fn has_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let matches_at = |start: usize| {
        let mut i = start;
        for (n, len) in SHAPE.iter().enumerate() {
            if n > 0 {
                if bytes.get(i) != Some(&b'-') {
                    return false;
                }
                i += 1;
            }
            for _ in 0..*len {
                if !bytes.get(i).is_some_and(u8::is_ascii_hexdigit) {
                    return false;
                }
                i += 1;
            }
        }
        true
    };
    (0..bytes.len())
        .any(|start| (start == 0 || !bytes[start - 1].is_ascii_hexdigit()) && matches_at(start))
}

#[test]
fn what_is_unfit() {
    assert_eq!(
        why_unfit("plugin postgresql 1.0.0: table users created"),
        None
    );
    assert_eq!(
        why_unfit("instance 71166c3b-4b01-4d94-8278-ddacd523c41e left"),
        Some("a UUID")
    );
    assert_eq!(
        why_unfit("Missing Kind: GroupVersionKind { group: \"x\" }"),
        Some("Debug text")
    );
    assert_eq!(why_unfit("\u{1b}[31mred\u{1b}[0m"), Some("an escape code"));
    assert_eq!(why_unfit("spec {\"a\":1} is fine JSON"), None);
}
