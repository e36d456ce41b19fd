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
//! ```
//!
//! Unknown keys are errors, so that a typo is not a silently ignored
//! command.

mod spec;

use std::path::{Path, PathBuf};

/// Where in an object's lifecycle a hook runs: the SDK's phase, which the
/// manifest spells by its [name](Phase::name) (`before-reconcile`, ...).
pub use kplug_sidecar::Phase;
use kplug_sidecar::proto::limits::{MAX_ADMISSION_DEADLINE, MAX_CALL_DEADLINE, MAX_HOOKS};
use serde::Deserialize;
pub use spec::{
    AdmissionSpec, Behaviour, CommandSpec, FailurePolicy, GroupKind, HookSpec, OfferSpec,
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
    /// (failurePolicy Fail), hook backup (before-reconcile, sync-enforce)`.
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
        calls.join(", ")
    }

    fn check(&self) -> Result<(), String> {
        kplug_sidecar::proto::rules::validate_plugin_name(&self.name)
            .map_err(|e| format!("name: {e}"))?;
        if self.offers.is_empty() {
            return Err("offers: offer at least one implementation".into());
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn load(yaml: &str) -> Result<Manifest, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.yaml");
        std::fs::write(&path, yaml).unwrap();
        Manifest::load(&path).map_err(|e| e.to_string())
    }

    const GOOD: &str = "
name: tables-sh
version: 1.0.0
offers:
  - base: { group: myorg.org, kind: DatabaseTable }
    implementation: SQLiteShell
reconcile:
  command: [./reconcile.sh, --verbose]
";

    #[test]
    fn a_manifest_gets_defaults_and_relative_programs() {
        let m = load(GOOD).unwrap();
        assert_eq!(m.reconcile.timeout(), Duration::from_secs(30));
        assert_eq!(m.reconcile.concurrency, 4);
        assert!(m.reconcile.command[0].ends_with("/reconcile.sh"));
        assert!(Path::new(&m.reconcile.command[0]).is_absolute());
        assert_eq!(m.reconcile.command[1], "--verbose");
        assert!(m.finalize.is_none());
    }

    #[test]
    fn programs_of_a_manifest_given_by_a_relative_path_are_found() {
        // Tests run in the crate's directory.
        let m = Manifest::load(Path::new("tests/fixtures/greet/plugin.yaml")).unwrap();
        let program = Path::new(&m.reconcile.command[0]);
        assert!(program.is_absolute(), "{}", program.display());
        assert!(program.is_file(), "{}", program.display());
    }

    #[test]
    fn mistakes_are_named() {
        let typo = GOOD.replace("reconcile:\n", "reconcile:\n  timeout: 3\n");
        assert!(
            load(&typo).unwrap_err().contains("timeout"),
            "{}",
            load(&typo).unwrap_err()
        );
        let name = GOOD.replace("tables-sh", "Tables_SH");
        assert!(load(&name).unwrap_err().contains("name:"));
        let slow = GOOD.replace("reconcile:\n", "reconcile:\n  timeoutSeconds: 0\n");
        assert!(
            load(&slow)
                .unwrap_err()
                .contains("reconcile.timeoutSeconds is 0")
        );
        let none = GOOD.replace("[./reconcile.sh, --verbose]", "[]");
        assert!(load(&none).unwrap_err().contains("reconcile.command"));
        let long = GOOD.replace("reconcile:\n", "reconcile:\n  timeoutSeconds: 3600\n");
        let error = load(&long).unwrap_err();
        assert!(
            error.contains(
                "reconcile.timeoutSeconds is 3600; it must be more than 0 and at most 600"
            ),
            "{error}"
        );
    }

    const FULL: &str = "
validate:
  command: [./validate.sh]
  failurePolicy: Ignore
default:
  command: [./default.sh]
  timeoutSeconds: 2
  env: { MODE: strict }
hooks:
  - name: backup
    base: { group: myorg.org, kind: DatabaseTable }
    phase: before-reconcile
    behaviour: sync-enforce
    order: -10
    command: [./backup.sh]
    timeoutSeconds: 60
    concurrency: 1
  - name: audit
    base: { group: myorg.org, kind: DatabaseTable }
    phase: after-reconcile
    behaviour: async
    command: [audit]
";

    #[test]
    fn admission_commands_and_hooks_are_read_with_their_defaults() {
        let m = load(&format!("{GOOD}{FULL}")).unwrap();
        let validate = m.validate.as_ref().unwrap();
        assert_eq!(validate.timeout_seconds, 5.0);
        assert_eq!(validate.concurrency, 4);
        assert_eq!(validate.failure_policy, Some(FailurePolicy::Ignore));
        assert!(Path::new(&validate.command[0]).is_absolute());
        let default = m.default.as_ref().unwrap();
        assert_eq!(default.failure_policy, None);
        assert_eq!(default.command_spec().env["MODE"], "strict");
        let [backup, audit] = &m.hooks[..] else {
            panic!("{:?}", m.hooks)
        };
        assert_eq!(
            (backup.phase, backup.behaviour, backup.order),
            (Phase::BeforeReconcile, Behaviour::SyncEnforce, -10)
        );
        assert!(Path::new(&backup.command[0]).is_absolute());
        assert_eq!(backup.command_spec().timeout(), Duration::from_secs(60));
        assert_eq!(
            (
                audit.phase,
                audit.behaviour,
                audit.order,
                audit.timeout_seconds
            ),
            (Phase::AfterReconcile, Behaviour::Async, 0, 30.0)
        );
        assert_eq!(audit.command, ["audit"], "a bare name stays for the PATH");
        assert_eq!(
            m.summary(),
            "reconcile, validate (failurePolicy Ignore), default, \
             hook backup (before-reconcile myorg.org/DatabaseTable, sync-enforce, order -10), \
             hook audit (after-reconcile myorg.org/DatabaseTable, async, order 0)"
        );
    }

    #[test]
    fn mistakes_in_admission_commands_and_hooks_are_named() {
        let error = |from: &str, to: &str| {
            let yaml = format!("{GOOD}{FULL}");
            assert!(yaml.contains(from), "{from}");
            load(&yaml.replacen(from, to, 1)).unwrap_err()
        };
        let e = error("name: backup", "name: Backup_1");
        assert!(
            e.contains("hooks[0] (Backup_1).name: \"Backup_1\" is not a DNS label"),
            "{e}"
        );
        let e = error("name: audit", "name: backup");
        assert!(
            e.contains("hooks[1] (backup).name: hooks[0] has the same name"),
            "{e}"
        );
        let e = error("phase: before-reconcile", "phase: before_reconcile");
        assert!(
            e.contains("before_reconcile") && e.contains("before-reconcile"),
            "{e}"
        );
        let e = error("behaviour: async", "behaviour: fire-and-forget");
        assert!(
            e.contains("fire-and-forget") && e.contains("sync-enforce"),
            "{e}"
        );
        let e = error("failurePolicy: Ignore", "failurePolicy: ignore");
        assert!(e.contains("ignore") && e.contains("Ignore"), "{e}");
        let e = error("    timeoutSeconds: 60", "    timeout: 60");
        assert!(e.contains("timeout"), "{e}");
        let e = error("  timeoutSeconds: 2", "  timeoutSeconds: 11");
        assert!(
            e.contains("default.timeoutSeconds is 11; it must be more than 0 and at most 10"),
            "{e}"
        );
        let e = error("    concurrency: 1", "    concurrency: 0");
        assert!(e.contains("hooks[0] (backup).concurrency is 0"), "{e}");
        let e = error("command: [audit]", "command: []");
        assert!(
            e.contains("hooks[1] (audit).command: give the program"),
            "{e}"
        );
        let e = error(
            "kind: DatabaseTable }\n    phase: after",
            "kind: \"\" }\n    phase: after",
        );
        assert!(e.contains("hooks[1] (audit).base.kind"), "{e}");
        let many: String = (0..17)
            .map(|i| {
                format!(
                    "  - {{name: h{i}, base: {{group: g, kind: K}}, phase: after-finalize, behaviour: sync-bypass, command: [x]}}\n"
                )
            })
            .collect();
        let e = load(&format!("{GOOD}hooks:\n{many}")).unwrap_err();
        assert!(
            e.contains("hooks: 17 are declared; the operator accepts at most 16"),
            "{e}"
        );
    }
}
