//! What a control plane is started with, what a restart took, and why a
//! start failed.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

#[cfg(doc)]
use super::{ControlPlane, control_plane};
#[cfg(doc)]
use crate::paths::testenv_binary;

/// How [`ControlPlane::start_with`] starts a control plane. Every field has a
/// default; set the ones you need:
///
/// ```no_run
/// # fn demo(dir: std::path::PathBuf) -> Result<(), kplug_testenv::StartError> {
/// use kplug_testenv::{ControlPlane, StartOptions};
/// let control_plane = ControlPlane::start_with(StartOptions {
///     data_dir: Some(dir),
///     ..StartOptions::default()
/// })?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The kube-testenv program. Default: [`testenv_binary`].
    pub binary: Option<PathBuf>,
    /// Where etcd's data, the certificates, the service-account signing key,
    /// the logs (`control-plane.log`) and, by default, the kubeconfig live
    /// (kube-testenv's `--data-dir`). It is created if missing, reused when
    /// it holds the data of an earlier run, and never removed by this crate.
    /// One directory serves one running kube-testenv at a time: a second one
    /// fails to start with a message naming the first one's pid.
    ///
    /// Default: a fresh directory in the temporary directory, removed when
    /// the [`ControlPlane`] is dropped.
    pub data_dir: Option<PathBuf>,
    /// The API server's port on 127.0.0.1, kept across restarts.
    ///
    /// Default: a free port picked below the kernel's ephemeral port range
    /// (20000 and up), so that no outgoing connection and no "any free port"
    /// listener (such as another kube-testenv's etcd) can take it while the
    /// control plane is stopped; an ephemeral port if that range is empty.
    pub port: Option<u16>,
    /// Where the admin kubeconfig goes. Default: `kubeconfig` in the data
    /// directory. It is kept when kube-testenv stops, and rewritten with the
    /// same content when it starts again.
    pub kubeconfig: Option<PathBuf>,
    /// Shows the API server's and etcd's logs on stderr (`--verbose`)
    /// instead of keeping them in `control-plane.log` in the data directory.
    pub verbose: bool,
    /// Also runs a one-node cluster (`--node`): kube-controller-manager,
    /// kube-scheduler and a kubelet with containerd, so that Deployments
    /// run real pods. Root only; needs `make node-binaries` and Debian's
    /// containerd, runc and containernetworking-plugins. Stopping removes
    /// every pod and what the node changed on the machine.
    pub node: bool,
    /// With [`node`](Self::node): images copied from the local Docker engine
    /// into the node's containerd (`--load-image`), for pods with
    /// `imagePullPolicy: IfNotPresent` or `Never`. Loaded again on every
    /// start.
    pub load_images: Vec<String>,
    /// With [`node`](Self::node): loopback ports of this machine that pods
    /// reach at the node's address, `10.88.0.1:PORT` (`--expose-host-port`),
    /// e.g. a database listening on 127.0.0.1.
    pub host_ports: Vec<u16>,
}

/// How long a [`ControlPlane::restart`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartTiming {
    /// From SIGTERM to the old process's exit.
    pub stop: Duration,
    /// From starting the new process to its ready line (`/readyz` ok).
    pub start: Duration,
}

impl RestartTiming {
    /// The whole time the API server was unavailable: stop and start.
    pub fn total(&self) -> Duration {
        self.stop + self.start
    }
}

/// Why the control plane could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The `kube-testenv` program is not there.
    #[error(
        "the kube-testenv program was not found at {path}: run `make testenv` in {root} to build it \
         (or set KPLUG_TESTENV_BIN to its path)"
    )]
    BinaryMissing {
        /// Where it was looked for.
        path: PathBuf,
        /// The workspace root, where `make testenv` is run.
        root: PathBuf,
    },
    /// The program could not be started at all.
    #[error("could not run {path}: {source} (rebuild it with `make testenv`)")]
    Spawn {
        /// The program.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The program exited before printing its ready line.
    #[error(
        "kube-testenv exited ({status}) before the API server was ready; its stderr:\n{stderr}"
    )]
    Exited {
        /// How it exited.
        status: ExitStatus,
        /// What it printed on stderr (its own messages and the tail of the
        /// API server's log).
        stderr: String,
    },
    /// No ready line in time; the process was killed.
    #[error(
        "kube-testenv printed no ready line within {}s and was killed; its stderr so far:\n{stderr}",
        timeout.as_secs()
    )]
    Timeout {
        /// How long it was waited for.
        timeout: Duration,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The ready line did not have the expected format (a kube-testenv that
    /// does not match this crate: rebuild it).
    #[error("unexpected ready line from kube-testenv (rebuild it with `make testenv`): {line:?}")]
    BadReadyLine {
        /// The line.
        line: String,
    },
    /// No free port could be found for the API server.
    #[error("no free port on 127.0.0.1 for the API server: {source}")]
    NoFreePort {
        /// What the OS said.
        source: std::io::Error,
    },
    /// [`ControlPlane::start_again`] on a control plane that is running.
    #[error("the control plane (kube-testenv pid {pid}) is running: stop it first")]
    Running {
        /// The running process.
        pid: u32,
    },
    /// [`ControlPlane::start_again`] or [`ControlPlane::restart`] on a
    /// control plane started by [`ControlPlane::start`] (or the shared
    /// [`control_plane`]), whose data goes with its process.
    #[error(
        "this control plane has no data directory and cannot be started again: \
         use ControlPlane::start_with"
    )]
    NotRestartable,
    /// [`ControlPlane::restart`] could not stop the running process.
    #[error("could not stop kube-testenv: {source}")]
    Stop {
        /// What the OS said.
        source: std::io::Error,
    },
}
