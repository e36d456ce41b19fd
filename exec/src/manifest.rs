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
//! ```
//!
//! Unknown keys are errors, so that a typo is not a silently ignored
//! command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The longest `timeoutSeconds` allowed.
const MAX_TIMEOUT_SECONDS: f64 = 3600.0;
/// The largest `concurrency` allowed.
const MAX_CONCURRENCY: usize = 64;

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
}

/// A group and kind.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupKind {
    /// The API group.
    pub group: String,
    /// The kind.
    pub kind: String,
}

/// One implementation offered for one base kind.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferSpec {
    /// The base kind.
    pub base: GroupKind,
    /// The implementation's name.
    pub implementation: String,
    /// The extension kinds it reads.
    #[serde(default)]
    pub extensions: Vec<GroupKind>,
}

/// How to run one call.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandSpec {
    /// The program and its arguments (no shell: use `[sh, -c, "..."]` for
    /// one). A relative program path with a `/` is relative to the
    /// manifest's directory, which is also the working directory.
    pub command: Vec<String>,
    /// How long a run may take before it is killed, with its whole process
    /// group (default 30).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: f64,
    /// How many runs of this command at once; more calls wait (default 4).
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

fn default_timeout() -> f64 {
    30.0
}

fn default_concurrency() -> usize {
    4
}

impl CommandSpec {
    /// The timeout as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_seconds)
    }
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
        for spec in manifest.commands_mut() {
            spec.resolve(&dir);
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

    fn commands_mut(&mut self) -> impl Iterator<Item = &mut CommandSpec> {
        std::iter::once(&mut self.reconcile).chain(self.finalize.as_mut())
    }

    fn check(&self) -> Result<(), String> {
        kplug_sidecar::proto::rules::validate_plugin_name(&self.name)
            .map_err(|e| format!("name: {e}"))?;
        if self.offers.is_empty() {
            return Err("offers: offer at least one implementation".into());
        }
        let calls = [
            ("reconcile", Some(&self.reconcile)),
            ("finalize", self.finalize.as_ref()),
        ];
        for (call, spec) in calls {
            let Some(spec) = spec else { continue };
            if spec.command.first().is_none_or(String::is_empty) {
                return Err(format!(
                    "{call}.command: give the program to run, e.g. [./{call}.sh]"
                ));
            }
            if !(spec.timeout_seconds > 0.0 && spec.timeout_seconds <= MAX_TIMEOUT_SECONDS) {
                return Err(format!(
                    "{call}.timeoutSeconds is {}; it must be more than 0 and at most {MAX_TIMEOUT_SECONDS}",
                    spec.timeout_seconds
                ));
            }
            if !(1..=MAX_CONCURRENCY).contains(&spec.concurrency) {
                return Err(format!(
                    "{call}.concurrency is {}; it must be from 1 to {MAX_CONCURRENCY}",
                    spec.concurrency
                ));
            }
        }
        Ok(())
    }
}

impl CommandSpec {
    /// `./x` and `dir/x` are relative to the manifest; `x` is looked up on
    /// the PATH.
    fn resolve(&mut self, dir: &Path) {
        let program = &self.command[0];
        if program.contains('/') && Path::new(program).is_relative() {
            self.command[0] = dir.join(program).display().to_string();
        }
    }
}

#[cfg(test)]
mod tests {
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
        let validate = format!("{GOOD}validate:\n  command: [./v.sh]\n");
        assert!(load(&validate).unwrap_err().contains("validate"));
    }
}
