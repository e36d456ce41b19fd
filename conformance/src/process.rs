//! The plugin under test as a process the kit starts, signals and restarts.
//!
//! Each start runs the command in a process group of its own, so that a
//! signal reaches the plugin even when the command is a wrapper (`sh -c`,
//! `node`, a venv's script), and so that nothing it started outlives the kit.
//! Its output goes to a log file, whose tail the report shows when a check
//! fails.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// A started plugin process.
pub(crate) struct Plugin {
    child: Child,
    group: Pid,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl Plugin {
    /// Starts `command` with `KPLUG_SOCKET_DIR=socket_dir` and the given
    /// heartbeat interval, logging to `log`.
    pub(crate) fn start(
        command: &[String],
        socket_dir: &Path,
        interval: Duration,
        log: PathBuf,
    ) -> std::io::Result<Self> {
        let (program, args) = command.split_first().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no plugin command given")
        })?;
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let child = Command::new(program)
            .args(args)
            .env(kplug_proto::SOCKET_DIR_ENV, socket_dir)
            .env(
                kplug_proto::rules::HEARTBEAT_INTERVAL_ENV,
                interval.as_secs_f64().to_string(),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start {program}: {e}")))?;
        let pid = child.id().expect("a child that was just spawned has a pid");
        Ok(Self {
            child,
            group: Pid::from_raw(i32::try_from(pid).expect("pids fit in i32")),
            log,
            status: None,
        })
    }

    /// Sends `signal` to the plugin's process group.
    pub(crate) fn signal(&self, signal: Signal) {
        // ESRCH: the group is gone already, which the caller finds out when
        // it waits.
        killpg(self.group, signal).ok();
    }

    /// Waits up to `timeout` for the process to exit.
    pub(crate) async fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = tokio::time::timeout(timeout, self.child.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        self.status
    }

    /// Whether the process has exited (without waiting).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// SIGKILLs the process group and reaps the process.
    pub(crate) async fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        self.wait(Duration::from_secs(10)).await;
    }

    /// The last `lines` lines of the plugin's output.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        // kill_on_drop reaches the direct child only; anything else in its
        // group (a wrapper's child) goes too.
        self.signal(Signal::SIGKILL);
    }
}
