//! What resolving a base object's extensions found: the objects, and a
//! [`Problem`] for each reference that was not resolved.

use kube::api::DynamicObject;

use crate::status::{Condition, types};

/// Why a reference was not resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    /// The kind may not be an extension (not allow-listed, the base kind,
    /// cluster-scoped).
    NotAllowed,
    /// The API server does not serve the kind.
    KindNotServed,
    /// The object does not exist.
    NotFound,
}

impl Problem {
    /// The condition reason.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::NotAllowed => "ExtensionNotAllowed",
            Self::KindNotServed => "ExtensionKindNotServed",
            Self::NotFound => "ExtensionNotFound",
        }
    }
}

/// What [`Extensions::resolve`](super::Extensions::resolve) found.
#[derive(Debug, Default)]
pub(crate) struct Resolution {
    /// Extensions that exist, in reference order.
    pub found: Vec<DynamicObject>,
    /// One message per reference that could not be resolved.
    pub problems: Vec<(Problem, String)>,
    /// One message per kind whose watch has not listed yet; the base is
    /// reconciled again once it has.
    pub waiting: Vec<String>,
}

impl Resolution {
    /// The `ExtensionsResolved` condition this resolution amounts to.
    pub(crate) fn condition(&self) -> Condition {
        if let Some((first, _)) = self.problems.first() {
            let messages: Vec<&str> = self.problems.iter().map(|(_, m)| m.as_str()).collect();
            Condition::new(
                types::EXTENSIONS_RESOLVED,
                false,
                first.reason(),
                messages.join("; "),
            )
        } else if !self.waiting.is_empty() {
            Condition::unknown(
                types::EXTENSIONS_RESOLVED,
                "WaitingForExtensionWatch",
                self.waiting.join("; "),
            )
        } else {
            Condition::new(
                types::EXTENSIONS_RESOLVED,
                true,
                "Resolved",
                format!("{} extension(s) found", self.found.len()),
            )
        }
    }
}
