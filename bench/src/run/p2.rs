//! P2: new tables converged, by kplug and by the in-process baseline.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Bench, SETTLE, converge_timeout, progress};
use crate::apiserver;
use crate::objects::{self, Watch};
use crate::processes::{Operator, Process, Usage};
use crate::report::{Figure, Goal, Row};

/// What one P2 measurement found.
#[derive(Debug, Default, Clone, Copy)]
struct Converged {
    wall: Duration,
    requests: u64,
    cpu: Duration,
    operator_cpu: Duration,
    api_server_cpu: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    Kplug,
    Baseline,
}

/// P2: `n` tables converged by kplug and by the baseline, `rounds` times
/// each, each time on a fresh control plane.
pub(super) async fn converge(work: &Path, n: usize, rounds: usize) -> anyhow::Result<Vec<Row>> {
    let mut kplug = Vec::new();
    let mut baseline = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Who::Kplug, Who::Baseline]
        } else {
            [Who::Baseline, Who::Kplug]
        };
        for who in order {
            progress(&format!(
                "P2 round {}/{rounds}: {n} tables through {who:?}",
                round + 1
            ));
            let bench = Bench::start(work).await?;
            let measured = bench.converge_once(n, who).await?;
            bench.stop().await?;
            progress(&format!("P2: {measured:?}"));
            match who {
                Who::Kplug => kplug.push(measured),
                Who::Baseline => baseline.push(measured),
            }
        }
    }
    Ok(rows(n, mean(&kplug), mean(&baseline)))
}

/// P2's rows: kplug's measurements `k` against the baseline's `b`.
fn rows(n: usize, k: Converged, b: Converged) -> Vec<Row> {
    let case = format!("{n} tables converged");
    let row = |measure, kplug, baseline, goal| Row {
        part: "P2",
        case: case.clone(),
        measure,
        kplug,
        baseline,
        goal,
    };
    vec![
        row(
            "wall time",
            Figure::Time(k.wall),
            Some(Figure::Time(b.wall)),
            Goal::Ratio(1.15),
        ),
        row(
            "API requests",
            Figure::Count(k.requests),
            Some(Figure::Count(b.requests)),
            Goal::Ratio(1.0),
        ),
        row(
            "CPU in all (the controller's processes, the API server and etcd)",
            Figure::Time(k.cpu + k.api_server_cpu),
            Some(Figure::Time(b.cpu + b.api_server_cpu)),
            Goal::Ratio(1.15),
        ),
        row(
            "CPU (kplug: operator + plugin)",
            Figure::Time(k.cpu),
            Some(Figure::Time(b.cpu)),
            Goal::None,
        ),
        row(
            "CPU, the operator alone",
            Figure::Time(k.operator_cpu),
            Some(Figure::Time(b.cpu)),
            Goal::None,
        ),
        row(
            "CPU of the API server and etcd meanwhile",
            Figure::Time(k.api_server_cpu),
            Some(Figure::Time(b.api_server_cpu)),
            Goal::None,
        ),
    ]
}

impl Bench {
    async fn converge_once(&self, n: usize, who: Who) -> anyhow::Result<Converged> {
        let (ns, data) = self.place(&format!("p2-{who:?}").to_lowercase()).await?;
        let sockets = tempfile::tempdir()?;
        let (operator, processes) = self.controller(who, &ns, &data, sockets.path()).await?;
        // Both have listed their (empty) namespace by now. Each converges
        // one table before the window too: the start-up is not what is
        // measured (kplug-operator starts an extension kind's watch when an
        // object first references it).
        tokio::time::sleep(Duration::from_secs(1)).await;
        objects::create(&self.client, &ns, n..n + 1).await?;
        Watch::tables(&self.client, &ns)
            .until(1, objects::is_ready, "Ready", converge_timeout(1))
            .await?;
        let mut watch = Watch::tables(&self.client, &ns);
        let requests_before = apiserver::requests(&self.client).await?;
        let (cpu_before, operator_before) = cpu(operator.as_ref(), &processes)?;
        let api_server_before = Usage::of(self.api_server)?.cpu;
        let profile = self.api_profile(&ns);
        let start = Instant::now();
        let own_requests = objects::create(&self.client, &ns, 0..n).await?;
        // The n new ones, and the one converged before.
        let last = watch
            .until(n + 1, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        tokio::time::sleep(SETTLE).await;
        let (requests, breakdown) = apiserver::requests(&self.client)
            .await?
            .since(&requests_before);
        std::fs::write(self.work.join(format!("requests-{ns}.txt")), breakdown)?;
        if let Some(profile) = profile {
            profile.await??;
        }
        let (cpu_after, operator_after) = cpu(operator.as_ref(), &processes)?;
        let api_server_after = Usage::of(self.api_server)?.cpu;
        self.keep_sample(&ns, &ns).await?;
        if let Some(operator) = operator {
            operator.stop(&self.work).await?;
        }
        for process in processes {
            process.stop().await?;
        }
        Ok(Converged {
            wall: last - start,
            requests: requests.saturating_sub(own_requests),
            cpu: cpu_after - cpu_before,
            operator_cpu: operator_after - operator_before,
            api_server_cpu: api_server_after - api_server_before,
        })
    }

    /// The controller `who` for `ns`: kplug's operator, with its plugin
    /// among the processes; or the baseline, a process alone.
    async fn controller(
        &self,
        who: Who,
        ns: &str,
        data: &Path,
        sockets: &Path,
    ) -> anyhow::Result<(Option<Operator>, Vec<Process>)> {
        match who {
            Who::Kplug => {
                let (operator, plugin) = self.kplug(ns, data, sockets).await?;
                Ok((Some(operator), vec![plugin]))
            }
            Who::Baseline => Ok((None, vec![self.setup.baseline(ns, data)?])),
        }
    }
}

/// The CPU time the controller's processes used so far: in all, and the
/// operator's alone.
fn cpu(operator: Option<&Operator>, processes: &[Process]) -> anyhow::Result<(Duration, Duration)> {
    let own = operator.map(|o| o.process.usage()).transpose()?;
    let mut total = own.map_or(Duration::ZERO, |u| u.cpu);
    for p in processes {
        total += p.usage()?.cpu;
    }
    Ok((total, own.map_or(Duration::ZERO, |u| u.cpu)))
}

fn mean(all: &[Converged]) -> Converged {
    let n = u32::try_from(all.len().max(1)).unwrap_or(1);
    Converged {
        wall: all.iter().map(|c| c.wall).sum::<Duration>() / n,
        requests: all.iter().map(|c| c.requests).sum::<u64>() / u64::from(n),
        cpu: all.iter().map(|c| c.cpu).sum::<Duration>() / n,
        operator_cpu: all.iter().map(|c| c.operator_cpu).sum::<Duration>() / n,
        api_server_cpu: all.iter().map(|c| c.api_server_cpu).sum::<Duration>() / n,
    }
}
