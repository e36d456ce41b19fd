//! The manifest: who the plugin is, what it offers, and the command for
//! each call.
//!
//! ```yaml
//! name: tables-sh
//! version: 1.0.0
//! description: keeps DatabaseTables in SQLite with the sqlite3 tool
//! offers:
//!   - base: { group: myorg.org, kind: DatabaseTable }
//!     implementation: SQLiteShell
//!     extensions:
//!       - { group: myorg.org, kind: DatabaseTableSqliteExtension }
//!     children: [v1/ConfigMap]
//! reconcile:
//!   command: [./reconcile.sh]
//!   timeoutSeconds: 30
//!   concurrency: 2
//! finalize:
//!   command: [./finalize.sh]
//! validate:
//!   command: [./validate.sh]
//!   timeoutSeconds: 5
//!   failurePolicy: Fail
//! hooks:
//!   - name: backup
//!     base: { group: myorg.org, kind: DatabaseTable }
//!     phase: before-reconcile
//!     behaviour: sync-enforce
//!     command: [./backup.sh]
//! mutate:
//!   kinds: [apps/v1/Deployment]
//!   command: [./mutate.sh]
//! ```
//!
//! Unknown keys are errors, so that a typo is not a silently ignored
//! command.

mod spec;

use std::path::{Path, PathBuf};

/// Where in an object's lifecycle a hook runs: the SDK's phase, which the
/// manifest spells by its [name](Phase::name) (`before-reconcile`, ...).
pub use kplug_sidecar::Phase;
use kplug_sidecar::proto::limits::{
    MAX_ADMISSION_DEADLINE, MAX_CALL_DEADLINE, MAX_CHILD_KINDS_PER_OFFER, MAX_HOOKS, MAX_MUTATIONS,
};
use serde::Deserialize;
pub use spec::{
    AdmissionSpec, ApiKind, Behaviour, CommandSpec, FailurePolicy, GroupKind, HookSpec, MutateSpec,
    OfferSpec,
};

/// A plugin made of commands.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    /// The plugin's name (a DNS label).
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it does, for `kubectl kplug plugins`.
    #[serde(default)]
    pub description: String,
    /// The implementations it offers.
    pub offers: Vec<OfferSpec>,
    /// The command that reconciles.
    pub reconcile: CommandSpec,
    /// The command that finalizes; without it the plugin does not advertise
    /// FINALIZE and is never asked to clean up.
    pub finalize: Option<CommandSpec>,
    /// The command that validates objects at admission; without it the
    /// plugin does not advertise VALIDATE.
    pub validate: Option<AdmissionSpec>,
    /// The command that fills in defaults at admission; without it the
    /// plugin does not advertise DEFAULT.
    pub default: Option<AdmissionSpec>,
    /// The hooks; without any the plugin does not advertise HOOKS.
    #[serde(default)]
    pub hooks: Vec<HookSpec>,
    /// The command that patches other plugins' children before they are
    /// applied; without it the plugin does not advertise MUTATE.
    pub mutate: Option<MutateSpec>,
}

/// Why a manifest cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file cannot be read.
    #[error("cannot read the manifest {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The YAML does not describe a manifest.
    #[error("manifest {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is out of bounds.
    #[error("manifest {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl Manifest {
    /// Reads and checks the manifest at `path`; relative program paths are
    /// resolved against its directory.
    ///
    /// # Errors
    /// A manifest that cannot be read, parsed, or has values out of bounds.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|error| ManifestError::Read {
            path: path.to_owned(),
            error,
        })?;
        let mut manifest: Self =
            serde_saphyr::from_str(&text).map_err(|e| ManifestError::Parse {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        let invalid = |message: String| ManifestError::Invalid {
            path: path.to_owned(),
            message,
        };
        manifest.check().map_err(invalid)?;
        // Absolute, because commands run in this directory: a program path
        // relative to the manifest must not be resolved a second time
        // against the working directory.
        let dir = std::path::absolute(Self::working_dir(path))
            .map_err(|e| invalid(format!("cannot resolve the manifest's directory: {e}")))?;
        manifest.reconcile.resolve(&dir);
        if let Some(spec) = &mut manifest.finalize {
            spec.resolve(&dir);
        }
        for spec in [&mut manifest.validate, &mut manifest.default]
            .into_iter()
            .flatten()
        {
            let mut command = spec.command_spec();
            command.resolve(&dir);
            spec.command = command.command;
        }
        for hook in &mut manifest.hooks {
            let mut command = hook.command_spec();
            command.resolve(&dir);
            hook.command = command.command;
        }
        if let Some(spec) = &mut manifest.mutate {
            let mut command = spec.command_spec();
            command.resolve(&dir);
            spec.command = command.command;
        }
        Ok(manifest)
    }

    /// The directory commands run in.
    pub fn working_dir(path: &Path) -> PathBuf {
        match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        }
    }

    /// The calls it answers, for `--check`: `reconcile, finalize, validate
    /// (failurePolicy Fail), hook backup (before-reconcile, sync-enforce),
    /// mutate (apps/v1/Deployment)`.
    pub fn summary(&self) -> String {
        let mut calls = vec!["reconcile".to_owned()];
        if self.finalize.is_some() {
            calls.push("finalize".into());
        }
        for (call, spec) in [("validate", &self.validate), ("default", &self.default)] {
            if let Some(spec) = spec {
                calls.push(match spec.failure_policy {
                    Some(policy) => format!("{call} (failurePolicy {policy:?})"),
                    None => call.to_owned(),
                });
            }
        }
        for hook in &self.hooks {
            calls.push(format!(
                "hook {} ({} {}/{}, {}, order {})",
                hook.name,
                hook.phase.name(),
                hook.base.group,
                hook.base.kind,
                hook.behaviour.as_str(),
                hook.order
            ));
        }
        if let Some(spec) = &self.mutate {
            calls.push(format!("mutate ({})", kinds(&spec.kinds)));
        }
        calls.join(", ")
    }

    /// The child kinds its offers declare, for `--check`: `offer SQLiteShell:
    /// children v1/ConfigMap`, one per offer that declares any.
    pub fn children_summary(&self) -> Vec<String> {
        self.offers
            .iter()
            .filter(|o| !o.children.is_empty())
            .map(|o| {
                format!(
                    "offer {}: children {}",
                    o.implementation,
                    kinds(&o.children)
                )
            })
            .collect()
    }

    fn check(&self) -> Result<(), String> {
        kplug_sidecar::proto::rules::validate_plugin_name(&self.name)
            .map_err(|e| format!("name: {e}"))?;
        if self.offers.is_empty() {
            return Err("offers: offer at least one implementation".into());
        }
        for (i, offer) in self.offers.iter().enumerate() {
            let at = format!("offers[{i}] ({})", offer.implementation);
            if offer.children.len() > MAX_CHILD_KINDS_PER_OFFER {
                return Err(format!(
                    "{at}.children: {} are declared; the operator accepts at most {MAX_CHILD_KINDS_PER_OFFER}",
                    offer.children.len()
                ));
            }
        }
        self.reconcile.check("reconcile", MAX_CALL_DEADLINE)?;
        if let Some(spec) = &self.finalize {
            spec.check("finalize", MAX_CALL_DEADLINE)?;
        }
        for (call, spec) in [("validate", &self.validate), ("default", &self.default)] {
            if let Some(spec) = spec {
                spec.command_spec().check(call, MAX_ADMISSION_DEADLINE)?;
            }
        }
        self.check_hooks()?;
        if let Some(spec) = &self.mutate {
            if spec.kinds.is_empty() || spec.kinds.len() > MAX_MUTATIONS {
                return Err(format!(
                    "mutate.kinds: {} are declared; name from 1 to {MAX_MUTATIONS} kinds the command patches, e.g. [apps/v1/Deployment]",
                    spec.kinds.len()
                ));
            }
            spec.command_spec().check("mutate", MAX_CALL_DEADLINE)?;
        }
        Ok(())
    }

    fn check_hooks(&self) -> Result<(), String> {
        if self.hooks.len() > MAX_HOOKS {
            return Err(format!(
                "hooks: {} are declared; the operator accepts at most {MAX_HOOKS}",
                self.hooks.len()
            ));
        }
        for (i, hook) in self.hooks.iter().enumerate() {
            let at = format!("hooks[{i}] ({})", hook.name);
            if kplug_sidecar::proto::rules::validate_plugin_name(&hook.name).is_err() {
                return Err(format!(
                    "{at}.name: {:?} is not a DNS label; use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters",
                    hook.name
                ));
            }
            if let Some(j) = self.hooks[..i].iter().position(|h| h.name == hook.name) {
                return Err(format!(
                    "{at}.name: hooks[{j}] has the same name; hook names are unique within a plugin"
                ));
            }
            if hook.base.kind.is_empty() {
                return Err(format!(
                    "{at}.base.kind: name the kind whose objects the hook runs for"
                ));
            }
            hook.command_spec().check(&at, MAX_CALL_DEADLINE)?;
        }
        Ok(())
    }
}

/// `apps/v1/Deployment, v1/ConfigMap`.
fn kinds(kinds: &[ApiKind]) -> String {
    kinds
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
