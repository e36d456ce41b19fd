//! Starting `kube-testenv` once per test binary.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::paths::{testenv_binary, workspace_root};

/// The line `kube-testenv` prints on stdout once `/readyz` is ok.
const READY_PREFIX: &str = "kube-testenv ready:";

/// How long to wait for the ready line. kube-testenv gives up by itself after
/// 60 s (its `--ready-timeout`); this only guards against a hung process.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// A running kube-apiserver + etcd, started by [`control_plane`] or
/// [`ControlPlane::start`].
///
/// The process exits when this test binary exits: it polls its parent process
/// and, because it is started with `--exit-on-stdin-eof`, also stops when the
/// stdin pipe held here is closed.
#[derive(Debug)]
pub struct ControlPlane {
    kubeconfig: PathBuf,
    server: String,
    version: String,
    etcd_version: String,
    ready_in: Duration,
    child: Mutex<Child>,
    // Held open for the life of the control plane; its close (at process
    // exit, or on drop) is a shutdown signal for kube-testenv.
    stdin: Mutex<Option<ChildStdin>>,
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
    /// kube-testenv removes when it exits.
    pub fn start(binary: &Path) -> Result<Self, StartError> {
        if !binary.is_file() {
            return Err(StartError::BinaryMissing {
                path: binary.to_path_buf(),
                root: workspace_root(),
            });
        }
        let kubeconfig = std::env::temp_dir().join(format!(
            "kplug-testenv-{}-{}.kubeconfig",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let began = Instant::now();
        let mut child = Command::new(binary)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--exit-on-stdin-eof")
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
        let line = match ready_rx.recv_timeout(START_TIMEOUT) {
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
                    timeout: START_TIMEOUT,
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
        Ok(Self {
            kubeconfig: PathBuf::from(parsed.kubeconfig),
            server: parsed.server.to_owned(),
            version: parsed.version.to_owned(),
            etcd_version: parsed.etcd_version.to_owned(),
            ready_in,
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
        })
    }

    /// The admin kubeconfig written by kube-testenv.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server URL, `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The API server's version as it reports it, e.g. `v1.35.4`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The embedded etcd's version, e.g. `v3.6.5`.
    pub fn etcd_version(&self) -> &str {
        &self.etcd_version
    }

    /// Time from starting the process to its ready line.
    pub fn ready_in(&self) -> Duration {
        self.ready_in
    }

    /// The process id of kube-testenv.
    pub fn pid(&self) -> u32 {
        self.child.lock().unwrap_or_else(|e| e.into_inner()).id()
    }
}

impl Drop for ControlPlane {
    /// Closes kube-testenv's stdin, which makes it shut down cleanly, and
    /// waits (bounded) for it; kills it if it does not go in time. The shared
    /// [`control_plane`] is never dropped: it goes with the test binary.
    fn drop(&mut self) {
        drop(self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take());
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => thread::sleep(Duration::from_millis(50)),
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The parts of `kube-testenv ready: kube-apiserver v1.35.4 at
/// https://127.0.0.1:PORT, etcd v3.6.5, in 3.21s; kubeconfig /abs/path`.
#[derive(Debug, PartialEq)]
struct ReadyLine<'a> {
    version: &'a str,
    server: &'a str,
    etcd_version: &'a str,
    kubeconfig: &'a str,
}

impl<'a> ReadyLine<'a> {
    fn parse(line: &'a str) -> Option<Self> {
        let rest = line.strip_prefix(READY_PREFIX)?.trim_start();
        let rest = rest.strip_prefix("kube-apiserver ")?;
        let (version, rest) = rest.split_once(" at ")?;
        let (server, rest) = rest.split_once(", etcd ")?;
        let (etcd_version, rest) = rest.split_once(", in ")?;
        let (_, kubeconfig) = rest.split_once("; kubeconfig ")?;
        Some(Self {
            version,
            server,
            etcd_version,
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
                kubeconfig: "/tmp/some dir/kc",
            })
        );
    }

    #[test]
    fn rejects_other_lines() {
        assert_eq!(ReadyLine::parse("kube-testenv ready: something else"), None);
        assert_eq!(ReadyLine::parse("hello"), None);
    }
}
