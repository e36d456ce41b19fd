//! A condition: one of a plugin's, checked, or one of the operator's own.

/// A condition to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// CamelCase type.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: String,
    /// Message for humans.
    pub message: String,
}

impl Condition {
    /// A condition that holds (`ok`) or not.
    pub fn new(type_: &str, ok: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.to_owned(),
            status: if ok { "True" } else { "False" },
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A condition whose status is not known yet.
    pub fn unknown(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status: "Unknown",
            ..Self::new(type_, false, reason, message)
        }
    }

    /// Whether it holds.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}
