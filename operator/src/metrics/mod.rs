//! Prometheus metrics, registered into the caller's
//! [`prometheus_client::registry::Registry`] and served on `/metrics` by the
//! binary. `manifests/monitoring/` has a Grafana dashboard and alerts built
//! on them (a test checks that every name they use exists).
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `kplug_build_info` | gauge | `version`, `protocol` | always 1: the operator's version and protocol |
//! | `kplug_plugins_registered` | gauge | | plugins registered and ready |
//! | `kplug_plugin_up` | gauge | `plugin` | 1 while the plugin is registered and ready, 0 after it went away |
//! | `kplug_plugin_calls_total` | counter | `plugin`, `call`, `outcome` | calls to plugins: `ok`, `retry`, `failed` (the plugin's answer), `invalid` (an answer that broke the protocol), `timeout`, `unavailable` (no process, or the connection failed), `error` (a gRPC error status) |
//! | `kplug_plugin_call_duration_seconds` | histogram | `plugin`, `call` | latency of calls to plugins; the top bucket is the call deadline |
//! | `kplug_plugin_calls_in_flight` | gauge | `plugin` | calls being served by the plugin |
//! | `kplug_plugin_calls_queued` | gauge | `plugin` | calls waiting for one of the plugin's in-flight permits (`--max-in-flight`) |
//! | `kplug_heartbeats_total` | counter | `result` | heartbeats received (`accepted`, `refused`) |
//! | `kplug_registrations_refused_total` | counter | `reason` | heartbeats refused, by reason |
//! | `kplug_reconcile_total` | counter | `outcome`, `plugin` | reconciles by outcome and the plugin that decided it (none while waiting); with `--selection all`, one per plugin called |
//! | `kplug_hook_calls_total` | counter | `plugin`, `hook`, `phase`, `behaviour`, `outcome` | hook calls: `ok`, `retry`, `failed` (the hook's answer), `invalid`, `timeout`, `unavailable`, `error`, `dropped` (an async hook whose queue was full) |
//! | `kplug_hook_queue_depth` | gauge | | async hook calls queued or running (at most `--async-hook-queue`) |
//! | `kplug_objects` | gauge | `ready` | objects of the managed kind by their `Ready` condition (`true`, `false`, `unknown`: not written yet), read from the cache at each scrape |
//! | `kplug_extension_watches` | gauge | | extension kinds watched |
//! | `kplug_leader` | gauge | | 1 while this replica reconciles (the binary's) |
//! | `kplug_admission_total` | counter | `webhook`, `plugin`, `outcome` | admission reviews (with `--webhook-addr`): per plugin asked, `allowed`, `defaulted`, `invalid` (field errors), `failed` (the call failed; refused under Fail), `ignored` (the call failed; admitted under Ignore); with `plugin` empty, `no_plugin_allowed`, `no_plugin_denied`, `bad_request` |

mod admission;
mod hooks;
mod plugins;
mod reconciles;

pub(crate) use admission::AdmissionMetrics;
pub(crate) use hooks::{HookId, HookMetrics};
pub(crate) use plugins::{CallOutcome, PluginMetrics};
pub(crate) use reconciles::{ReadyCounts, ReconcileMetrics};

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Registers `kplug_leader` (the binary's: 1 while this replica reconciles).
pub(crate) fn register_leader(registry: &mut Registry) -> Gauge {
    let leader = Gauge::default();
    registry.register(
        "kplug_leader",
        "1 while this replica reconciles (holds the leader Lease, or runs without leader election)",
        leader.clone(),
    );
    leader
}

/// The Prometheus text exposition of every metric in `registry`.
pub(crate) fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use serde_json::Value;

    use super::*;

    /// Every sample name the operator can expose, from the `# TYPE` lines
    /// of a registry holding all of its metrics, each with a series (a
    /// family without one is not exposed).
    fn exposed() -> BTreeSet<String> {
        let mut registry = Registry::default();
        let plugins = PluginMetrics::register(&mut registry, Duration::from_secs(30));
        plugins.set_plugin_up("p", true);
        plugins.observe_call("p", "Reconcile", Duration::from_millis(1));
        plugins.count_call("p", "Reconcile", CallOutcome::Ok);
        plugins.count_heartbeat(true);
        plugins.count_refusal("WrongUid");
        let _queued = plugins.queued("p");
        let _in_flight = plugins.in_flight("p");
        let reconciles = ReconcileMetrics::register(&mut registry);
        reconciles.count_reconcile("ok", "p");
        reconciles.count_objects_with("Widget", ReadyCounts::default);
        reconciles.hooks().count(
            HookId {
                plugin: "p",
                hook: "h",
                phase: "before-reconcile",
                behaviour: "async",
            },
            "ok",
        );
        register_leader(&mut registry);
        AdmissionMetrics::register(&mut registry).count("validating", "p", "allowed");
        let mut names = BTreeSet::new();
        for line in encode(&registry).lines() {
            let Some(declared) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            let (name, kind) = declared.split_once(' ').unwrap();
            let samples: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "info" => &["_info"],
                _ => &[""],
            };
            names.extend(samples.iter().map(|suffix| format!("{name}{suffix}")));
        }
        names
    }

    /// The `kplug_*` metric names in a PromQL expression.
    fn named_in(expr: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut rest = expr;
        while let Some(at) = rest.find("kplug_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            names.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
        names
    }

    fn expressions(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v) {
                        ("expr" | "query" | "definition", Value::String(e)) => out.push(e.clone()),
                        _ => expressions(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| expressions(v, out)),
            _ => {}
        }
    }

    fn unknown_names(exprs: &[String]) -> Vec<String> {
        let exposed = exposed();
        exprs
            .iter()
            .flat_map(|e| named_in(e))
            .filter(|name| !exposed.contains(name))
            .collect()
    }

    #[test]
    fn the_alerts_use_only_metrics_that_exist() {
        let rules: Value = serde_saphyr::from_str(include_str!(
            "../../../manifests/monitoring/prometheusrule.yaml"
        ))
        .unwrap();
        assert_eq!(rules["kind"], "PrometheusRule");
        let mut exprs = Vec::new();
        for group in rules["spec"]["groups"].as_array().unwrap() {
            for rule in group["rules"].as_array().unwrap() {
                let alert = rule["alert"].as_str().unwrap();
                for field in [
                    "/labels/severity",
                    "/annotations/summary",
                    "/annotations/description",
                ] {
                    assert!(rule.pointer(field).is_some(), "{alert} has no {field}");
                }
                exprs.push(rule["expr"].as_str().unwrap().to_owned());
            }
        }
        assert!(exprs.len() >= 8, "{exprs:?}");
        assert_eq!(unknown_names(&exprs), Vec::<String>::new());
    }

    #[test]
    fn the_dashboard_uses_only_metrics_that_exist() {
        let dashboard: Value = serde_json::from_str(include_str!(
            "../../../manifests/monitoring/grafana-dashboard.json"
        ))
        .unwrap();
        let mut exprs = Vec::new();
        expressions(&dashboard, &mut exprs);
        assert!(exprs.len() >= 12, "{exprs:?}");
        assert_eq!(unknown_names(&exprs), Vec::<String>::new());
        let ids: BTreeSet<_> = dashboard["panels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids.len(), dashboard["panels"].as_array().unwrap().len());
    }

    #[test]
    fn a_misspelt_metric_is_found() {
        assert_eq!(
            unknown_names(&["rate(kplug_plugin_call_total[5m]) + kplug_plugin_up > 0".into()]),
            vec!["kplug_plugin_call_total".to_owned()]
        );
    }
}
