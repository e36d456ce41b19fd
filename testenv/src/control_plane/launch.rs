//! Running the `kube-testenv` process and reading its ready line.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{StartError, StartOptions};
use crate::paths::{testenv_binary, workspace_root};

/// The line `kube-testenv` prints on stdout once `/readyz` is ok.
const READY_PREFIX: &str = "kube-testenv ready:";

/// How long to wait for the ready line. kube-testenv gives up by itself after
/// 60 s (its `--ready-timeout`); this only guards against a hung process.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(90);

/// The same guard with a node: kube-testenv bounds the node's start at 120 s
/// by itself, after loading the images (`docker save`, hundreds of MB).
const NODE_START_TIMEOUT: Duration = Duration::from_secs(600);

/// What [`ControlPlane::start_again`](super::ControlPlane::start_again)
/// needs.
#[derive(Debug)]
pub(super) struct Restartable {
    pub(super) binary: PathBuf,
    pub(super) data_dir: PathBuf,
    // Made by this crate (StartOptions::data_dir was None): removed on drop.
    pub(super) owned_data_dir: bool,
    port: u16,
    verbose: bool,
    node: bool,
    load_images: Vec<String>,
    host_ports: Vec<u16>,
}

impl Restartable {
    /// What a control plane started with `options` is started from, and
    /// its kubeconfig: the defaults filled in (a data directory of its own,
    /// a free port).
    pub(super) fn new(options: StartOptions) -> Result<(Self, PathBuf), StartError> {
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
        let restartable = Self {
            binary,
            data_dir,
            owned_data_dir,
            port,
            verbose: options.verbose,
            node: options.node,
            load_images: options.load_images,
            host_ports: options.host_ports,
        };
        Ok((restartable, kubeconfig))
    }

    /// kube-testenv's arguments, besides `--kubeconfig` and
    /// `--exit-on-stdin-eof`.
    pub(super) fn args(&self) -> Vec<OsString> {
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

    pub(super) fn start_timeout(&self) -> Duration {
        if self.node {
            NODE_START_TIMEOUT
        } else {
            START_TIMEOUT
        }
    }
}

/// A kube-testenv process that printed its ready line.
pub(super) struct Launched {
    pub(super) child: Child,
    pub(super) stdin: Option<ChildStdin>,
    pub(super) ready_in: Duration,
    pub(super) kubeconfig: PathBuf,
    pub(super) server: String,
    pub(super) version: String,
    pub(super) etcd_version: String,
    pub(super) node: Option<String>,
}

/// Runs kube-testenv with `--kubeconfig kubeconfig --exit-on-stdin-eof` and
/// `args`, and waits for its ready line.
pub(super) fn launch(
    binary: &Path,
    kubeconfig: &Path,
    args: Vec<OsString>,
    timeout: Duration,
) -> Result<Launched, StartError> {
    let began = Instant::now();
    let mut child = spawn(binary, kubeconfig, args)?;
    let stdin = child.stdin.take();
    let stderr = Stderr::read(&mut child);
    let ready_line = ready_line(&mut child);
    let line = match ready_line.recv_timeout(timeout) {
        Ok(line) => line,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let status = child.wait().map_err(|source| StartError::Spawn {
                path: binary.to_path_buf(),
                source,
            })?;
            return Err(StartError::Exited {
                status,
                stderr: stderr.collected(),
            });
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(StartError::Timeout {
                timeout,
                stderr: stderr.collected(),
            });
        }
    };
    stderr.pass_on();
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

/// Starts kube-testenv with `--kubeconfig kubeconfig --exit-on-stdin-eof`
/// and `args`, its standard streams piped.
fn spawn(binary: &Path, kubeconfig: &Path, args: Vec<OsString>) -> Result<Child, StartError> {
    if !binary.is_file() {
        return Err(StartError::BinaryMissing {
            path: binary.to_path_buf(),
            root: workspace_root(),
        });
    }
    Command::new(binary)
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
        })
}

/// kube-testenv's stderr: collected for error messages; once the control
/// plane is up, anything kube-testenv says (it only speaks on trouble or
/// shutdown) is passed on.
struct Stderr {
    text: Arc<Mutex<String>>,
    ready: Arc<AtomicBool>,
    reader: thread::JoinHandle<()>,
}

impl Stderr {
    /// Starts reading `child`'s stderr (piped) on a thread of its own.
    fn read(child: &mut Child) -> Self {
        let text = Arc::new(Mutex::new(String::new()));
        let ready = Arc::new(AtomicBool::new(false));
        let pipe = child.stderr.take().expect("stderr is piped");
        let reader = {
            let text = Arc::clone(&text);
            let ready = Arc::clone(&ready);
            thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    if ready.load(Ordering::Relaxed) {
                        let _ = writeln!(std::io::stderr(), "{line}");
                    } else {
                        let mut text = text.lock().unwrap_or_else(|e| e.into_inner());
                        text.push_str(&line);
                        text.push('\n');
                    }
                }
            })
        };
        Self {
            text,
            ready,
            reader,
        }
    }

    /// Everything it printed, once the process is gone.
    fn collected(self) -> String {
        let _ = self.reader.join();
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// From now on, passes what it prints on to this process's stderr.
    fn pass_on(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }
}

/// `child`'s ready line (stdout, piped), when it prints it; the sender is
/// dropped when stdout closes first. The reader keeps draining afterwards
/// so the pipe never fills up.
fn ready_line(child: &mut Child) -> mpsc::Receiver<String> {
    let (ready_tx, ready_rx) = mpsc::channel::<String>();
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
    ready_rx
}

/// A free port on 127.0.0.1 below the kernel's ephemeral port range (from
/// `/proc/sys/net/ipv4/ip_local_port_range`), where neither outgoing
/// connections nor listeners on "any free port" get their ports: a
/// restartable control plane's port stays free while it is stopped, unless
/// something asks for that very port. Falls back to an ephemeral port when
/// the range leaves no room below it.
pub(super) fn pick_port() -> std::io::Result<u16> {
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
