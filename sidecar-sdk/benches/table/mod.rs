//! The table `polyglot` prints and writes: per language and payload, each
//! figure of the three servers and the SDK's ratio to each baseline.
//! `kplug-bench` reads its rows into `make bench`'s report (bench/src/report.rs).

use std::fmt::Write as _;
use std::time::Duration;

use super::Config;
use super::measure::{Row, Samples};

fn size_label(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// The table's explanation, above it.
fn caption(config: &Config) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "Unix socket, tonic client, each server a process of its own; {} sequential calls \
         (latency) and {} calls with {} in flight (throughput) per server and payload, in {} \
         rounds that rotate the servers' order; {cores} cores. kplug: the SDK's echo plugin \
         (answers `{{\"echo\": spec}}`); bare: the gRPC library alone, copying the object's \
         bytes into the status; bare+JSON: the gRPC library with the standard JSON library \
         (in parentheses), answering `{{\"echo\": spec}}` as a plugin written by hand would. \
         ratio = kplug / that server: above 1 the SDK is slower in latency, below 1 it is \
         slower in throughput.",
        config.calls, config.inflight_calls, config.inflight, config.rounds
    )
}

/// One line of the table: the three servers' figures, then the ratios.
fn line(
    out: &mut String,
    row: &Row,
    metric: &str,
    figures: [f64; 3],
    show: impl Fn(f64) -> String,
) {
    let [kplug, bare, bare_json] = figures;
    writeln!(
        out,
        "| {} | {} | {metric} | {} | {} | {} | {:.2} | {:.2} |",
        row.case,
        size_label(row.size),
        show(kplug),
        show(bare),
        show(bare_json),
        kplug / bare,
        kplug / bare_json,
    )
    .unwrap();
}

/// The markdown table of `rows`, under a heading and the caption.
pub(crate) fn markdown(config: &Config, rows: &[Row]) -> String {
    let mut out =
        String::from("# Reconcile round trip: each SDK vs bare gRPC, with and without JSON\n\n");
    out.push_str(&caption(config));
    out.push_str(
        "\n\n| case | payload | metric | kplug | bare | bare+JSON | ratio to bare | ratio to bare+JSON |\n\
         |---|---|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let servers: [&Samples; 3] = [&row.kplug, &row.bare, &row.bare_json];
        for (metric, p) in [("p50", 50), ("p99", 99)] {
            let figures = servers.map(|s| s.percentile(p).as_secs_f64());
            line(&mut out, row, metric, figures, |secs| {
                micros(Duration::from_secs_f64(secs))
            });
        }
        let metric = format!("calls/s, {} in flight", config.inflight);
        let figures = servers.map(Samples::throughput);
        line(&mut out, row, &metric, figures, |rate| format!("{rate:.0}"));
    }
    out
}
