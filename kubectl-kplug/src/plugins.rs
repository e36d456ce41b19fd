//! `kubectl kplug plugins`.

use crate::Error;
use crate::operator::Source;

/// `kubectl kplug plugins`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    source: Source,
}

/// Prints one line per registered plugin and replica.
///
/// # Errors
/// When no operator replica can be asked.
pub(crate) async fn run(client: &kube::Client, args: &Args) -> Result<(), Error> {
    let replicas = args.source.replicas(client).await?;
    let mut rows = vec![[
        "OPERATOR".to_owned(),
        "PLUGIN".into(),
        "VERSION".into(),
        "READY".into(),
        "LAST HEARTBEAT".into(),
        "OFFERS".into(),
        "HOOKS".into(),
    ]];
    for replica in &replicas {
        if replica.plugins.is_empty() {
            eprintln!(
                "{}: no plugin registered; plugins register on {}/registry.sock (a sidecar container of the operator's Pod)",
                replica.source, replica.socket_dir
            );
        }
        for plugin in &replica.plugins {
            let offers: Vec<String> = plugin
                .offers
                .iter()
                .map(|o| {
                    let base = o.base.as_ref().map(ToString::to_string).unwrap_or_default();
                    let extensions: Vec<String> =
                        o.extensions.iter().map(|e| e.kind.clone()).collect();
                    if extensions.is_empty() {
                        format!("{base}={}", o.implementation)
                    } else {
                        format!("{base}={} (+{})", o.implementation, extensions.join(", "))
                    }
                })
                .collect();
            rows.push([
                replica.source.clone(),
                plugin.name.clone(),
                plugin.version.clone(),
                plugin.ready.to_string(),
                format!("{:.0}s ago", plugin.last_heartbeat_seconds_ago),
                offers.join("; "),
                plugin
                    .hooks
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ]);
        }
    }
    out!("{}", table(&rows));
    Ok(())
}

/// Rows as aligned columns, like kubectl's tables.
pub(crate) fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:width$}   "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
