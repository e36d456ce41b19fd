//! A plugin whose behaviour is scripted per object, used by the operator's
//! end-to-end tests; it also shows extension statuses, conditions, events
//! and finalize.
//!
//! Configured by environment:
//! - `SCRIPTED_NAME` (default `postgresql`), `SCRIPTED_VERSION` (`1.0.0`),
//!   `SCRIPTED_IMPLEMENTATION` (`PostgreSQL`), `SCRIPTED_BASE`
//!   (`myorg.org/DatabaseTable`), `SCRIPTED_EXTENSIONS` (comma-separated
//!   `group/Kind`, default `myorg.org/DatabaseTablePostgreSqlExtension`);
//! - `SCRIPTED_LOG`: a file to which one JSON line per call is appended
//!   (`{"call", "name", "generation", "spec", "extensions"}`).
//!
//! - `SCRIPTED_HOOKS`: hooks it declares for the base kind, comma-separated
//!   `name:phase:behaviour:order` (e.g. `backup:before-reconcile:sync-enforce:10`);
//! - `SCRIPTED_RECONCILE_DEADLINE`: seconds; declares a call policy for
//!   Reconcile with that deadline.
//!
//! Per object, the annotation `kplug.test/behavior` picks what Reconcile
//! does: `ok` (default), `fail`, `retry`, `hang`, `sleep-<seconds>`.
//! `kplug.test/extra-status: KEY` adds `KEY-<name>: "scripted"` to the
//! status it answers (and leaving the annotation out leaves the field out).
//! `kplug.test/finalize-retries: N` makes the first N Finalize calls for the
//! object answer RETRY (1 s). `kplug.test/hook-<name>` picks what hook
//! `<name>` does: `ok` (default; it writes `{"<name>": {"phase": ...}}` as
//! its status), `fail`, `hang`.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use kplug_sidecar::{
    Behaviour, BoxError, Call, CallPolicy, Hook, HookCall, Offer, Phase, Plugin, PluginInfo,
    Request, Response,
};
use serde_json::json;

struct Scripted {
    name: String,
    version: String,
    log: Option<Mutex<std::fs::File>>,
    finalize_calls: Mutex<HashMap<String, u32>>,
}

fn annotation<'a>(request: &'a Request, key: &str) -> Option<&'a str> {
    request
        .object()
        .raw()
        .pointer("/metadata/annotations")?
        .get(key)?
        .as_str()
}

impl Scripted {
    fn record(&self, call: &str, request: &Request) {
        self.record_line(json!({
            "call": call,
            "plugin": self.name,
            "version": self.version,
            "name": request.name(),
            "generation": request.object().generation(),
            "spec": request.object().spec(),
            "extensions": request.extensions().iter().map(|e| json!({"kind": e.kind(), "name": e.name(), "spec": e.spec()})).collect::<Vec<_>>(),
        }));
    }

    fn record_line(&self, line: serde_json::Value) {
        let Some(log) = &self.log else { return };
        let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
        // One write(2) per line: several plugin processes append to one log,
        // and `writeln!` writes the line and its newline separately, so two
        // processes' lines could interleave into two unreadable ones.
        let _ = file.write_all(format!("{line}\n").as_bytes());
    }
}

impl Plugin for Scripted {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        self.record("Reconcile", &request);
        match annotation(&request, "kplug.test/behavior").unwrap_or("ok") {
            "fail" => return Ok(Response::failed("scripted failure")),
            "retry" => return Ok(Response::retry(Duration::from_secs(1)).message("scripted retry")),
            "hang" => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            other => {
                if let Some(seconds) = other.strip_prefix("sleep-").and_then(|s| s.parse().ok()) {
                    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                }
            }
        }
        let mut status = json!({
            "observedSpec": request.object().spec(),
            "pluginVersion": self.version,
        });
        if let Some(key) = annotation(&request, "kplug.test/extra-status") {
            status[format!("{key}-{}", self.name)] = json!("scripted");
        }
        let mut response = Response::ok()
            .message(format!("reconciled by {} {}", self.name, self.version))
            .status(status)
            .condition(
                "TableReady",
                Some(true),
                "Scripted",
                "the scripted plugin says so",
            );
        // An Event is news: only for a spec it has not reported yet, as a
        // well-behaved plugin says only what changed (a resync or an
        // operator's restart calls it again over what it already reported).
        let reported = request.object().raw().pointer("/status/observedSpec");
        if reported != request.object().raw().get("spec") {
            response = response.event(
                "Reconciled",
                format!(
                    "{} {} reconciled {}",
                    self.name,
                    self.version,
                    request.name()
                ),
            );
        }
        for extension in request.extensions() {
            response = response.extension_status(
                extension,
                json!({ "seenBy": self.name, "specSeen": extension.spec() }),
            );
        }
        Ok(response)
    }

    async fn finalize(&self, request: Request) -> Result<Response, BoxError> {
        self.record("Finalize", &request);
        let retries: u32 = annotation(&request, "kplug.test/finalize-retries")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut calls = self
            .finalize_calls
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let count = calls.entry(request.name().to_owned()).or_default();
        *count += 1;
        if *count <= retries {
            return Ok(Response::retry(Duration::from_secs(1))
                .message(format!("finalize attempt {count} of {}", retries + 1)));
        }
        Ok(Response::ok().message("dropped nothing: scripted"))
    }

    async fn hook(&self, call: HookCall) -> Result<Response, BoxError> {
        let request = call.request();
        let phase = call.phase().map(Phase::name).unwrap_or("unknown");
        self.record_line(json!({
            "call": "Hook",
            "plugin": self.name,
            "hook": call.hook(),
            "phase": phase,
            "name": request.name(),
            "implementation": request.implementation(),
            "outcome": call.outcome().map(|o| o.as_str_name()),
            "message": call.message(),
        }));
        let key = format!("kplug.test/hook-{}", call.hook());
        match annotation(request, &key).unwrap_or("ok") {
            "fail" => Ok(Response::failed(format!(
                "scripted failure of hook {}",
                call.hook()
            ))),
            "hang" => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(Response::ok())
            }
            _ => Ok(Response::ok()
                .message(format!("hook {} ran", call.hook()))
                .status(json!({ call.hook(): { "phase": phase } }))),
        }
    }
}

/// `name:phase:behaviour:order`, as in `SCRIPTED_HOOKS`.
fn parse_hook(spec: &str, group: &str, kind: &str) -> Hook {
    let parts: Vec<&str> = spec.split(':').collect();
    let [name, phase, behaviour, order] = parts[..] else {
        panic!("SCRIPTED_HOOKS entry {spec:?}: expected name:phase:behaviour:order");
    };
    let phase = [
        Phase::BeforeReconcile,
        Phase::AfterReconcile,
        Phase::BeforeFinalize,
        Phase::AfterFinalize,
    ]
    .into_iter()
    .find(|p| p.name() == phase)
    .unwrap_or_else(|| panic!("SCRIPTED_HOOKS entry {spec:?}: unknown phase {phase:?}"));
    let behaviour = match behaviour {
        "sync-enforce" => Behaviour::SyncEnforce,
        "sync-bypass" => Behaviour::SyncBypass,
        "async" => Behaviour::Async,
        other => panic!("SCRIPTED_HOOKS entry {spec:?}: unknown behaviour {other:?}"),
    };
    let order = order
        .parse()
        .unwrap_or_else(|_| panic!("SCRIPTED_HOOKS entry {spec:?}: the order must be a number"));
    Hook::new(name, group, kind, phase, behaviour).order(order)
}

fn env(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_owned())
}

fn group_kind(s: &str) -> (String, String) {
    match s.rsplit_once('/') {
        Some((g, k)) => (g.to_owned(), k.to_owned()),
        None => (String::new(), s.to_owned()),
    }
}

#[tokio::main]
async fn main() -> Result<(), kplug_sidecar::Error> {
    let name = env("SCRIPTED_NAME", "postgresql");
    let version = env("SCRIPTED_VERSION", "1.0.0");
    let (group, kind) = group_kind(&env("SCRIPTED_BASE", "myorg.org/DatabaseTable"));
    let mut offer = Offer::new(&group, &kind, &env("SCRIPTED_IMPLEMENTATION", "PostgreSQL"));
    for ext in env(
        "SCRIPTED_EXTENSIONS",
        "myorg.org/DatabaseTablePostgreSqlExtension",
    )
    .split(',')
    .filter(|s| !s.is_empty())
    {
        let (g, k) = group_kind(ext);
        offer = offer.extension(&g, &k);
    }
    let log = std::env::var_os("SCRIPTED_LOG").map(|path| {
        Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("SCRIPTED_LOG must be writable"),
        )
    });
    let mut info = PluginInfo::new(&name, &version)
        .description("scripted test plugin")
        .offer(offer);
    for spec in env("SCRIPTED_HOOKS", "")
        .split(',')
        .filter(|s| !s.is_empty())
    {
        info = info.hook(parse_hook(spec, &group, &kind));
    }
    if let Ok(seconds) = std::env::var("SCRIPTED_RECONCILE_DEADLINE") {
        let seconds: f64 = seconds
            .parse()
            .expect("SCRIPTED_RECONCILE_DEADLINE must be a number of seconds");
        info = info.call_policy(
            CallPolicy::new(Call::Reconcile).deadline(Duration::from_secs_f64(seconds)),
        );
    }
    let plugin = Scripted {
        name,
        version,
        log,
        finalize_calls: Mutex::default(),
    };
    kplug_sidecar::serve(info, plugin).await
}
