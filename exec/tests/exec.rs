//! kplug-exec as a real process with real shell scripts: the conformance
//! kit's every check (on a test plugin and on the SQLite shell example), the
//! shared SDK cases for children and Mutate, the request and environment a command gets, the exit code answers of every
//! call (reconcile, validate, default, hooks, mutate), children observed
//! and desired, the timeout killing the whole process group, the
//! concurrency bound, what GetInfo declares, and `--check`'s messages.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use kplug_conformance::Options;
use kplug_conformance::checks::Verdict;
use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{
    Call, Capability, DefaultRequest, DefaultResponse, FailurePolicy, GetInfoRequest,
    HookBehaviour, HookPhase, HookRequest, HookResponse, MutateRequest, MutateResponse, Operation,
    Outcome, ReconcileRequest, ReconcileResponse, ValidateRequest, ValidateResponse,
};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tonic::transport::Channel;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("plugin.yaml")
}

/// The command line of kplug-exec serving `manifest`, for the kit.
fn kplug_exec(manifest: &Path) -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_kplug-exec").to_owned(),
        "--manifest".to_owned(),
        manifest.display().to_string(),
    ]
}

#[tokio::test]
async fn a_shell_plugin_passes_every_check_of_the_conformance_kit() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        socket_dir: dir.path().join("sockets"),
        command: kplug_exec(&fixture("greet")),
        only: None,
        cases: None,
        only_cases: Vec::new(),
        start_timeout: Duration::from_secs(30),
    };
    let outcomes = kplug_conformance::run(&options).await.unwrap();
    let report = kplug_conformance::report::text("kplug-exec greet", &outcomes);
    for o in &outcomes {
        let expected_skip = o.check.name == "cases";
        assert_eq!(
            matches!(o.verdict, Verdict::Skip(_)),
            expected_skip,
            "{}:\n{report}",
            o.check.name
        );
        assert!(!matches!(o.verdict, Verdict::Fail(_)), "{report}");
    }
}

/// The shared SDK cases for children and Mutate: the issue's, which the
/// selection `reconcile-child*`, `mutate-*` must hold (with any added
/// since).
const CHILDREN_AND_MUTATE_CASES: [&str; 12] = [
    "reconcile-children",
    "reconcile-children-none",
    "reconcile-children-on-retry",
    "reconcile-children-observed",
    "reconcile-child-not-an-object",
    "reconcile-child-invalid-json-observed",
    "mutate-patch",
    "mutate-nothing",
    "mutate-echo",
    "mutate-outside-the-allowed-paths",
    "mutate-raise",
    "mutate-object-not-an-object",
];

/// The names of the cases of `file` that `patterns` select, in file order.
fn selected_cases(file: &Path, patterns: &[String]) -> Vec<String> {
    let all: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let selected = kplug_conformance::cases::select(&all, patterns).unwrap();
    selected["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The shared SDK conformance cases (`sidecar-sdk/conformance/cases.json`)
/// for children and Mutate, run by the kit's case runner against kplug-exec
/// serving `tests/fixtures/conformance`, whose jq scripts do what the
/// conformance plugin does (`sidecar-sdk/conformance/README.md`): desired
/// children on OK and RETRY, none, the observed ones, a desired child that
/// is not an object, an observed one that is not, and Mutate's patch, no
/// patch, echo, a path outside the allowed ones, a command that fails and
/// an object that is not an object. Every case of the file whose name
/// matches `reconcile-child*` or `mutate-*` runs, in file order.
///
/// The rest of the file is not run (the runner stops at the first case
/// that fails):
///
/// - `get-info` expects the conformance plugin's call policies (RECONCILE
///   120 s, VALIDATE 2 s `FAIL`, DEFAULT 1.5 s `IGNORE`, HOOK with no
///   deadline, no MUTATE policy); kplug-exec derives one per command from
///   its `timeoutSeconds`, always with a deadline, MUTATE's included;
/// - `probe-not-ready` expects a plugin that a Reconcile made not ready
///   (`setReadiness`); kplug-exec has no readiness command, and is ready
///   while it serves;
/// - the other Reconcile, Finalize, Validate, Default and Hook cases could
///   be answered with a script per handler (validate, default, the four
///   hooks), but would test those scripts more than kplug-exec, whose
///   answers go through the Rust SDK's decoding and builders, which
///   `sidecar-sdk/tests/conformance.rs` runs every case against.
#[tokio::test]
async fn a_shell_plugin_answers_the_shared_children_and_mutate_cases() {
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sidecar-sdk/conformance/cases.json");
    let patterns = vec!["reconcile-child*".to_owned(), "mutate-*".to_owned()];
    let names = selected_cases(&cases, &patterns);
    for name in CHILDREN_AND_MUTATE_CASES {
        assert!(
            names.iter().any(|n| n == name),
            "{name} is not selected: {names:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        socket_dir: dir.path().join("sockets"),
        command: kplug_exec(&fixture("conformance")),
        only: Some(["cases"].into_iter().collect()),
        cases: Some(cases),
        only_cases: patterns,
        start_timeout: Duration::from_secs(30),
    };
    let outcomes = kplug_conformance::run(&options).await.unwrap();
    let report = kplug_conformance::report::text("kplug-exec conformance", &outcomes);
    let verdicts: Vec<_> = outcomes
        .iter()
        .map(|o| (o.check.name, &o.verdict))
        .collect();
    let passed = format!(
        "{} cases answered as specified (selected with --case reconcile-child*,mutate-*)",
        names.len()
    );
    assert_eq!(verdicts, [("cases", &Verdict::Pass(passed))], "{report}");
}

/// kplug-exec serving `tests/fixtures/calls`, with `$OUT` set to a scratch
/// directory, and a client for its socket.
struct Calls {
    _dir: tempfile::TempDir,
    out: PathBuf,
    process: Child,
    client: PluginClient<Channel>,
}

impl Calls {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let sockets = dir.path().join("sockets");
        // No operator makes it here, and a plugin never makes its socket dir.
        std::fs::create_dir(&sockets).unwrap();
        let process = Command::new(env!("CARGO_BIN_EXE_kplug-exec"))
            .arg("--manifest")
            .arg(fixture("calls"))
            .env("KPLUG_SOCKET_DIR", &sockets)
            .env("OUT", &out)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let socket = sockets.join("plugins/calls-sh/plugin.sock");
        for _ in 0..300 {
            if socket.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            socket.exists(),
            "kplug-exec did not bind {}",
            socket.display()
        );
        let client = PluginClient::new(kplug_proto::socket::channel(&socket));
        Self {
            _dir: dir,
            out,
            process,
            client,
        }
    }

    async fn reconcile(&self, name: &str) -> ReconcileResponse {
        self.reconcile_with(name, &[]).await
    }

    /// A Reconcile whose request carries `children` as the observed ones.
    async fn reconcile_with(&self, name: &str, children: &[Value]) -> ReconcileResponse {
        self.client
            .clone()
            .reconcile(ReconcileRequest {
                children: children
                    .iter()
                    .map(|c| c.to_string().into_bytes())
                    .collect(),
                implementation: "Calls".into(),
                object: greeting(name).to_string().into_bytes(),
                extensions: vec![],
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn validate(&self, name: &str) -> Result<ValidateResponse, tonic::Status> {
        self.client
            .clone()
            .validate(ValidateRequest {
                implementation: "Calls".into(),
                operation: Operation::Update as i32,
                object: greeting(name).to_string().into_bytes(),
                old_object: json!({"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": name}})
                    .to_string()
                    .into_bytes(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    async fn default(&self, name: &str) -> Result<DefaultResponse, tonic::Status> {
        self.client
            .clone()
            .default(DefaultRequest {
                implementation: "Calls".into(),
                operation: Operation::Create as i32,
                object: greeting(name).to_string().into_bytes(),
                old_object: vec![],
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// A Mutate of a Deployment named `name` for a Greeting, with no live
    /// object (it does not exist yet).
    async fn mutate(&self, name: &str) -> Result<MutateResponse, tonic::Status> {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop", "labels": {"kplug.io/plugin": "other"}},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}}},
        });
        self.client
            .clone()
            .mutate(MutateRequest {
                object: deployment.to_string().into_bytes(),
                live: Vec::new(),
                base: greeting("base").to_string().into_bytes(),
                implementation: "Calls".into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    async fn hook(&self, hook: &str, name: &str) -> HookResponse {
        let (phase, outcome, message) = match hook {
            "check" => (HookPhase::BeforeReconcile, Outcome::Unspecified, ""),
            _ => (
                HookPhase::AfterFinalize,
                Outcome::Failed,
                "the table is locked",
            ),
        };
        self.client
            .clone()
            .hook(HookRequest {
                hook: hook.into(),
                phase: phase as i32,
                implementation: "Calls".into(),
                object: greeting(name).to_string().into_bytes(),
                extensions: vec![json!({"apiVersion": "example.com/v1", "kind": "GreetingExtra", "metadata": {"name": name}}).to_string().into_bytes()],
                outcome: outcome as i32,
                message: message.into(),
            })
            .await
            .unwrap()
            .into_inner()
    }
}

fn greeting(name: &str) -> Value {
    json!({
        "apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": name, "namespace": "shop"}, "spec": {"salutation": "hi"},
    })
}

/// Waits until the process whose pid `file` holds no longer runs (gone, or
/// a zombie waiting for init to reap it), and fails if it still runs after
/// two seconds.
async fn assert_gone(file: &Path) {
    let pid: i32 = std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for _ in 0..100 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty()
            || stat
                .split(") ")
                .nth(1)
                .is_some_and(|rest| rest.starts_with('Z'))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the command's child {pid} still runs after its timeout");
}

impl Drop for Calls {
    fn drop(&mut self) {
        self.process.start_kill().ok();
    }
}

#[tokio::test]
async fn a_command_gets_the_request_on_stdin_and_the_call_in_its_environment() {
    let calls = Calls::start().await;
    let response = calls.reconcile("env").await;
    assert_eq!(response.outcome, Outcome::Ok as i32, "{response:?}");
    let env = std::fs::read_to_string(calls.out.join("env")).unwrap();
    assert_eq!(env, "reconcile Calls shop env");
    let stdin: Value =
        serde_json::from_str(&std::fs::read_to_string(calls.out.join("stdin.json")).unwrap())
            .unwrap();
    assert_eq!(stdin["call"], "reconcile");
    assert_eq!(stdin["implementation"], "Calls");
    assert_eq!(stdin["object"]["spec"]["salutation"], "hi");
    assert_eq!(stdin["extensions"], json!([]));
    assert_eq!(stdin["children"], json!([]));
}

#[tokio::test]
async fn reconcile_gets_the_observed_children_and_answers_the_desired_ones() {
    let calls = Calls::start().await;
    let observed = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "children-settings", "namespace": "shop"},
        "data": {"greeting": "hello"},
    });
    let response = calls
        .reconcile_with("children", std::slice::from_ref(&observed))
        .await;
    assert_eq!(response.outcome, Outcome::Ok as i32, "{response:?}");
    let stdin: Value = serde_json::from_str(
        &std::fs::read_to_string(calls.out.join("children-stdin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stdin["children"], json!([observed]));
    let desired: Vec<Value> = response
        .children
        .expect("an answer with children carries them")
        .objects
        .iter()
        .map(|c| serde_json::from_slice(c).unwrap())
        .collect();
    assert_eq!(
        desired,
        [json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "children-settings"}, "data": {"greeting": "hi"},
        })]
    );

    // No children in the answer: they are left as they are.
    let kept = calls.reconcile("no-children").await;
    assert_eq!(kept.outcome, Outcome::Ok as i32, "{kept:?}");
    assert_eq!(kept.children, None);
    // An empty list is the whole set: none.
    let none = calls.reconcile("empty-children").await;
    assert_eq!(none.children.map(|c| c.objects.len()), Some(0));
    // A child that is not an object: FAILED, and no children sent.
    let bad = calls.reconcile("bad-child").await;
    assert_eq!(bad.outcome, Outcome::Failed as i32, "{bad:?}");
    assert_eq!(bad.children, None);
    assert!(
        bad.message
            .ends_with("reconcile.sh answered: children[0] is a string; a child must be a JSON object: a Kubernetes object with apiVersion, kind and metadata.name"),
        "{}",
        bad.message
    );
}

#[tokio::test]
async fn mutate_gets_the_object_live_and_base_and_answers_a_checked_patch() {
    let calls = Calls::start().await;
    let nothing = calls.mutate("env").await.unwrap();
    assert!(
        nothing.patch.is_empty() && nothing.warnings.is_empty(),
        "{nothing:?}"
    );
    let env = std::fs::read_to_string(calls.out.join("mutate-env")).unwrap();
    assert_eq!(env, "mutate Calls shop env");
    let stdin: Value = serde_json::from_str(
        &std::fs::read_to_string(calls.out.join("mutate-stdin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stdin["call"], "mutate");
    assert_eq!(stdin["implementation"], "Calls");
    assert_eq!(stdin["object"]["kind"], "Deployment");
    assert_eq!(stdin["live"], Value::Null);
    assert_eq!(stdin["base"]["metadata"]["name"], "base");

    let sidecar = calls.mutate("sidecar").await.unwrap();
    let patch: Value = serde_json::from_slice(&sidecar.patch).unwrap();
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/spec/template/spec/containers/-", "value": {"name": "backup", "image": "backup:1"}},
            {"op": "add", "path": "/metadata/annotations/backup.example.com~1enabled", "value": "true"},
        ])
    );
    assert_eq!(sidecar.warnings, ["added a backup sidecar"]);

    // A patch the operator would refuse is never sent: the call fails,
    // naming the command and the path.
    let outside = calls.mutate("outside").await.unwrap_err();
    assert_eq!(outside.code(), tonic::Code::Internal);
    assert!(
        outside
            .message()
            .contains("mutate.sh answered: a mutation may only change /spec")
            && outside
                .message()
                .contains("\"/metadata/labels/kplug.io~1plugin\" is outside them")
            && outside.message().ends_with(
                kplug_proto::limits::mutation_path_problem("/metadata/labels/kplug.io~1plugin")
                    .unwrap()
            ),
        "{outside:?}"
    );
    let broken = calls.mutate("broken").await.unwrap_err();
    assert_eq!(broken.code(), tonic::Code::Internal);
    assert!(
        broken
            .message()
            .ends_with("mutate.sh exited 3: no sidecar image configured"),
        "{broken:?}"
    );
}

#[tokio::test]
async fn exit_75_asks_to_retry_with_the_end_of_stderr() {
    let calls = Calls::start().await;
    let response = calls.reconcile("retry").await;
    assert_eq!(response.outcome, Outcome::Retry as i32, "{response:?}");
    assert_eq!(response.retry_after.unwrap().seconds, 10);
    assert!(
        response
            .message
            .ends_with("asked to retry (exit 75): the database is locked"),
        "{}",
        response.message
    );
}

#[tokio::test]
async fn a_command_past_its_timeout_is_killed_with_its_process_group() {
    let calls = Calls::start().await;
    let response = calls.reconcile("slow").await;
    assert_eq!(response.outcome, Outcome::Failed as i32, "{response:?}");
    assert!(
        response
            .message
            .contains("ran past its timeout of 1 s and was killed"),
        "{}",
        response.message
    );
    assert!(
        response.message.ends_with(": started copying"),
        "{}",
        response.message
    );
    // The script's own child (sleep 300) went with it.
    assert_gone(&calls.out.join("child")).await;
    // And the plugin goes on serving.
    assert_eq!(calls.reconcile("env").await.outcome, Outcome::Ok as i32);
}

#[tokio::test]
async fn runs_of_a_command_never_exceed_its_concurrency() {
    let calls = Calls::start().await;
    let names = ["serial-a", "serial-b", "serial-c"];
    // All three at once: without the bound they would overlap.
    let responses = futures::future::join_all(names.iter().map(|n| calls.reconcile(n))).await;
    assert!(
        responses.iter().all(|r| r.outcome == Outcome::Ok as i32),
        "{responses:?}"
    );
    // concurrency: 1 — each run ends before the next starts.
    assert_three_runs_one_after_another(&calls.out.join("log"));
}

/// Asserts that the three runs a `concurrency: 1` command logged to `log`
/// ("start NAME", then "end NAME") did not overlap: each ended before the
/// next started.
fn assert_three_runs_one_after_another(log: &std::path::Path) {
    let log = std::fs::read_to_string(log).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 6, "{log}");
    for pair in lines.chunks(2) {
        let started = pair[0].strip_prefix("start ").expect(&log);
        assert_eq!(pair[1], format!("end {started}"), "runs overlapped:\n{log}");
    }
}

#[tokio::test]
async fn get_info_declares_the_manifests_calls_hooks_and_deadlines() {
    let calls = Calls::start().await;
    let info = calls
        .client
        .clone()
        .get_info(GetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    let reconcile = Capability::Reconcile as i32;
    let (validate, default, hooks, children, mutate) = (
        Capability::Validate as i32,
        Capability::Default as i32,
        Capability::Hooks as i32,
        Capability::Children as i32,
        Capability::Mutate as i32,
    );
    // No finalize command, no FINALIZE.
    assert_eq!(
        info.capabilities,
        [reconcile, validate, default, hooks, children, mutate]
    );
    // The offer's child kinds and the kinds mutate patches, in the
    // manifest's order: (group, version, kind).
    fn gvk(k: &kplug_proto::v1::GroupVersionKind) -> (&str, &str, &str) {
        (&k.group, &k.version, &k.kind)
    }
    let child_kinds: Vec<_> = info.offers[0].children.iter().map(gvk).collect();
    assert_eq!(
        child_kinds,
        [("", "v1", "ConfigMap"), ("apps", "v1", "Deployment")]
    );
    let mutated: Vec<_> = info
        .mutations
        .iter()
        .map(|m| gvk(m.kind.as_ref().unwrap()))
        .collect();
    assert_eq!(
        mutated,
        [("apps", "v1", "Deployment"), ("", "v1", "ConfigMap")]
    );
    let declared: Vec<_> = info
        .hooks
        .iter()
        .map(|h| {
            let base = h.base.as_ref().unwrap();
            (
                h.name.as_str(),
                base.kind.as_str(),
                h.phase,
                h.behaviour,
                h.order,
            )
        })
        .collect();
    assert_eq!(
        declared,
        [
            (
                "check",
                "Greeting",
                HookPhase::BeforeReconcile as i32,
                HookBehaviour::SyncEnforce as i32,
                -1
            ),
            (
                "notify",
                "Farewell",
                HookPhase::AfterFinalize as i32,
                HookBehaviour::Async as i32,
                0
            ),
        ]
    );
    // Each command's timeout and one second for its answer to arrive; the
    // hooks share the longest hook's.
    let policies: Vec<_> = info
        .call_policies
        .iter()
        .map(|p| (p.call, p.deadline.unwrap().seconds, p.failure_policy))
        .collect();
    let unset = FailurePolicy::Unspecified as i32;
    assert_eq!(
        policies,
        [
            (Call::Reconcile as i32, 2, unset),
            (Call::Validate as i32, 2, FailurePolicy::Ignore as i32),
            (Call::Default as i32, 2, unset),
            (Call::Hook as i32, 3, unset),
            (Call::Mutate as i32, 2, unset),
        ]
    );
}

#[tokio::test]
async fn validate_gets_the_admission_request_and_allows_or_refuses() {
    let calls = Calls::start().await;
    let allowed = calls.validate("env").await.unwrap();
    assert!(
        allowed.errors.is_empty() && allowed.warnings.is_empty(),
        "{allowed:?}"
    );
    let env = std::fs::read_to_string(calls.out.join("validate-env")).unwrap();
    assert_eq!(env, "validate Calls shop env");
    let stdin: Value = serde_json::from_str(
        &std::fs::read_to_string(calls.out.join("validate-stdin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stdin["call"], "validate");
    assert_eq!(stdin["implementation"], "Calls");
    assert_eq!(stdin["operation"], "UPDATE");
    assert_eq!(stdin["object"]["spec"]["salutation"], "hi");
    assert_eq!(stdin["oldObject"]["metadata"]["name"], "env");

    // By JSON: field errors, with the value as JSON text.
    let json = calls.validate("json").await.unwrap();
    assert_eq!(json.errors.len(), 1, "{json:?}");
    assert_eq!(
        (
            json.errors[0].path.as_str(),
            json.errors[0].value.as_str(),
            json.errors[0].message.as_str()
        ),
        ("spec.salutation", "\"yo\"", "too casual")
    );
    assert_eq!(json.warnings, ["be polite"]);

    // By exit code: the whole object, with stderr as the message.
    let refused = calls.validate("refuse").await.unwrap();
    assert_eq!(refused.errors.len(), 1, "{refused:?}");
    assert_eq!(refused.errors[0].path, "");
    assert_eq!(
        refused.errors[0].message,
        "greetings named refuse are refused"
    );
}

#[tokio::test]
async fn a_validate_command_that_cannot_decide_fails_the_call_for_the_failure_policy() {
    let calls = Calls::start().await;
    let undecided = calls.validate("undecided").await.unwrap_err();
    assert_eq!(undecided.code(), tonic::Code::Internal);
    assert!(
        undecided
            .message()
            .ends_with("could not decide (exit 75): the dictionary is unreachable"),
        "{undecided:?}"
    );
    let crashed = calls.validate("crash").await.unwrap_err();
    assert_eq!(crashed.code(), tonic::Code::Internal);
    assert!(
        crashed.message().contains("was killed by a signal"),
        "{crashed:?}"
    );
    let slow = calls.validate("slow").await.unwrap_err();
    assert_eq!(slow.code(), tonic::Code::Internal);
    assert!(
        slow.message()
            .contains("ran past its timeout of 1 s and was killed"),
        "{slow:?}"
    );
    assert_gone(&calls.out.join("validate-child")).await;
}

#[tokio::test]
async fn default_answers_a_json_patch_or_nothing() {
    let calls = Calls::start().await;
    let patched = calls.default("patch").await.unwrap();
    let patch: Value = serde_json::from_slice(&patched.patch).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/salutation", "value": "hello"}])
    );
    assert_eq!(patched.warnings, ["salutation defaulted"]);
    let stdin: Value = serde_json::from_str(
        &std::fs::read_to_string(calls.out.join("default-stdin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stdin["call"], "default");
    assert_eq!(stdin["operation"], "CREATE");
    assert_eq!(stdin["oldObject"], Value::Null);

    let nothing = calls.default("nothing").await.unwrap();
    assert!(
        nothing.patch.is_empty() && nothing.warnings.is_empty(),
        "{nothing:?}"
    );
    let outside = calls.default("outside").await.unwrap_err();
    assert_eq!(outside.code(), tonic::Code::Internal);
    assert!(
        outside.message().contains("\"/status/x\" is outside"),
        "{outside:?}"
    );
    let broken = calls.default("broken").await.unwrap_err();
    assert!(
        broken
            .message()
            .ends_with("default.sh exited 2: no dictionary"),
        "{broken:?}"
    );
}

#[tokio::test]
async fn a_hook_gets_its_name_phase_and_the_outcome_and_answers_like_reconcile() {
    let calls = Calls::start().await;
    assert_eq!(calls.hook("check", "env").await.outcome, Outcome::Ok as i32);
    let env = std::fs::read_to_string(calls.out.join("hook-env-check")).unwrap();
    assert_eq!(env, "hook check before-reconcile Calls shop env ");
    let stdin: Value =
        serde_json::from_str(&std::fs::read_to_string(calls.out.join("hook-stdin.json")).unwrap())
            .unwrap();
    assert_eq!(stdin["call"], "hook");
    assert_eq!(stdin["hook"], "check");
    assert_eq!(stdin["phase"], "before-reconcile");
    assert_eq!(stdin["outcome"], Value::Null);
    assert_eq!(stdin["message"], "");
    assert_eq!(stdin["extensions"][0]["kind"], "GreetingExtra");

    // After the implementation's call: its outcome and message, and the
    // hook's own env from the manifest.
    assert_eq!(
        calls.hook("notify", "env").await.outcome,
        Outcome::Ok as i32
    );
    let env = std::fs::read_to_string(calls.out.join("hook-env-notify")).unwrap();
    assert_eq!(env, "hook notify after-finalize Calls shop env bye");
    let stdin: Value =
        serde_json::from_str(&std::fs::read_to_string(calls.out.join("hook-stdin.json")).unwrap())
            .unwrap();
    assert_eq!(
        (&stdin["phase"], &stdin["outcome"], &stdin["message"]),
        (
            &json!("after-finalize"),
            &json!("FAILED"),
            &json!("the table is locked")
        )
    );

    let retry = calls.hook("check", "retry").await;
    assert_eq!(retry.outcome, Outcome::Retry as i32, "{retry:?}");
    assert!(
        retry
            .message
            .ends_with("asked to retry (exit 75): the backup disk is busy"),
        "{retry:?}"
    );
    let failed = calls.hook("check", "fail").await;
    assert_eq!(failed.outcome, Outcome::Failed as i32, "{failed:?}");
    assert!(
        failed
            .message
            .ends_with("hook.sh exited 3: the backup disk is full"),
        "{failed:?}"
    );
    let json = calls.hook("check", "json").await;
    assert_eq!(json.outcome, Outcome::Retry as i32, "{json:?}");
    assert_eq!(json.retry_after.unwrap().seconds, 3);
    assert_eq!(json.message, "copying");
    assert_eq!(
        serde_json::from_slice::<Value>(&json.status).unwrap(),
        json!({"lastBackup": "/backups/1"})
    );
    assert_eq!(json.events[0].reason, "BackedUp");
    let unknown = calls.hook("nope", "env").await;
    assert_eq!(unknown.outcome, Outcome::Failed as i32, "{unknown:?}");
    assert_eq!(
        unknown.message,
        "kplug-exec has no hook \"nope\"; the manifest declares check, notify"
    );
    let conditions = calls.hook("check", "conditions").await;
    assert_eq!(conditions.outcome, Outcome::Failed as i32, "{conditions:?}");
    assert!(
        conditions.message.contains("not a hook's response"),
        "{conditions:?}"
    );
}

#[tokio::test]
async fn a_hook_past_its_timeout_is_killed_with_its_children() {
    let calls = Calls::start().await;
    let started = std::time::Instant::now();
    let slow = calls.hook("check", "slow").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(slow.outcome, Outcome::Failed as i32, "{slow:?}");
    assert!(
        slow.message
            .contains("ran past its timeout of 1 s and was killed with its process group"),
        "{slow:?}"
    );
    assert!(slow.message.ends_with(": started copying"), "{slow:?}");
    assert_gone(&calls.out.join("hook-child")).await;
    assert_eq!(calls.hook("check", "env").await.outcome, Outcome::Ok as i32);
}

#[tokio::test]
async fn runs_of_a_hook_never_exceed_its_concurrency() {
    let calls = Calls::start().await;
    let names = ["serial-a", "serial-b", "serial-c"];
    let responses = futures::future::join_all(names.iter().map(|n| calls.hook("check", n))).await;
    assert!(
        responses.iter().all(|r| r.outcome == Outcome::Ok as i32),
        "{responses:?}"
    );
    assert_three_runs_one_after_another(&calls.out.join("hook-log"));
}

#[tokio::test]
async fn check_says_what_is_wrong_with_a_manifest_and_where() {
    let check = |yaml: &str| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.yaml");
        std::fs::write(&path, yaml).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kplug-exec"))
            .arg("--manifest")
            .arg(&path)
            .arg("--check")
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            stderr,
            path,
        )
    };
    let good = std::fs::read_to_string(fixture("calls")).unwrap();
    let (code, stdout, _, path) = check(&good);
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout.trim(),
        format!(
            "{}: plugin calls-sh 1.0.0, 1 offer(s), calls: reconcile, validate (failurePolicy Ignore), default, \
             hook check (before-reconcile example.com/Greeting, sync-enforce, order -1), \
             hook notify (after-finalize example.com/Farewell, async, order 0), \
             mutate (apps/v1/Deployment, v1/ConfigMap)\n  \
             offer Calls: children v1/ConfigMap, apps/v1/Deployment",
            path.display()
        )
    );
    let cases = [
        (
            "name: check",
            "name: Check",
            "hooks[0] (Check).name: \"Check\" is not a DNS label",
        ),
        (
            "name: notify",
            "name: check",
            "hooks[1] (check).name: hooks[0] has the same name",
        ),
        (
            "phase: after-finalize",
            "phase: afterFinalize",
            "afterFinalize",
        ),
        (
            "behaviour: async",
            "behaviour: asynchronous",
            "asynchronous",
        ),
        ("failurePolicy: Ignore", "failurePolicy: Allow", "Allow"),
        (
            "  timeoutSeconds: 1\n  failurePolicy",
            "  timeoutSeconds: 30\n  failurePolicy",
            "validate.timeoutSeconds is 30; it must be more than 0 and at most 10",
        ),
        ("    concurrency: 1\n", "    concurency: 1\n", "concurency"),
        (
            "children: [v1/ConfigMap, ",
            "children: [ConfigMap, ",
            "\"ConfigMap\" is not <apiVersion>/<Kind>; write apps/v1/Deployment, or v1/ConfigMap for the core group",
        ),
        (
            "kinds: [apps/v1/Deployment, v1/ConfigMap]",
            "kinds: []",
            "mutate.kinds: 0 are declared; name from 1 to 16 kinds",
        ),
        (
            "  command: [./mutate.sh]\n  timeoutSeconds: 1",
            "  command: [./mutate.sh]\n  timeoutSeconds: 0",
            "mutate.timeoutSeconds is 0",
        ),
    ];
    for (from, to, expected) in cases {
        assert!(good.contains(from), "{from}");
        let (code, _, stderr, path) = check(&good.replacen(from, to, 1));
        assert_eq!(code, Some(2), "{to}: {stderr}");
        assert!(
            stderr.starts_with(&format!("kplug-exec: manifest {}: ", path.display())),
            "{stderr}"
        );
        assert!(stderr.contains(expected), "{to}: {stderr}");
    }
}

#[tokio::test]
async fn the_sqlite_shell_example_passes_every_check_of_the_conformance_kit() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/database-table/sqlite-shell-plugin/plugin.yaml");
    let options = Options {
        socket_dir: dir.path().join("sockets"),
        // As a user would run it, with its data directory set.
        command: [
            vec![
                "env".to_owned(),
                format!(
                    "KPLUG_SQLITE_DATA_DIR={}",
                    dir.path().join("data").display()
                ),
            ],
            kplug_exec(&manifest),
        ]
        .concat(),
        only: None,
        cases: None,
        only_cases: Vec::new(),
        start_timeout: Duration::from_secs(30),
    };
    let outcomes = kplug_conformance::run(&options).await.unwrap();
    let report = kplug_conformance::report::text("kplug-exec sqlite-shell-plugin", &outcomes);
    for o in &outcomes {
        assert!(!matches!(o.verdict, Verdict::Fail(_)), "{report}");
        // It has no cases file, and no mutate command (the greet fixture
        // has the kit check one).
        if !["cases", "mutate"].contains(&o.check.name) {
            assert!(
                !matches!(o.verdict, Verdict::Skip(_)),
                "{}:\n{report}",
                o.check.name
            );
        }
    }
}
