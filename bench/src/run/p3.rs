//! P3: waiting tables when their plugin registers, the plugin's SIGKILL
//! and its restart; the in-process baseline started over waiting tables as
//! the yardstick.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Bench, PLUGIN, SETTLE, converge_timeout, progress, until_listed};
use crate::apiserver;
use crate::objects::{self, Watch};
use crate::processes::{Operator, Process, Usage};
use crate::report::{Figure, Goal, Row};

impl Bench {
    /// P3: a plugin registering while `n` tables wait for it, its SIGKILL,
    /// and its restart.
    async fn reaction(self, n: usize) -> anyhow::Result<(Duration, Vec<Row>)> {
        let (ns, data) = self.place("p3").await?;
        let sockets = tempfile::tempdir()?;
        progress(&format!("P3: {n} tables waiting for the plugin"));
        let operator = self.setup.operator(&ns, sockets.path())?;
        let mut watch = Watch::tables(&self.client, &ns);
        objects::create(&self.client, &ns, 0..n).await?;
        watch
            .until(
                n,
                objects::is_seen,
                "seen by the operator",
                converge_timeout(n),
            )
            .await?;
        tokio::time::sleep(SETTLE).await;
        self.keep_sample(&ns, &format!("{ns}-waiting")).await?;
        let (waiting, plugin) = self
            .plugin_starts(&operator, &mut watch, &ns, &data, n)
            .await?;
        tokio::time::sleep(SETTLE).await;
        self.keep_sample(&ns, &ns).await?;
        let (removed, calls, _again) = self.kill_and_restart(&operator, plugin, &data).await?;
        operator.stop(&self.work).await?;
        self.stop().await?;
        Ok((waiting, rows(n, removed, calls)))
    }

    /// The plugin starts while `n` tables of `ns` wait for it: the time
    /// until they are all Ready, and the plugin.
    async fn plugin_starts(
        &self,
        operator: &Operator,
        watch: &mut Watch,
        ns: &str,
        data: &Path,
        n: usize,
    ) -> anyhow::Result<(Duration, Process)> {
        progress("P3: the plugin starts");
        let requests_before = apiserver::requests(&self.client).await?;
        self.keep_api_metrics(ns, "start").await?;
        let (api_before, operator_before) = (
            Usage::of(self.api_server)?.cpu,
            operator.process.usage()?.cpu,
        );
        let profile = self.api_profile(ns);
        let start = Instant::now();
        let plugin = self.setup.plugin(operator, data, "p3-first")?;
        let registered = until_listed(operator, true).await?;
        let last = watch
            .until(n, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        let waiting = last - start;
        let requests = self.requests_since(&requests_before, ns, "ready").await?;
        if let Some(profile) = profile {
            profile.await??;
        }
        progress(&format!(
            "P3: registered after {:?}, all Ready after {waiting:?} ({}), {requests} API requests; \
             CPU: the API server {:?}, the operator {:?}, the plugin {:?}",
            registered - start,
            watch.pace(start),
            Usage::of(self.api_server)?.cpu - api_before,
            operator.process.usage()?.cpu - operator_before,
            plugin.usage()?.cpu,
        ));
        Ok((waiting, plugin))
    }

    /// SIGKILL to `plugin`, then the plugin started again with nothing
    /// changed: how long the operator took to remove it, the Reconcile
    /// calls the restart caused, and the restarted plugin (kept running
    /// until the operator stops).
    async fn kill_and_restart(
        &self,
        operator: &Operator,
        plugin: Process,
        data: &Path,
    ) -> anyhow::Result<(Duration, f64, Process)> {
        let reconciles = [("plugin", PLUGIN), ("call", "Reconcile")];
        let calls_before = operator
            .metric("kplug_plugin_calls_total", &reconciles)
            .await?;
        progress("P3: SIGKILL to the plugin");
        let killed = Instant::now();
        plugin.kill().await?;
        let removed = until_listed(operator, false).await? - killed;
        progress(&format!(
            "P3: removed after {removed:?}; the plugin starts again"
        ));
        let again = self.setup.plugin(operator, data, "p3-again")?;
        until_listed(operator, true).await?;
        tokio::time::sleep(SETTLE * 2).await;
        let calls = operator
            .metric("kplug_plugin_calls_total", &reconciles)
            .await?
            - calls_before;
        Ok((removed, calls, again))
    }

    /// What P3's first figure costs without kplug: the in-process baseline
    /// started over `n` tables that wait for it.
    async fn waiting_baseline(self, n: usize) -> anyhow::Result<Duration> {
        let (ns, data) = self.place("p3-baseline").await?;
        progress(&format!("P3: the baseline started over {n} new tables"));
        let mut watch = Watch::tables(&self.client, &ns);
        objects::create(&self.client, &ns, 0..n).await?;
        let requests_before = apiserver::requests(&self.client).await?;
        self.keep_api_metrics(&ns, "start").await?;
        let api_before = Usage::of(self.api_server)?.cpu;
        let profile = self.api_profile(&ns);
        let start = Instant::now();
        let baseline = self.setup.baseline(&ns, &data)?;
        let last = watch
            .until(n, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        let requests = self.requests_since(&requests_before, &ns, "ready").await?;
        if let Some(profile) = profile {
            profile.await??;
        }
        progress(&format!(
            "P3: the baseline: all Ready after {:?} ({}), {requests} API requests; \
             CPU: the API server {:?}, the baseline {:?}",
            last - start,
            watch.pace(start),
            Usage::of(self.api_server)?.cpu - api_before,
            baseline.usage()?.cpu,
        ));
        self.keep_sample(&ns, &ns).await?;
        baseline.stop().await?;
        self.stop().await?;
        Ok(last - start)
    }
}

/// P3's rows of the SIGKILL and the restart.
fn rows(n: usize, removed: Duration, calls: f64) -> Vec<Row> {
    let row = |case: String, measure, kplug, baseline, goal| Row {
        part: "P3",
        case,
        measure,
        kplug,
        baseline,
        goal,
    };
    vec![
        row(
            "plugin SIGKILLed → removed".into(),
            "time",
            Figure::Time(removed),
            None,
            Goal::Under(Figure::Time(Duration::from_millis(100))),
        ),
        row(
            format!("plugin restarted, {n} tables unchanged"),
            "Reconcile calls",
            Figure::Count(calls as u64),
            None,
            Goal::Zero,
        ),
    ]
}

/// P3 `rounds` times, alternating which of kplug and the in-process
/// baseline goes first: each on a fresh API server, and the machine's
/// noise from one run to the next was as large as the gap measured. The
/// time is the median of the rounds; the SIGKILL and restart rows are the
/// last round's.
pub(super) async fn waiting_rounds(
    work: &Path,
    n: usize,
    rounds: usize,
) -> anyhow::Result<Vec<Row>> {
    let (mut kplug, mut in_process, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 1 {
            in_process.push(Bench::start(work).await?.waiting_baseline(n).await?);
        }
        let (waiting, rows) = Bench::start(work).await?.reaction(n).await?;
        kplug.push(waiting);
        rest = rows;
        if round % 2 == 0 {
            in_process.push(Bench::start(work).await?.waiting_baseline(n).await?);
        }
        progress(&format!(
            "P3 round {}: kplug {waiting:?}, the in-process controller {:?}",
            round + 1,
            in_process.last().copied().unwrap_or_default()
        ));
    }
    // The median: one run in a few is far off either way (a baseline
    // round took 9.4 s against 5.0–6.4 s for the others), and a mean
    // would follow it.
    let median = |all: &mut Vec<Duration>| {
        all.sort_unstable();
        let mid = all.len() / 2;
        if all.len().is_multiple_of(2) {
            (all[mid - 1] + all[mid]) / 2
        } else {
            all[mid]
        }
    };
    let mut rows = vec![Row {
        part: "P3",
        case: format!(
            "plugin started → {n} waiting tables Ready (baseline: the in-process controller started over {n} new tables)"
        ),
        measure: "time",
        kplug: Figure::Time(median(&mut kplug)),
        baseline: Some(Figure::Time(median(&mut in_process))),
        goal: Goal::Ratio(1.15),
    }];
    rows.extend(rest);
    Ok(rows)
}
