//! The manifest's own tests: defaults, relative programs, and the
//! messages that name each mistake.

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
        error.contains("reconcile.timeoutSeconds is 3600; it must be more than 0 and at most 600"),
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

#[test]
fn child_and_mutation_kinds_are_read_as_the_operators_flags_write_them() {
    let yaml = GOOD.replace(
        "    implementation: SQLiteShell\n",
        "    implementation: SQLiteShell\n    children: [apps/v1/Deployment, v1/ConfigMap]\n",
    ) + "mutate:\n  kinds: [v1/ConfigMap]\n  command: [./mutate.sh]\n";
    let m = load(&yaml).unwrap();
    let kind = |api_version: &str, kind: &str| ApiKind {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    };
    assert_eq!(
        m.offers[0].children,
        [kind("apps/v1", "Deployment"), kind("v1", "ConfigMap")]
    );
    let mutate = m.mutate.as_ref().unwrap();
    assert_eq!(mutate.kinds, [kind("v1", "ConfigMap")]);
    assert_eq!(mutate.timeout_seconds, 30.0);
    assert!(Path::new(&mutate.command[0]).is_absolute());
    assert_eq!(m.summary(), "reconcile, mutate (v1/ConfigMap)");
    assert_eq!(
        m.children_summary(),
        ["offer SQLiteShell: children apps/v1/Deployment, v1/ConfigMap"]
    );
    for bad in ["Deployment", "apps/v1/Deployment/x", "/v1/ConfigMap", "v1/"] {
        let e = load(&yaml.replace("v1/ConfigMap]\n  command", &format!("{bad}]\n  command")))
            .unwrap_err();
        assert!(
            e.contains(&format!("{bad:?} is not <apiVersion>/<Kind>")),
            "{bad}: {e}"
        );
    }
    let many = (0..17)
        .map(|i| format!("v1/Kind{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let e = load(&yaml.replace("[apps/v1/Deployment, v1/ConfigMap]", &format!("[{many}]")))
        .unwrap_err();
    assert!(
        e.contains(
            "offers[0] (SQLiteShell).children: 17 are declared; the operator accepts at most 16"
        ),
        "{e}"
    );
}
