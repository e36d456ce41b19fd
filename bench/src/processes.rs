//! The measured processes: kplug-operator, the SQLite plugin and the
//! baselines, each a child with its log in the bench directory, and what
//! `/proc` says they used.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::process::{Child, Command};

use crate::objects::{EXTENSION_KINDS, RESOURCE};

/// A child process of the benchmark, killed when dropped.
pub(crate) struct Process {
    child: Child,
    name: String,
}

impl Process {
    fn spawn(mut command: Command, name: &str, logs: &Path) -> anyhow::Result<Self> {
        let log = File::create(logs.join(format!("{name}.log")))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Self {
            child,
            name: name.to_owned(),
        })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> anyhow::Result<i32> {
        let pid = self
            .child
            .id()
            .with_context(|| format!("{} has exited", self.name))?;
        Ok(i32::try_from(pid)?)
    }

    /// CPU time and resident memory so far.
    pub(crate) fn usage(&self) -> anyhow::Result<Usage> {
        Usage::of(self.pid()?).with_context(|| format!("reading /proc for {}", self.name))
    }

    /// SIGKILL, and waits for the exit.
    pub(crate) async fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// SIGTERM, and waits for the exit (SIGKILL after 10 s).
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        let pid = nix::unistd::Pid::from_raw(self.pid()?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

/// What a process used.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Usage {
    /// User and system CPU time.
    pub(crate) cpu: Duration,
    /// Resident set size, in bytes.
    pub(crate) rss: u64,
}

impl Usage {
    /// What process `pid` used so far.
    pub(crate) fn of(pid: i32) -> anyhow::Result<Self> {
        let process = procfs::process::Process::new(pid)?;
        let stat = process.stat()?;
        let ticks = procfs::ticks_per_second() as f64;
        let cpu = Duration::from_secs_f64((stat.utime + stat.stime) as f64 / ticks);
        let rss = process.status()?.vmrss.context("no VmRSS")? * 1024;
        Ok(Self { cpu, rss })
    }
}

/// Where the measured processes find the cluster and keep their files.
pub(crate) struct Setup {
    /// The admin kubeconfig of the benchmark's control plane.
    pub(crate) kubeconfig: PathBuf,
    /// Where every process's log goes.
    pub(crate) logs: PathBuf,
}

/// A running kplug-operator and the port of its `/metrics` and `/plugins`.
pub(crate) struct Operator {
    pub(crate) process: Process,
    pub(crate) port: u16,
    pub(crate) sockets: PathBuf,
}

impl Setup {
    /// Starts kplug-operator for the tables of `ns`, its socket dir in
    /// `sockets`, as the walkthrough runs it (one replica: leader election
    /// stays on, as in a Deployment).
    pub(crate) fn operator(&self, ns: &str, sockets: &Path) -> anyhow::Result<Operator> {
        self.operator_with(ns, sockets, &[])
    }

    /// [`Self::operator`] with more flags (`args`).
    pub(crate) fn operator_with(
        &self,
        ns: &str,
        sockets: &Path,
        args: &[&str],
    ) -> anyhow::Result<Operator> {
        let port = free_port()?;
        let mut command = Command::new(kplug_testenv::workspace_binary("kplug-operator"));
        command
            .args(["--resource", RESOURCE, "--namespace", ns])
            .arg("--socket-dir")
            .arg(sockets)
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")]);
        for kind in EXTENSION_KINDS {
            command.args(["--extension-kind", kind]);
        }
        command.args(args);
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", log_filter())
            .env("POD_NAME", "kplug-operator-bench")
            .env("POD_NAMESPACE", ns);
        let process = Process::spawn(command, &format!("kplug-operator-{ns}"), &self.logs)?;
        Ok(Operator {
            process,
            port,
            sockets: sockets.to_owned(),
        })
    }

    /// Starts the SQLite plugin on `operator`'s socket dir, its databases in
    /// `data`. `run` names its log.
    pub(crate) fn plugin(
        &self,
        operator: &Operator,
        data: &Path,
        run: &str,
    ) -> anyhow::Result<Process> {
        let mut command = Command::new(kplug_testenv::workspace_binary("sqlite-plugin"));
        command
            .arg("--data-dir")
            .arg(data)
            .env("KPLUG_SOCKET_DIR", &operator.sockets)
            .env("RUST_LOG", log_filter());
        Process::spawn(command, &format!("sqlite-plugin-{run}"), &self.logs)
    }

    /// Starts this program's `children-plugin` (P5) on `operator`'s socket
    /// dir, its databases in `data`.
    pub(crate) fn children_plugin(
        &self,
        operator: &Operator,
        data: &Path,
        run: &str,
    ) -> anyhow::Result<Process> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .arg("children-plugin")
            .arg("--data-dir")
            .arg(data)
            .env("KPLUG_SOCKET_DIR", &operator.sockets)
            .env("RUST_LOG", log_filter());
        Process::spawn(command, &format!("children-plugin-{run}"), &self.logs)
    }

    /// Starts this program's `baseline` controller for the tables of `ns`.
    pub(crate) fn baseline(&self, ns: &str, data: &Path) -> anyhow::Result<Process> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .args(["baseline", "--namespace", ns, "--data-dir"])
            .arg(data)
            .env("KUBECONFIG", &self.kubeconfig);
        Process::spawn(command, &format!("baseline-{ns}"), &self.logs)
    }

    /// Starts this program's bare `reflector` of the tables of `ns`; it
    /// prints `synced` to `synced_file` once its lists are in.
    pub(crate) fn reflector(
        &self,
        ns: &str,
        objects: usize,
        synced: &Path,
        children: bool,
    ) -> anyhow::Result<Process> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .args(["reflector", "--namespace", ns, "--objects"])
            .arg(objects.to_string())
            .arg("--synced-file")
            .arg(synced)
            .env("KUBECONFIG", &self.kubeconfig);
        if children {
            command.arg("--children");
        }
        Process::spawn(command, &format!("reflector-{ns}"), &self.logs)
    }
}

impl Operator {
    /// `GET path` from the operator's HTTP port; `None` while it does not
    /// answer.
    pub(crate) async fn get(&self, path: &str) -> Option<String> {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .ok()?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
                .await
                .ok()?;
        tokio::spawn(connection);
        let request = http::Request::get(path)
            .header(http::header::HOST, "127.0.0.1")
            .body(Empty::new())
            .ok()?;
        let response = sender.send_request(request).await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body = response.into_body().collect().await.ok()?.to_bytes();
        String::from_utf8(body.to_vec()).ok()
    }

    /// The sum of the operator's metric `name` over the series whose labels
    /// include every one of `labels`.
    pub(crate) async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> anyhow::Result<f64> {
        let text = self
            .get("/metrics")
            .await
            .context("the operator's /metrics does not answer")?;
        Ok(metric_sum(&text, name, labels))
    }

    /// Keeps the operator's `/metrics` in the log directory
    /// (`<name>.metrics`), for a look at what it did, then stops it.
    pub(crate) async fn stop(self, logs: &Path) -> anyhow::Result<()> {
        if let Some(text) = self.get("/metrics").await {
            std::fs::write(logs.join(format!("{}.metrics", self.process.name)), text)?;
        }
        self.process.stop().await
    }

    /// Whether `plugin` is among the operator's registered plugins
    /// (`None` if not), and if so whether it is ready.
    pub(crate) async fn plugin_ready(&self, plugin: &str) -> anyhow::Result<Option<bool>> {
        let text = self
            .get("/plugins")
            .await
            .context("the operator's /plugins does not answer")?;
        let listed: serde_json::Value = serde_json::from_str(&text)?;
        Ok(listed["plugins"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["name"] == plugin))
            .map(|p| p["ready"] == true))
    }
}

fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The measured processes' log filter: `$KPLUG_BENCH_LOG`, else `info`
/// (more would cost the processes time the benchmark measures).
fn log_filter() -> String {
    std::env::var("KPLUG_BENCH_LOG").unwrap_or_else(|_| "info".to_owned())
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sum_adds_the_matching_series_only() {
        let text = "kplug_plugin_calls_total{plugin=\"sqlite\",call=\"Reconcile\",outcome=\"ok\"} 7\n\
                    kplug_plugin_calls_total{plugin=\"sqlite\",call=\"Reconcile\",outcome=\"error\"} 2\n\
                    kplug_plugin_calls_total{plugin=\"sqlite\",call=\"Finalize\",outcome=\"ok\"} 5\n\
                    kplug_plugin_calls_total_created 1\n";
        let reconciles = [("plugin", "sqlite"), ("call", "Reconcile")];
        assert_eq!(
            metric_sum(text, "kplug_plugin_calls_total", &reconciles),
            9.0
        );
        assert_eq!(metric_sum(text, "kplug_plugin_calls_total", &[]), 14.0);
    }
}
