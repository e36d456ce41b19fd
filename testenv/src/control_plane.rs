//! Starting `kube-testenv`: once per test binary ([`control_plane`]), or as a
//! control plane of a test's own that can be stopped and started again with
//! its data ([`ControlPlane::start_with`]).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::paths::{testenv_binary, workspace_root};

/// The line `kube-testenv` prints on stdout once `/readyz` is ok.
const READY_PREFIX: &str = "kube-testenv ready:";

/// How long to wait for the ready line. kube-testenv gives up by itself after
/// 60 s (its `--ready-timeout`); this only guards against a hung process.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// The same guard with a node: kube-testenv bounds the node's start at 120 s
/// by itself, after loading the images (`docker save`, hundreds of MB).
const NODE_START_TIMEOUT: Duration = Duration::from_secs(600);

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

/// What [`ControlPlane::start_again`] needs.
#[derive(Debug)]
struct Restartable {
    binary: PathBuf,
    data_dir: PathBuf,
    // Made by this crate (StartOptions::data_dir was None): removed on drop.
    owned_data_dir: bool,
    port: u16,
    verbose: bool,
    node: bool,
    load_images: Vec<String>,
    host_ports: Vec<u16>,
}

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

/// A kube-testenv process that printed its ready line.
struct Launched {
    child: Child,
    stdin: Option<ChildStdin>,
    ready_in: Duration,
    kubeconfig: PathBuf,
    server: String,
    version: String,
    etcd_version: String,
    node: Option<String>,
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
        let binary = options.binary.unwrap_or_else(testenv_binary);
        let (data_dir, owned_data_dir) = match options.data_dir {
            Some(dir) => (std::path::absolute(&dir).unwrap_or(dir), false),
            None => (
                std::env::temp_dir().join(format!(
                    "kplug-testenv-data-{}-{}",
                    std::process::id(),
                    uuid::Uuid::new_v4().simple()
                )),
                true,
            ),
        };
        let port = match options.port {
            Some(port) => port,
            None => pick_port().map_err(|source| StartError::NoFreePort { source })?,
        };
        let kubeconfig = options
            .kubeconfig
            .map(|path| std::path::absolute(&path).unwrap_or(path))
            .unwrap_or_else(|| data_dir.join("kubeconfig"));
        let restartable = Restartable {
            binary,
            data_dir,
            owned_data_dir,
            port,
            verbose: options.verbose,
            node: options.node,
            load_images: options.load_images,
            host_ports: options.host_ports,
        };
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
                if owned_data_dir {
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

impl Restartable {
    /// kube-testenv's arguments, besides `--kubeconfig` and
    /// `--exit-on-stdin-eof`.
    fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--data-dir".into(),
            self.data_dir.clone().into(),
            "--port".into(),
            self.port.to_string().into(),
        ];
        if self.verbose {
            args.push("--verbose".into());
        }
        if self.node {
            args.push("--node".into());
            for image in &self.load_images {
                args.push("--load-image".into());
                args.push(image.into());
            }
            for port in &self.host_ports {
                args.push("--expose-host-port".into());
                args.push(port.to_string().into());
            }
        }
        args
    }

    fn start_timeout(&self) -> Duration {
        if self.node {
            NODE_START_TIMEOUT
        } else {
            START_TIMEOUT
        }
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

/// Runs kube-testenv with `--kubeconfig kubeconfig --exit-on-stdin-eof` and
/// `args`, and waits for its ready line.
fn launch(
    binary: &Path,
    kubeconfig: &Path,
    args: Vec<OsString>,
    timeout: Duration,
) -> Result<Launched, StartError> {
    if !binary.is_file() {
        return Err(StartError::BinaryMissing {
            path: binary.to_path_buf(),
            root: workspace_root(),
        });
    }
    let began = Instant::now();
    let mut child = Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--exit-on-stdin-eof")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| StartError::Spawn {
            path: binary.to_path_buf(),
            source,
        })?;
    let stdin = child.stdin.take();

    // stderr: collected for error messages; once the control plane is up,
    // anything kube-testenv says (it only speaks on trouble or shutdown)
    // is passed on.
    let stderr_text = Arc::new(Mutex::new(String::new()));
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stderr_reader = {
        let pipe = child.stderr.take().expect("stderr is piped");
        let text = Arc::clone(&stderr_text);
        let ready = Arc::clone(&ready);
        thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if ready.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = writeln!(std::io::stderr(), "{line}");
                } else {
                    let mut text = text.lock().unwrap_or_else(|e| e.into_inner());
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        })
    };
    // stdout: the ready line. The reader keeps draining afterwards so the
    // pipe never fills up.
    let (ready_tx, ready_rx) = mpsc::channel::<String>();
    {
        let pipe = child.stdout.take().expect("stdout is piped");
        thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if !sent && line.starts_with(READY_PREFIX) {
                    sent = ready_tx.send(line).is_ok();
                }
            }
            // Dropping the sender tells the waiter that stdout closed.
        });
    }

    let collected = |reader: thread::JoinHandle<()>| {
        let _ = reader.join();
        stderr_text
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    };
    let line = match ready_rx.recv_timeout(timeout) {
        Ok(line) => line,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let status = child.wait().map_err(|source| StartError::Spawn {
                path: binary.to_path_buf(),
                source,
            })?;
            return Err(StartError::Exited {
                status,
                stderr: collected(stderr_reader),
            });
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(StartError::Timeout {
                timeout,
                stderr: collected(stderr_reader),
            });
        }
    };
    ready.store(true, std::sync::atomic::Ordering::Relaxed);
    let ready_in = began.elapsed();
    let Some(parsed) = ReadyLine::parse(&line) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(StartError::BadReadyLine { line });
    };
    Ok(Launched {
        kubeconfig: PathBuf::from(parsed.kubeconfig),
        server: parsed.server.to_owned(),
        version: parsed.version.to_owned(),
        etcd_version: parsed.etcd_version.to_owned(),
        node: parsed.node.map(str::to_owned),
        ready_in,
        child,
        stdin,
    })
}

/// A free port on 127.0.0.1 below the kernel's ephemeral port range (from
/// `/proc/sys/net/ipv4/ip_local_port_range`), where neither outgoing
/// connections nor listeners on "any free port" get their ports: a
/// restartable control plane's port stays free while it is stopped, unless
/// something asks for that very port. Falls back to an ephemeral port when
/// the range leaves no room below it.
fn pick_port() -> std::io::Result<u16> {
    const LOWEST: u16 = 20000;
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    if ephemeral_start > LOWEST + 1000 {
        let span = u128::from(ephemeral_start - LOWEST);
        let mut random = uuid::Uuid::new_v4().as_u128();
        for _ in 0..64 {
            // span fits in u16, so the remainder does too.
            let port = LOWEST + (random % span) as u16;
            random = random.rotate_right(11) ^ uuid::Uuid::new_v4().as_u128();
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// The parts of `kube-testenv ready: kube-apiserver v1.35.4 at
/// https://127.0.0.1:PORT, etcd v3.6.5, in 3.21s; kubeconfig /abs/path`,
/// with `, node NAME` after the etcd version when it runs a node.
#[derive(Debug, PartialEq)]
struct ReadyLine<'a> {
    version: &'a str,
    server: &'a str,
    etcd_version: &'a str,
    node: Option<&'a str>,
    kubeconfig: &'a str,
}

impl<'a> ReadyLine<'a> {
    fn parse(line: &'a str) -> Option<Self> {
        let rest = line.strip_prefix(READY_PREFIX)?.trim_start();
        let rest = rest.strip_prefix("kube-apiserver ")?;
        let (version, rest) = rest.split_once(" at ")?;
        let (server, rest) = rest.split_once(", etcd ")?;
        let (etcd, rest) = rest.split_once(", in ")?;
        let (etcd_version, node) = match etcd.split_once(", node ") {
            Some((etcd_version, node)) => (etcd_version, Some(node)),
            None => (etcd, None),
        };
        let (_, kubeconfig) = rest.split_once("; kubeconfig ")?;
        Some(Self {
            version,
            server,
            etcd_version,
            node,
            kubeconfig,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_ready_line() {
        let line = "kube-testenv ready: kube-apiserver v1.35.4 at https://127.0.0.1:40123, \
                    etcd v3.6.5, in 3.21s; kubeconfig /tmp/some dir/kc";
        assert_eq!(
            ReadyLine::parse(line),
            Some(ReadyLine {
                version: "v1.35.4",
                server: "https://127.0.0.1:40123",
                etcd_version: "v3.6.5",
                node: None,
                kubeconfig: "/tmp/some dir/kc",
            })
        );
        let with_node = "kube-testenv ready: kube-apiserver v1.35.4 at https://127.0.0.1:40123, \
                         etcd v3.6.5, node vm, in 6.36s; kubeconfig /tmp/kc";
        assert_eq!(
            ReadyLine::parse(with_node),
            Some(ReadyLine {
                version: "v1.35.4",
                server: "https://127.0.0.1:40123",
                etcd_version: "v3.6.5",
                node: Some("vm"),
                kubeconfig: "/tmp/kc",
            })
        );
    }

    #[test]
    fn rejects_other_lines() {
        assert_eq!(ReadyLine::parse("kube-testenv ready: something else"), None);
        assert_eq!(ReadyLine::parse("hello"), None);
    }
}
