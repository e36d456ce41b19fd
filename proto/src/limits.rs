//! The protocol's bounds: how much a plugin may send in each message.
//!
//! An operator refuses a heartbeat or response that exceeds a hard bound
//! (with a reason naming the field and the bound), and truncates the soft
//! ones (messages, for people). SDKs check the same numbers before sending,
//! so that a plugin author sees the mistake in their own process.

use std::time::Duration;

/// Longest plugin name: a DNS label.
pub const MAX_NAME_LEN: usize = 63;
/// Longest `version` in a heartbeat or `GetInfo`.
pub const MAX_VERSION_LEN: usize = 128;
/// Longest `instance_id`.
pub const MAX_INSTANCE_ID_LEN: usize = 128;
/// Longest plugin `description`.
pub const MAX_DESCRIPTION_LEN: usize = 256;
/// Most offers one plugin may make.
pub const MAX_OFFERS: usize = 64;
/// Most extension kinds one offer may declare.
pub const MAX_EXTENSIONS_PER_OFFER: usize = 16;
/// Largest message an operator accepts on `registry.sock`.
pub const MAX_REGISTRY_MESSAGE_BYTES: usize = 256 * 1024;
/// Largest gRPC message a plugin SDK accepts or sends on the plugin's
/// socket (64 MiB): Kubernetes objects can be large, and gRPC's 4 MiB
/// default would turn a big object into a transport error. The operator
/// bounds what it decodes itself ([`DEFAULT_MAX_RESPONSE_BYTES`]).
pub const MAX_PLUGIN_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Default largest `Reconcile`/`Finalize` response an operator decodes
/// (operator flag `--max-response-size`). A larger one is refused before it
/// is decoded.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;
/// Most conditions in one response.
pub const MAX_CONDITIONS: usize = 32;
/// Most Events in one response.
pub const MAX_EVENTS: usize = 16;
/// Longest message (of a response, a condition or an Event) kept; longer
/// ones are cut, with an ellipsis, at a character boundary.
pub const MAX_MESSAGE_CHARS: usize = 1024;
/// Shortest `retry_after` honoured; a shorter one is raised to this.
pub const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);
/// Longest `retry_after` honoured; a longer one is lowered to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Most hooks one plugin may declare.
pub const MAX_HOOKS: usize = 16;
/// Most call policies one plugin may declare (one per call; room for calls
/// later protocol versions add).
pub const MAX_CALL_POLICIES: usize = 16;
/// Most field errors in one `Validate` response; the operator refuses a
/// response with more (an invalid response, handled by the failure policy).
pub const MAX_FIELD_ERRORS: usize = 64;
/// Most warnings in one `Validate` or `Default` response; the operator
/// refuses a response with more.
pub const MAX_WARNINGS: usize = 16;
/// Longest warning kept; longer ones are cut like messages. The API server
/// itself may cut warnings longer than 256 characters.
pub const MAX_WARNING_CHARS: usize = 256;
/// Largest JSON Patch in one `Default` response; the operator refuses a
/// larger one.
pub const MAX_PATCH_BYTES: usize = 256 * 1024;
/// The JSON Pointer prefixes a `Default` patch may touch: the spec, and the
/// metadata's labels and annotations. An operation's `path` (and `from`,
/// for `move` and `copy`) must be one of them or lie below one.
pub const DEFAULT_PATCH_PREFIXES: [&str; 3] =
    ["/spec", "/metadata/labels", "/metadata/annotations"];
/// Default lower bound of the deadline a plugin asks for in a call policy;
/// a shorter one is raised to it.
pub const MIN_CALL_DEADLINE: Duration = Duration::from_secs(1);
/// Default upper bound of the deadline a plugin asks for `Reconcile`,
/// `Finalize` and `Hook`; a longer one is lowered to it.
pub const MAX_CALL_DEADLINE: Duration = Duration::from_secs(600);
/// Default upper bound of the deadline a plugin asks for `Validate` and
/// `Default`: the API server waits at most 30 s for a webhook (10 s unless
/// configured), and the operator answers it within that.
pub const MAX_ADMISSION_DEADLINE: Duration = Duration::from_secs(10);

/// Whether `path` (a JSON Pointer of a `Default` patch operation) lies in
/// [`DEFAULT_PATCH_PREFIXES`]: equal to one, or below one (`/spec/x`, not
/// `/specx`).
///
/// ```
/// use kplug_proto::limits::default_patch_path_allowed;
/// assert!(default_patch_path_allowed("/spec/storageEngine"));
/// assert!(default_patch_path_allowed("/metadata/labels/app"));
/// assert!(!default_patch_path_allowed("/status/x"));
/// assert!(!default_patch_path_allowed("/specx"));
/// assert!(!default_patch_path_allowed("/metadata/name"));
/// ```
pub fn default_patch_path_allowed(path: &str) -> bool {
    DEFAULT_PATCH_PREFIXES.iter().any(|prefix| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// Why a `Mutate` patch may not touch `path` (a JSON Pointer), if it may
/// not: only the spec and single members of the labels and annotations,
/// never kplug's own (`kplug.io/`) and never a whole map.
///
/// ```
/// use kplug_proto::limits::mutation_path_problem;
/// assert!(mutation_path_problem("/spec/template").is_none());
/// assert!(mutation_path_problem("/metadata/labels/app").is_none());
/// assert!(mutation_path_problem("/metadata/labels").is_some());
/// assert!(mutation_path_problem("/metadata/annotations/kplug.io~1x").is_some());
/// ```
pub fn mutation_path_problem(path: &str) -> Option<&'static str> {
    if !default_patch_path_allowed(path) {
        return Some(
            "a mutation may only change /spec, /metadata/labels and /metadata/annotations",
        );
    }
    if path == "/metadata/labels" || path == "/metadata/annotations" {
        return Some(
            "a mutation changes single labels or annotations, not the whole map (kplug's own are there)",
        );
    }
    let kplug = [
        "/metadata/labels/kplug.io~1",
        "/metadata/annotations/kplug.io~1",
    ];
    kplug
        .iter()
        .any(|p| path.starts_with(p))
        .then_some("the kplug.io/ labels and annotations are the operator's")
}

/// Children one base object may have per plugin (`ReconcileResponse.children`);
/// those past it are refused.
pub const MAX_CHILDREN: usize = 32;
/// The largest child, as JSON (`Children.objects`); a larger one is
/// refused. Well below etcd's 1.5 MiB per object, and enough for any
/// Deployment or ConfigMap a plugin should desire.
pub const MAX_CHILD_BYTES: usize = 256 * 1024;
/// Kinds one plugin may declare it patches (`GetInfoResponse.mutations`).
pub const MAX_MUTATIONS: usize = 16;
/// Child kinds one offer may declare (`Offer.children`).
pub const MAX_CHILD_KINDS_PER_OFFER: usize = 16;
/// The observed children sent in one request (`ReconcileRequest.children`),
/// as JSON, at most: within [`MAX_PLUGIN_MESSAGE_BYTES`] with room for the
/// base object and its extensions. Children past it are left out of the
/// request, and the plugin is told so by their absence only when they
/// exceed it, which the child bounds above keep from happening
/// (`MAX_CHILDREN` × `MAX_CHILD_BYTES` = 8 MiB plus their status).
pub const MAX_OBSERVED_CHILDREN_BYTES: usize = 32 * 1024 * 1024;

/// `message` cut to [`MAX_MESSAGE_CHARS`] characters (the last one an
/// ellipsis when cut).
pub fn truncate_message(message: &str) -> String {
    if message.chars().count() <= MAX_MESSAGE_CHARS {
        return message.to_owned();
    }
    let mut cut: String = message.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// `retry_after` within [`MIN_RETRY_AFTER`], [`MAX_RETRY_AFTER`].
pub fn clamp_retry_after(retry_after: Duration) -> Duration {
    retry_after.clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_messages_are_kept_and_long_ones_cut_at_a_character() {
        assert_eq!(truncate_message("fine"), "fine");
        let long = "é".repeat(MAX_MESSAGE_CHARS + 5);
        let cut = truncate_message(&long);
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS);
        assert!(cut.ends_with('…'));
        let exact = "x".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(truncate_message(&exact), exact);
    }

    #[test]
    fn retry_after_is_clamped() {
        assert_eq!(clamp_retry_after(Duration::ZERO), MIN_RETRY_AFTER);
        assert_eq!(
            clamp_retry_after(Duration::from_secs(30)),
            Duration::from_secs(30)
        );
        assert_eq!(
            clamp_retry_after(Duration::from_secs(86400)),
            MAX_RETRY_AFTER
        );
    }
}
