//! The table `make bench` prints: each figure of kplug, its baseline from
//! the same run, their ratio, and the goal it is held to.

use std::fmt::Write as _;
use std::time::Duration;

/// A measured quantity.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Figure {
    /// Elapsed or CPU time.
    Time(Duration),
    /// A number of things (API requests, calls).
    Count(u64),
    /// Memory.
    Bytes(u64),
    /// A latency in microseconds (P1's table).
    Micros(f64),
    /// Calls per second (P1's table).
    Rate(f64),
}

impl Figure {
    fn value(self) -> f64 {
        match self {
            Self::Time(d) => d.as_secs_f64(),
            Self::Count(n) | Self::Bytes(n) => n as f64,
            Self::Micros(v) | Self::Rate(v) => v,
        }
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Time(d) if d < Duration::from_secs(1) => {
                write!(f, "{:.1} ms", d.as_secs_f64() * 1e3)
            }
            Self::Time(d) => write!(f, "{:.2} s", d.as_secs_f64()),
            Self::Count(n) => write!(f, "{n}"),
            Self::Bytes(n) => write!(f, "{:.1} MiB", n as f64 / (1024.0 * 1024.0)),
            Self::Micros(v) => write!(f, "{v:.1} µs"),
            Self::Rate(v) => write!(f, "{v:.0}/s"),
        }
    }
}

/// What a figure is held to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Goal {
    /// At most this many times the baseline.
    Ratio(f64),
    /// At least this many times the baseline (a throughput).
    RatioAtLeast(f64),
    /// Below this.
    Under(Figure),
    /// Nothing at all.
    Zero,
    /// Reported, not judged.
    None,
}

/// One line of the table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// `P2`, `P3`, `P4`.
    pub(crate) part: &'static str,
    /// What was done.
    pub(crate) case: String,
    /// What was measured.
    pub(crate) measure: &'static str,
    pub(crate) kplug: Figure,
    pub(crate) baseline: Option<Figure>,
    pub(crate) goal: Goal,
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        let baseline = self.baseline?.value();
        (baseline > 0.0).then(|| self.kplug.value() / baseline)
    }

    fn met(&self) -> Option<bool> {
        // Nothing against nothing (e.g. no CPU at rest) meets any ratio.
        let both_zero =
            self.kplug.value() == 0.0 && self.baseline.is_some_and(|b| b.value() == 0.0);
        match self.goal {
            Goal::Ratio(_) | Goal::RatioAtLeast(_) if both_zero => Some(true),
            Goal::Ratio(at_most) => self.ratio().map(|r| r <= at_most),
            Goal::RatioAtLeast(at_least) => self.ratio().map(|r| r >= at_least),
            Goal::Under(limit) => Some(self.kplug.value() < limit.value()),
            Goal::Zero => Some(self.kplug.value() == 0.0),
            Goal::None => None,
        }
    }
}

/// P1's rows, read from the polyglot benchmark's table (`polyglot.md`,
/// rows `| case | payload | metric | kplug | bare | bare+JSON | ratio to
/// bare | ratio to bare+JSON |`). Against the bare server the goal is
/// 1.15×: at most that at p50, at least 1/1.15 of the throughput; p99 is
/// reported, not judged. Against the bare server with the standard JSON
/// library, which does the SDK's decoding and encoding by hand, the goal is
/// 1.0× at p50 and in throughput. A table without such rows (one of an
/// older shape) is an error: it would drop P1 from the report unseen.
pub(crate) fn p1_rows(polyglot: &str) -> anyhow::Result<Vec<Row>> {
    let rows: Vec<Row> = polyglot
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            let [case, payload, metric, kplug, bare, bare_json, _, _] = cells.as_slice() else {
                return None;
            };
            let figure = |cell: &str| -> Option<Figure> {
                match cell.strip_suffix(" µs") {
                    Some(micros) => micros.parse().ok().map(Figure::Micros),
                    None => cell.parse().ok().map(Figure::Rate),
                }
            };
            let (kplug, bare, bare_json) = (figure(kplug)?, figure(bare)?, figure(bare_json)?);
            let (against_bare, against_json) = match *metric {
                "p50" => (
                    ("p50 vs bare", Goal::Ratio(1.15)),
                    Some(("p50 vs bare+JSON", Goal::Ratio(1.0))),
                ),
                "p99" => (("p99 vs bare", Goal::None), None),
                _ => (
                    (
                        "throughput vs bare, 16 in flight",
                        Goal::RatioAtLeast(1.0 / 1.15),
                    ),
                    Some((
                        "throughput vs bare+JSON, 16 in flight",
                        Goal::RatioAtLeast(1.0),
                    )),
                ),
            };
            let row = |(measure, goal), baseline| Row {
                part: "P1",
                case: format!("{case}, {payload}"),
                measure,
                kplug,
                baseline: Some(baseline),
                goal,
            };
            let json = against_json.map(|m| row(m, bare_json));
            Some([Some(row(against_bare, bare)), json])
        })
        .flatten()
        .flatten()
        .collect();
    anyhow::ensure!(
        !rows.is_empty(),
        "no rows `| case | payload | metric | kplug | bare | bare+JSON | ratio to bare | \
         ratio to bare+JSON |`: run make bench-polyglot again"
    );
    Ok(rows)
}

/// The markdown table of `rows`, under a heading and `caption`.
pub(crate) fn markdown(caption: &str, rows: &[Row]) -> String {
    let mut out = String::from("# kplug against what users would pick instead\n\n");
    out.push_str(caption);
    out.push_str(
        "\n\n| | case | measure | kplug | baseline | ratio | goal | met |\n\
         |---|---|---|---:|---:|---:|---|---|\n",
    );
    for row in rows {
        let baseline = row
            .baseline
            .map_or_else(|| "—".to_owned(), |b| b.to_string());
        let ratio = row
            .ratio()
            .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}"));
        let goal = match row.goal {
            Goal::Ratio(r) => format!("≤ {r}×"),
            Goal::RatioAtLeast(r) => format!("≥ {r:.2}×"),
            Goal::Under(limit) => format!("< {limit}"),
            Goal::Zero => "0".to_owned(),
            Goal::None => "—".to_owned(),
        };
        let met = match row.met() {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {baseline} | {ratio} | {goal} | {met} |",
            row.part, row.case, row.measure, row.kplug
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kplug: Figure, baseline: Option<Figure>, goal: Goal) -> Row {
        Row {
            part: "P2",
            case: "c".into(),
            measure: "m",
            kplug,
            baseline,
            goal,
        }
    }

    #[test]
    fn goals_are_judged_against_the_baseline_or_the_limit() {
        let secs = |s: f64| Figure::Time(Duration::from_secs_f64(s));
        assert_eq!(
            row(secs(2.2), Some(secs(2.0)), Goal::Ratio(1.15)).met(),
            Some(true)
        );
        assert_eq!(
            row(secs(2.4), Some(secs(2.0)), Goal::Ratio(1.15)).met(),
            Some(false)
        );
        assert_eq!(
            row(secs(0.05), None, Goal::Under(secs(0.1))).met(),
            Some(true)
        );
        assert_eq!(row(Figure::Count(3), None, Goal::Zero).met(), Some(false));
        assert_eq!(row(Figure::Count(3), None, Goal::None).met(), None);
        let nothing = Some(Figure::Time(Duration::ZERO));
        assert_eq!(row(secs(0.0), nothing, Goal::Ratio(1.5)).met(), Some(true));
        assert_eq!(
            row(secs(0.01), nothing, Goal::Ratio(1.5)).met(),
            None,
            "no ratio to judge"
        );
    }

    #[test]
    fn p1_rows_come_from_the_polyglot_table_with_their_goals() {
        let polyglot = "| case | payload | metric | kplug | bare | bare+JSON | ratio to bare | ratio to bare+JSON |\n\
                        |---|---|---|---:|---:|---:|---:|---:|\n\
                        | Rust SDK vs tonic (+ serde_json) | 64 B | p50 | 95.4 µs | 55.3 µs | 90.0 µs | 1.73 | 1.06 |\n\
                        | Rust SDK vs tonic (+ serde_json) | 64 B | p99 | 195.0 µs | 155.3 µs | 190.0 µs | 1.26 | 1.03 |\n\
                        | Rust SDK vs tonic (+ serde_json) | 64 B | calls/s, 16 in flight | 35677 | 37979 | 35000 | 0.94 | 1.02 |\n";
        let rows = p1_rows(polyglot).unwrap();
        let measures: Vec<_> = rows.iter().map(|r| r.measure).collect();
        assert_eq!(
            measures,
            [
                "p50 vs bare",
                "p50 vs bare+JSON",
                "p99 vs bare",
                "throughput vs bare, 16 in flight",
                "throughput vs bare+JSON, 16 in flight"
            ]
        );
        assert_eq!(rows[0].case, "Rust SDK vs tonic (+ serde_json), 64 B");
        assert_eq!(rows[0].met(), Some(false), "1.73 > 1.15");
        assert_eq!(rows[1].met(), Some(false), "1.06 > 1.0");
        assert_eq!(rows[2].met(), None, "p99 is not judged");
        assert_eq!(rows[3].met(), Some(true), "0.94 ≥ 1/1.15");
        assert_eq!(rows[4].met(), Some(true), "1.02 ≥ 1.0");
        let table = markdown("", &rows);
        assert!(
            table.contains("| 35677/s | 37979/s | 0.94 | ≥ 0.87× | yes |"),
            "{table}"
        );
        assert!(
            table.contains("| 95.4 µs | 90.0 µs | 1.06 | ≤ 1× | **no** |"),
            "{table}"
        );
        let older = "| case | payload | metric | kplug | baseline | ratio |\n\
                     | Rust SDK / tonic | 64 B | p50 | 95.4 µs | 55.3 µs | 1.73 |\n";
        assert!(p1_rows(older).is_err(), "a table of the older shape");
    }

    #[test]
    fn the_table_shows_ratio_goal_and_verdict() {
        let rows = [row(
            Figure::Count(120),
            Some(Figure::Count(100)),
            Goal::Ratio(1.15),
        )];
        let table = markdown("caption", &rows);
        assert!(
            table.contains("| P2 | c | m | 120 | 100 | 1.20 | ≤ 1.15× | **no** |"),
            "{table}"
        );
    }
}
