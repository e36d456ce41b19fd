//! P4: the operator's start over converged tables, and its footprint,
//! against a bare reflector of the same objects.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::{AT_REST, Bench, SETTLE, converge_timeout, progress, until_listed, until_quiet};
use crate::apiserver;
use crate::objects::{self, Watch};
use crate::processes::Usage;
use crate::report::{Figure, Goal, Row};

/// What one side of P4 (or P5) measured.
pub(super) struct Footprint {
    /// From its start until caught up.
    pub(super) usage: Usage,
    /// API requests over the same window.
    pub(super) requests: u64,
    /// CPU time over [`AT_REST`] afterwards.
    pub(super) at_rest: Duration,
    /// Writes to ConfigMaps over the same window (P5's children).
    pub(super) child_writes: u64,
}

impl Bench {
    /// P4: the operator over `n` tables and `n` extensions, against a bare
    /// reflector of them.
    pub(super) async fn footprint(self, n: usize) -> anyhow::Result<Vec<Row>> {
        let (ns, data) = self.place("p4").await?;
        let sockets = tempfile::tempdir()?;
        progress(&format!("P4: {n} tables and {n} extensions"));
        objects::create(&self.client, &ns, 0..n).await?;
        let mut watch = Watch::tables(&self.client, &ns);
        let (operator, plugin) = self.kplug(&ns, &data, sockets.path()).await?;
        watch
            .until(n, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        operator.stop(&self.work).await?;
        let bare = self.bare_reflector(&ns, 2 * n, false).await?;
        let kplug = self.operator_restarted(&ns, sockets.path(), &[]).await?;
        plugin.stop().await?;
        self.stop().await?;
        Ok(rows(n, &kplug, &bare))
    }

    /// The bare reflector over the tables and extensions of `ns` (and with
    /// `children`, their ConfigMaps): `objects` in all.
    pub(super) async fn bare_reflector(
        &self,
        ns: &str,
        objects: usize,
        children: bool,
    ) -> anyhow::Result<Footprint> {
        progress("the bare reflector");
        let requests_before = apiserver::requests(&self.client).await?;
        let synced = self.work.join(format!("reflector-{ns}.synced"));
        let reflector = self.setup.reflector(ns, objects, &synced, children)?;
        let deadline = Instant::now() + converge_timeout(objects);
        while !synced.exists() {
            if Instant::now() > deadline {
                bail!("the reflector did not hold {objects} objects in time");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(SETTLE).await;
        let usage = reflector.usage()?;
        let requests = self
            .requests_since(&requests_before, ns, "reflector")
            .await?;
        tokio::time::sleep(AT_REST).await;
        let at_rest = reflector.usage()?.cpu - usage.cpu;
        reflector.stop().await?;
        Ok(Footprint {
            usage,
            requests,
            at_rest,
            child_writes: 0,
        })
    }

    /// The operator (with `args`) started again over the converged objects
    /// of `ns` (its plugin still running), once caught up.
    pub(super) async fn operator_restarted(
        &self,
        ns: &str,
        sockets: &Path,
        args: &[&str],
    ) -> anyhow::Result<Footprint> {
        progress("the operator, restarted over them");
        let requests_before = apiserver::requests(&self.client).await?;
        let operator = self.setup.operator_with(ns, sockets, args)?;
        until_listed(&operator, true).await?;
        let caught_up = until_quiet(&operator).await?;
        progress(&format!("the operator caught up in {caught_up:?}"));
        let usage = operator.process.usage()?;
        let requests = self.requests_since(&requests_before, ns, "restart").await?;
        let child_writes = apiserver::requests(&self.client)
            .await?
            .writes_since(&requests_before, "configmaps");
        tokio::time::sleep(AT_REST).await;
        let at_rest = operator.process.usage()?.cpu - usage.cpu;
        operator.stop(&self.work).await?;
        Ok(Footprint {
            usage,
            requests,
            at_rest,
            child_writes,
        })
    }
}

/// P4's rows: the operator (`kplug`) against the bare reflector.
fn rows(n: usize, kplug: &Footprint, bare: &Footprint) -> Vec<Row> {
    let case = format!("{n} tables + {n} extensions");
    let row = |measure, kplug: Figure, bare: Figure, goal| Row {
        part: "P4",
        case: case.clone(),
        measure,
        kplug,
        baseline: Some(bare),
        goal,
    };
    vec![
        row(
            "RSS",
            Figure::Bytes(kplug.usage.rss),
            Figure::Bytes(bare.usage.rss),
            Goal::Ratio(1.5),
        ),
        row(
            "CPU at rest, 10 s",
            Figure::Time(kplug.at_rest),
            Figure::Time(bare.at_rest),
            Goal::Ratio(1.5),
        ),
        row(
            "CPU from start until caught up",
            Figure::Time(kplug.usage.cpu),
            Figure::Time(bare.usage.cpu),
            Goal::None,
        ),
        row(
            "API requests from start until caught up",
            Figure::Count(kplug.requests),
            Figure::Count(bare.requests),
            Goal::Ratio(1.1),
        ),
    ]
}
