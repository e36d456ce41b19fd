//! What the demo prints: its steps, the table converging, its status, the
//! real SQLite schema and the Events.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};
use serde_json::Value;

/// Prints the heading of step `n` of 6.
pub(crate) fn step(n: u32, text: &str) {
    // Bold for a person at a terminal; plain text in a pipe or a log.
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        println!("\n\x1b[1m[{n}/6] {text}\x1b[0m");
    } else {
        println!("\n[{n}/6] {text}");
    }
}

fn condition(obj: &DynamicObject, type_: &str) -> (String, String) {
    obj.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_owned(),
                c["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .unwrap_or_default()
}

fn print_row(obj: &DynamicObject) {
    let implementation = obj
        .data
        .pointer("/status/implementation")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let (ready, reason) = condition(obj, "Ready");
    println!(
        "    {:<8} {:<16} {:<6} {}",
        obj.name_any(),
        implementation,
        ready,
        reason
    );
}

/// Waits until `name` is Ready at `generation` or later, printing each
/// change of its Ready condition.
pub(crate) async fn wait_ready(
    api: &Api<DynamicObject>,
    name: &str,
    generation: i64,
) -> Result<DynamicObject> {
    let started = Instant::now();
    let mut last = String::new();
    println!("    NAME     IMPLEMENTATION   READY  REASON");
    loop {
        let obj = api.get(name).await?;
        let (ready, reason) = condition(&obj, "Ready");
        let observed = obj
            .data
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let line = format!("{ready}/{reason}/{observed}");
        if line != last {
            print_row(&obj);
            last = line;
        }
        if ready == "True" && observed >= generation {
            return Ok(obj);
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("{name} did not become Ready within 60s; see target/demo/*.log");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The `users` table and its indexes, as SQLite keeps them (one statement
/// per line).
fn sqlite_schema(path: &Path) -> Result<String> {
    let conn = rusqlite::Connection::open(path)?;
    let mut stmt = conn.prepare(
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'users' AND sql IS NOT NULL \
         ORDER BY type = 'index', name",
    )?;
    let statements: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(statements.join("\n      "))
}

/// Prints the `users` table as SQLite keeps it, under `heading`, when the
/// database exists.
pub(crate) fn table(db: &Path, heading: &str) -> Result<()> {
    if db.exists() {
        println!("{heading}\n      {}", sqlite_schema(db)?);
    }
    Ok(())
}

/// Prints the Events recorded for `name` in `ns`.
pub(crate) async fn events(client: &Client, ns: &str, name: &str) -> Result<()> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    for e in events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
    {
        println!(
            "    {:<8} {:<24} {}",
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.note.unwrap_or_default()
        );
    }
    Ok(())
}

/// The status as `kubectl get -o yaml` would show it, conditions as a table.
pub(crate) fn print_status(obj: &DynamicObject) -> Result<()> {
    let mut status = obj.data["status"].clone();
    let conditions = status.as_object_mut().and_then(|s| s.remove("conditions"));
    println!(
        "\n    status of {} (conditions below):\n{}",
        obj.name_any(),
        indent(&serde_json::to_string_pretty(&status)?)
    );
    println!("    CONDITION            STATUS  REASON               MESSAGE");
    for c in conditions
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
        println!(
            "    {:<20} {:<7} {:<20} {}",
            s("type"),
            s("status"),
            s("reason"),
            s("message")
        );
    }
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("      {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
