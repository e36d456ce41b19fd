//! Starting `kube-testenv`: once per test binary ([`control_plane`]), or as a
//! control plane of a test's own that can be stopped and started again with
//! its data ([`ControlPlane::start_with`]).

mod launch;
mod options;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::paths::testenv_binary;
use launch::{Launched, Restartable, START_TIMEOUT, launch};
pub use options::{RestartTiming, StartError, StartOptions};

/// How long [`ControlPlane::stop`] waits after SIGTERM before it kills.
/// kube-testenv bounds its own shutdown at 15 s.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A running kube-apiserver + etcd, started by [`control_plane`],
/// [`ControlPlane::start`] or [`ControlPlane::start_with`].
///
/// The process exits when this test binary exits: it polls its parent process
/// and, because it is started with `--exit-on-stdin-eof`, also stops when the
/// stdin pipe held here is closed.
///
/// One started with [`ControlPlane::start_with`] keeps its etcd data,
/// certificates and service-account signing key in a data directory, and can
/// be stopped ([`stop`](Self::stop), [`kill`](Self::kill)) and started again
/// ([`start_again`](Self::start_again), [`restart`](Self::restart)) on the
/// same port with the same data: the kubeconfig stays the same, so clients
/// built before a restart work again once it is back.
#[derive(Debug)]
pub struct ControlPlane {
    kubeconfig: PathBuf,
    server: String,
    version: String,
    etcd_version: String,
    node: Option<String>,
    ready_in: Duration,
    child: Mutex<Child>,
    // Held open for the life of the process; its close (at process exit, or
    // on drop) is a shutdown signal for kube-testenv.
    stdin: Mutex<Option<ChildStdin>>,
    // How to start it again; None for one started by `start`, whose state
    // is a temporary directory kube-testenv removes at exit.
    restartable: Option<Restartable>,
}

static CONTROL_PLANE: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

/// The control plane of this test binary, started on first use.
///
/// Starting is synchronous (a plain child process, no async runtime), so it
/// works from any `#[tokio::test]`, each of which has its own runtime. It
/// prints `kplug-testenv: kube-apiserver vX.Y.Z ready in N.NNs` once, straight
/// to stderr (not captured by the test harness), so test output names the
/// version it ran against.
///
/// It cannot be stopped or restarted (tests share it); a test that needs
/// that starts its own with [`ControlPlane::start_with`].
///
/// # Panics
///
/// When the control plane cannot be started (for example when `kube-testenv`
/// has not been built: the message says to run `make testenv`). Every later
/// call panics with the same message instead of trying again.
pub fn control_plane() -> &'static ControlPlane {
    let started = CONTROL_PLANE.get_or_init(|| {
        let control_plane = ControlPlane::start(&testenv_binary()).map_err(|e| e.to_string())?;
        // Written to the stderr handle directly: the test harness captures
        // eprintln! output of passing tests, and this line should be seen.
        let _ = writeln!(
            std::io::stderr(),
            "kplug-testenv: kube-apiserver {} ready in {:.2}s at {} (etcd {}; kubeconfig {})",
            control_plane.version,
            control_plane.ready_in.as_secs_f64(),
            control_plane.server,
            control_plane.etcd_version,
            control_plane.kubeconfig.display(),
        );
        Ok(control_plane)
    });
    match started {
        Ok(control_plane) => control_plane,
        Err(message) => panic!("kplug-testenv: no control plane: {message}"),
    }
}

impl ControlPlane {
    /// Starts the `kube-testenv` program at `binary` and waits until the API
    /// server is ready. Most tests want the shared [`control_plane`] instead;
    /// this is for tests of the start itself.
    ///
    /// The kubeconfig goes to a fresh file in the temporary directory, which
    /// kube-testenv removes when it exits, with the rest of its state. Such a
    /// control plane cannot be started again: see [`start_with`](Self::start_with).
    pub fn start(binary: &Path) -> Result<Self, StartError> {
        let kubeconfig = std::env::temp_dir().join(format!(
            "kplug-testenv-{}-{}.kubeconfig",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let launched = launch(binary, &kubeconfig, Vec::new(), START_TIMEOUT)?;
        Ok(Self::from_launched(launched, None))
    }

    /// Starts a control plane of the caller's own, with its state in a data
    /// directory, so that it can be stopped and started again with its data
    /// ([`stop`](Self::stop), [`kill`](Self::kill),
    /// [`start_again`](Self::start_again), [`restart`](Self::restart)).
    /// Waits until the API server is ready.
    ///
    /// With a `data_dir` of an earlier run, the API server comes back with
    /// that run's objects and certificates: with the same port, its
    /// kubeconfig is the same file, byte for byte.
    ///
    /// Blocking (it waits for the process, seconds): from async code call it
    /// through `tokio::task::block_in_place` or `spawn_blocking`.
    pub fn start_with(options: StartOptions) -> Result<Self, StartError> {
        let (restartable, kubeconfig) = Restartable::new(options)?;
        // kube-testenv creates the data directory; a failed first start
        // should not leave an owned one behind.
        let launched = match launch(
            &restartable.binary,
            &kubeconfig,
            restartable.args(),
            restartable.start_timeout(),
        ) {
            Ok(launched) => launched,
            Err(err) => {
                if restartable.owned_data_dir {
                    let _ = std::fs::remove_dir_all(&restartable.data_dir);
                }
                return Err(err);
            }
        };
        Ok(Self::from_launched(launched, Some(restartable)))
    }

    fn from_launched(launched: Launched, restartable: Option<Restartable>) -> Self {
        Self {
            kubeconfig: launched.kubeconfig,
            server: launched.server,
            version: launched.version,
            etcd_version: launched.etcd_version,
            node: launched.node,
            ready_in: launched.ready_in,
            child: Mutex::new(launched.child),
            stdin: Mutex::new(launched.stdin),
            restartable,
        }
    }

    /// Stops kube-testenv: SIGTERM, then waits for it to exit (it shuts the
    /// API server down gracefully, closing every connection and watch, and
    /// closes etcd). After 30 s it is killed. Returns its exit status, a
    /// success when it stopped cleanly; a control plane that is not running
    /// returns the status it exited with.
    ///
    /// With a data directory ([`start_with`](Self::start_with)) the data and
    /// the kubeconfig are kept, for [`start_again`](Self::start_again).
    /// Blocking, like [`start_with`](Self::start_with).
    pub fn stop(&mut self) -> std::io::Result<ExitStatus> {
        self.end(Signal::SIGTERM)
    }

    /// Kills kube-testenv with SIGKILL, as a crash would, and waits for it.
    /// Its data directory is left as the crash left it: etcd recovers it
    /// when [`start_again`](Self::start_again) starts it (etcd runs without
    /// fsync, but the kernel still writes what it was given). Returns its
    /// exit status.
    pub fn kill(&mut self) -> std::io::Result<ExitStatus> {
        self.end(Signal::SIGKILL)
    }

    fn end(&mut self, signal: Signal) -> std::io::Result<ExitStatus> {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        let pid = Pid::from_raw(i32::try_from(child.id()).map_err(std::io::Error::other)?);
        match kill(pid, signal) {
            // ESRCH: it exited in between; wait reaps it.
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(errno) => return Err(errno.into()),
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = writeln!(
                    std::io::stderr(),
                    "kplug-testenv: kube-testenv (pid {pid}) did not stop within {}s of {signal}; killing it",
                    STOP_TIMEOUT.as_secs()
                );
                child.kill()?;
                break child.wait()?;
            }
            thread::sleep(Duration::from_millis(20));
        };
        drop(
            self.stdin
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        Ok(status)
    }

    /// Starts kube-testenv again after [`stop`](Self::stop) or
    /// [`kill`](Self::kill), on the same port with the same data directory
    /// and kubeconfig, and waits until the API server is ready. Returns the
    /// time to ready (also [`ready_in`](Self::ready_in)).
    ///
    /// Fails with [`StartError::Running`] when it is running, and with
    /// [`StartError::NotRestartable`] for a control plane without a data
    /// directory (one from [`start`](Self::start)). When the port has been
    /// taken in the meantime, the error (kube-testenv's) says so.
    pub fn start_again(&mut self) -> Result<Duration, StartError> {
        let Some(restartable) = &self.restartable else {
            return Err(StartError::NotRestartable);
        };
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        if matches!(child.try_wait(), Ok(None)) {
            return Err(StartError::Running { pid: child.id() });
        }
        let launched = launch(
            &restartable.binary,
            &self.kubeconfig,
            restartable.args(),
            restartable.start_timeout(),
        )?;
        let ready_in = launched.ready_in;
        // Same port, same data directory, same kubeconfig: the server and
        // the kubeconfig path are those of the first start; the versions are
        // taken anew (the program may have been rebuilt in between).
        self.server = launched.server;
        self.version = launched.version;
        self.etcd_version = launched.etcd_version;
        self.node = launched.node;
        self.ready_in = ready_in;
        *self.child.get_mut().unwrap_or_else(|e| e.into_inner()) = launched.child;
        *self.stdin.get_mut().unwrap_or_else(|e| e.into_inner()) = launched.stdin;
        Ok(ready_in)
    }

    /// Stops kube-testenv ([`stop`](Self::stop)) and starts it again
    /// ([`start_again`](Self::start_again)): the API server goes away, every
    /// connection and watch is closed, and it comes back on the same port
    /// with the same data, certificates and kubeconfig. Returns once it is
    /// ready again, with how long the stop and the start took.
    ///
    /// Blocking: in a `#[tokio::test(flavor = "multi_thread")]`, call it as
    /// `tokio::task::block_in_place(|| control_plane.restart())` so that the
    /// test's other tasks (watchers, controllers) keep running meanwhile.
    pub fn restart(&mut self) -> Result<RestartTiming, StartError> {
        if self.restartable.is_none() {
            return Err(StartError::NotRestartable);
        }
        let stopping = Instant::now();
        self.stop().map_err(|source| StartError::Stop { source })?;
        let stop = stopping.elapsed();
        let start = self.start_again()?;
        Ok(RestartTiming { stop, start })
    }

    /// Whether the kube-testenv process is running: false after
    /// [`stop`](Self::stop) or [`kill`](Self::kill), or when it exited by
    /// itself.
    pub fn is_running(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        matches!(child.try_wait(), Ok(None))
    }

    /// The admin kubeconfig written by kube-testenv.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server URL, `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The API server's port on 127.0.0.1 (the same after a restart).
    pub fn port(&self) -> u16 {
        self.server
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .unwrap_or_default()
    }

    /// The data directory of a control plane from
    /// [`start_with`](Self::start_with); `None` for one from
    /// [`start`](Self::start) (its state is in a temporary directory of
    /// kube-testenv's own).
    pub fn data_dir(&self) -> Option<&Path> {
        self.restartable.as_ref().map(|r| r.data_dir.as_path())
    }

    /// The API server's version as it reports it, e.g. `v1.35.4`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The embedded etcd's version, e.g. `v3.6.5`.
    pub fn etcd_version(&self) -> &str {
        &self.etcd_version
    }

    /// The node's name (the machine's host name) when the control plane runs
    /// one ([`StartOptions::node`]).
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// Time from starting the process to its ready line (of the latest
    /// start).
    pub fn ready_in(&self) -> Duration {
        self.ready_in
    }

    /// The process id of kube-testenv (of the latest start; it may have
    /// exited since, see [`is_running`](Self::is_running)).
    pub fn pid(&self) -> u32 {
        self.child.lock().unwrap_or_else(|e| e.into_inner()).id()
    }
}

impl Drop for ControlPlane {
    /// Closes kube-testenv's stdin, which makes it shut down cleanly, and
    /// waits (bounded) for it; kills it if it does not go in time. Then
    /// removes the data directory if this crate made it (a `data_dir` given
    /// to [`ControlPlane::start_with`] is kept). The shared [`control_plane`]
    /// is never dropped: it goes with the test binary.
    fn drop(&mut self) {
        drop(
            self.stdin
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let deadline = Instant::now() + Duration::from_secs(20);
        let exited = loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break true,
                Ok(None) if Instant::now() >= deadline => break false,
                Ok(None) => thread::sleep(Duration::from_millis(50)),
            }
        };
        if !exited {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(restartable) = &self.restartable
            && restartable.owned_data_dir
        {
            let _ = std::fs::remove_dir_all(&restartable.data_dir);
        }
    }
}
