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
