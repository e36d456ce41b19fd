//! The kit against real plugin processes: `examples/broken-plugin`, a
//! plugin written from the protocol alone, passes every check; with
//! `--break <rule>` it fails the check for that rule, and the report names
//! the rule. The SDKs' plugins are run in `tests/sdks.rs`.

use std::path::PathBuf;
use std::process::Output;

use kplug_conformance::checks;

/// `target/debug/examples/broken-plugin`, which `cargo test` builds.
fn broken_plugin() -> PathBuf {
    kplug_testenv::workspace_binary("examples/broken-plugin")
}

/// Runs the kit with `args` against the broken plugin breaking `rule`.
async fn kit(args: &[&str], rule: Option<&str>) -> (Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let socket_dir = dir.path().join("sockets");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kplug-conformance"));
    command
        .arg("--socket-dir")
        .arg(&socket_dir)
        .args(args)
        .arg("--")
        .arg(broken_plugin());
    if let Some(rule) = rule {
        command.args(["--break", rule]);
    }
    let output = command.output().await.expect("the kit runs");
    let report = String::from_utf8_lossy(&output.stdout).into_owned();
    (output, report)
}

/// The kit, run for `check` only against a plugin breaking `rule`, fails
/// that check, names its rule, and exits 1.
async fn fails(check: &str, rule: &str) {
    let (output, report) = kit(&["--only", check], Some(rule)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "--break {rule} should fail {check}:\n{report}\n{stderr}"
    );
    let rule_text = checks::find(check).unwrap().rule;
    assert!(
        report.contains(&format!("FAIL {check} "))
            && report.contains(&format!("rule: {rule_text}")),
        "--break {rule}: the report should fail {check} and name its rule:\n{report}"
    );
    assert_eq!(
        report.matches("FAIL ").count(),
        1,
        "--only {check} judges one check:\n{report}"
    );
}

#[tokio::test]
async fn a_plugin_that_keeps_every_rule_passes_every_check() {
    let junit = tempfile::NamedTempFile::new().unwrap();
    let path = junit.path().to_str().unwrap();
    let (output, report) = kit(&["--junit", path], None).await;
    assert_eq!(output.status.code(), Some(0), "{report}");
    // Every check but the cases (no --cases file) ran and passed.
    for check in checks::CHECKS {
        let mark = if check.name == "cases" {
            "SKIP"
        } else {
            "PASS"
        };
        assert!(
            report.contains(&format!("{mark} {} ", check.name)),
            "{}: expected {mark}:\n{report}",
            check.name
        );
    }
    let xml = std::fs::read_to_string(junit.path()).unwrap();
    assert_eq!(
        xml.matches("<testcase ").count(),
        checks::CHECKS.len(),
        "{xml}"
    );
    assert_eq!(xml.matches("<failure").count(), 0, "{xml}");
}

#[tokio::test]
async fn backoff_fails_a_plugin_that_retries_without_backing_off() {
    fails("backoff", "no-backoff").await;
}

#[tokio::test]
async fn handshake_fails_a_plugin_with_another_protocol() {
    fails("handshake", "wrong-protocol").await;
}

#[tokio::test]
async fn handshake_fails_a_plugin_whose_getinfo_declares_other_hooks() {
    fails("handshake", "hooks-disagree").await;
    let (_, report) = kit(&["--only", "handshake"], Some("hooks-disagree")).await;
    assert!(
        report.contains("GetInfo and the heartbeat disagree on hooks"),
        "{report}"
    );
}

#[tokio::test]
async fn probe_fails_a_plugin_without_probe() {
    fails("probe", "no-probe").await;
}

#[tokio::test]
async fn heartbeat_content_fails_a_plugin_whose_heartbeats_change() {
    fails("heartbeat-content", "changing-version").await;
}

#[tokio::test]
async fn heartbeat_interval_fails_a_plugin_that_ignores_the_operators_interval() {
    fails("heartbeat-interval", "ignore-interval").await;
}

#[tokio::test]
async fn reconcile_fails_a_plugin_that_writes_the_operators_status_keys() {
    fails("reconcile", "reserved-status-key").await;
}

#[tokio::test]
async fn finalize_fails_a_plugin_without_an_outcome() {
    fails("finalize", "finalize-unspecified").await;
}

#[tokio::test]
async fn mutate_fails_a_plugin_whose_mutation_differs_for_the_same_request() {
    fails("mutate", "random-mutation").await;
}

#[tokio::test]
async fn bad_input_fails_a_plugin_that_answers_bad_json_with_a_grpc_error() {
    fails("bad-input", "error-on-bad-json").await;
}

#[tokio::test]
async fn message_limit_fails_a_plugin_with_grpcs_default_limit() {
    fails("message-limit", "small-messages").await;
}

#[tokio::test]
async fn cases_fail_a_plugin_that_is_not_the_conformance_plugin() {
    let cases = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../sidecar-sdk/conformance/cases.json"
    );
    let (output, report) = kit(&["--only", "cases", "--cases", cases], None).await;
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains(r#"FAIL cases"#) && report.contains(r#"case "get-info""#),
        "{report}"
    );
}

/// `--case` runs only the cases it selects: the first the plugin fails is
/// the first selected one, not `get-info`.
#[tokio::test]
async fn case_selects_the_cases_that_run() {
    let cases = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../sidecar-sdk/conformance/cases.json"
    );
    let args = ["--only", "cases", "--cases", cases, "--case", "mutate-*"];
    let (output, report) = kit(&args, None).await;
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains(r#"FAIL cases"#) && report.contains(r#"case "mutate-patch""#),
        "{report}"
    );
}

/// A `--case` name no case has: the kit cannot run (exit 2), and says so,
/// naming the cases, before it starts the plugin.
#[tokio::test]
async fn a_case_name_that_selects_no_case_is_an_error() {
    let cases = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../sidecar-sdk/conformance/cases.json"
    );
    let args = ["--cases", cases, "--case", "mutate-patch,mutate-pacth"];
    let (output, report) = kit(&args, None).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{report}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "cases file {cases}: no case is called \"mutate-pacth\"; the cases are: get-info, "
        )),
        "{stderr}"
    );
    assert!(report.is_empty(), "{report}");
}

#[tokio::test]
async fn live_socket_fails_a_plugin_that_steals_a_live_socket() {
    fails("live-socket", "steal-socket").await;
}

#[tokio::test]
async fn reregister_fails_a_plugin_that_gives_up_when_the_operator_goes() {
    fails("reregister", "give-up").await;
}

#[tokio::test]
async fn non_socket_file_fails_a_plugin_that_deletes_any_file() {
    fails("non-socket-file", "delete-anything").await;
}

#[tokio::test]
async fn stale_socket_fails_a_plugin_that_cannot_start_over_a_stale_socket() {
    fails("stale-socket", "keep-stale").await;
}

#[tokio::test]
async fn restart_fails_a_plugin_that_reuses_its_instance_id() {
    fails("restart", "fixed-instance-id").await;
}

#[tokio::test]
async fn unregister_fails_a_plugin_that_exits_without_unregistering() {
    fails("unregister", "no-unregister").await;
}

#[tokio::test]
async fn drain_fails_a_plugin_that_stops_serving_before_unregister() {
    fails("drain", "stop-serving-first").await;
}

#[tokio::test]
async fn exit_fails_a_plugin_that_exits_non_zero() {
    fails("exit", "exit-nonzero").await;
}

#[tokio::test]
async fn every_check_has_a_broken_plugin_that_fails_it() {
    // The tests above, one per check: a new check without one fails here.
    let source = include_str!("broken.rs");
    for check in checks::CHECKS {
        let call = format!("fails(\"{}\"", check.name);
        let cases = check.name == "cases" && source.contains("--only\", \"cases\"");
        assert!(
            source.contains(&call) || cases,
            "no broken plugin fails {}",
            check.name
        );
    }
}
