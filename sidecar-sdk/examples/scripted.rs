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
//! Per object, the annotation `kplug.test/behavior` picks what Reconcile
//! does: `ok` (default), `fail`, `retry`, `hang`. `kplug.test/finalize-retries: N`
//! makes the first N Finalize calls for the object answer RETRY (1 s).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response};
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
        let Some(log) = &self.log else { return };
        let line = json!({
            "call": call,
            "plugin": self.name,
            "version": self.version,
            "name": request.name(),
            "generation": request.object().generation(),
            "spec": request.object().spec(),
            "extensions": request.extensions().iter().map(|e| json!({"kind": e.kind(), "name": e.name(), "spec": e.spec()})).collect::<Vec<_>>(),
        });
        let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(file, "{line}");
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
            _ => {}
        }
        let mut response = Response::ok()
            .message(format!("reconciled by {} {}", self.name, self.version))
            .status(json!({
                "observedSpec": request.object().spec(),
                "pluginVersion": self.version,
            }))
            .condition(
                "TableReady",
                Some(true),
                "Scripted",
                "the scripted plugin says so",
            )
            .event(
                "Reconciled",
                format!(
                    "{} {} reconciled {}",
                    self.name,
                    self.version,
                    request.name()
                ),
            );
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
    let info = PluginInfo::new(&name, &version)
        .description("scripted test plugin")
        .offer(offer);
    let plugin = Scripted {
        name,
        version,
        log,
        finalize_calls: Mutex::default(),
    };
    kplug_sidecar::serve(info, plugin).await
}
