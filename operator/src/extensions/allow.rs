//! [`AllowList`]: the extension kinds the operator may read (`--extension-kind`).

/// The extension kinds the operator will read (`--extension-kind`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList {
    kinds: Vec<(String, String)>,
}

impl AllowList {
    /// Allows `(group, kind)` pairs; the core group is `""`.
    pub fn new(kinds: impl IntoIterator<Item = (String, String)>) -> Self {
        Self {
            kinds: kinds.into_iter().collect(),
        }
    }

    /// Parses `GROUP/KIND` (`core/ConfigMap` or `/ConfigMap` for the core
    /// group).
    ///
    /// # Errors
    /// A message with the expected form.
    pub fn parse_kind(s: &str) -> Result<(String, String), String> {
        match s.rsplit_once('/') {
            Some((group, kind)) if !kind.is_empty() => {
                let group = if group == "core" { "" } else { group };
                Ok((group.to_owned(), kind.to_owned()))
            }
            _ => Err(format!(
                "{s:?}: expected GROUP/KIND, e.g. myorg.org/DatabaseTablePostgreSqlExtension (core/ConfigMap for the core group)"
            )),
        }
    }

    /// The allowed `(group, kind)` pairs.
    pub(crate) fn kinds(&self) -> &[(String, String)] {
        &self.kinds
    }

    pub(crate) fn allows(&self, group: &str, kind: &str) -> bool {
        self.kinds
            .iter()
            .any(|(g, k)| g.eq_ignore_ascii_case(group) && k == kind)
    }

    /// Checks at start-up that the API server serves every allowed kind: a
    /// misspelt `--extension-kind`, or one whose CRD is missing, would
    /// otherwise show only later, as `ExtensionKindNotServed` on each
    /// object that references it.
    ///
    /// # Errors
    /// [`crate::Error::Config`] naming each kind that is not served and
    /// what to do.
    pub async fn check_served(&self, client: &kube::Client) -> Result<(), crate::Error> {
        let mut missing = Vec::new();
        for (group, kind) in &self.kinds {
            let served = match kube::discovery::group(client, group).await {
                Ok(api_group) => api_group.recommended_kind(kind).is_some(),
                // A group that is not served at all is the same finding;
                // any other error is the API server's.
                Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => {
                    false
                }
                Err(e) => return Err(crate::Error::Kube(e)),
            };
            if !served {
                let group = if group.is_empty() { "core" } else { group };
                missing.push(format!("{group}/{kind}"));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        Err(crate::Error::Config(format!(
            "--extension-kind {}: the API server does not serve {}; check the spelling \
             (GROUP/Kind, the Kind in CamelCase) and that the CRD is installed (kubectl get crd), \
             or remove the flag",
            missing.join(", "),
            if missing.len() == 1 { "it" } else { "them" }
        )))
    }
}
