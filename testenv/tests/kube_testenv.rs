//! The kube-testenv program and the crate's start-up on bad input and at the
//! end of its life: every case ends with a clear message or a clean exit,
//! within a bound, never a hang. These tests run their own kube-testenv
//! processes, not the shared control plane.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use kplug_testenv::{ControlPlane, StartError, testenv_binary};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Bound for anything that should fail fast (bad flags, taken port, ...).
const FAST: Duration = Duration::from_secs(15);
/// Bound for a start to the ready line (it takes a few seconds).
const START: Duration = Duration::from_secs(90);
/// Bound for a clean shutdown (kube-testenv itself gives up after 15 s).
const STOP: Duration = Duration::from_secs(30);

fn binary() -> PathBuf {
    let binary = testenv_binary();
    assert!(
        binary.is_file(),
        "{} is missing: run `make testenv`",
        binary.display()
    );
    binary
}

/// A child process that is killed if the test fails before it ends.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `child` to exit, at most `limit`; panics (the guard kills it)
/// on timeout.
fn wait_for_exit(child: &mut Guard, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still running after {limit:?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Reads a pipe to the end on a thread.
fn collect(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Streams a pipe's lines to a channel on a thread.
fn lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line starting with `prefix`, within `limit`.
fn line_starting(rx: &mpsc::Receiver<String>, prefix: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with(prefix) => return line,
            Ok(_) => {}
            Err(err) => panic!("no line starting with {prefix:?} within {limit:?}: {err}"),
        }
    }
}

/// Runs kube-testenv with `args` (and TMPDIR=`tmp`) to its exit, which must
/// come within [`FAST`]. Returns the status and stderr.
fn run_to_exit(tmp: &Path, args: &[&str]) -> (ExitStatus, String, Duration) {
    let started = Instant::now();
    let mut child = Guard(
        Command::new(binary())
            .args(args)
            .env("TMPDIR", tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = collect(child.0.stderr.take().unwrap());
    let status = wait_for_exit(&mut child, FAST, "kube-testenv with bad input");
    (status, stderr.join().unwrap(), started.elapsed())
}

/// The entries of a directory, for "nothing left behind" checks.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether a process is gone (or a zombie nobody reaped yet: it has exited).
fn exited(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

#[test]
fn a_missing_binary_says_to_run_make_testenv() {
    let err = ControlPlane::start(Path::new("/nonexistent/kube-testenv")).unwrap_err();
    assert!(matches!(err, StartError::BinaryMissing { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("/nonexistent/kube-testenv") && message.contains("run `make testenv`"),
        "{message}"
    );
}

#[test]
fn a_program_that_exits_early_has_its_stderr_surfaced() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("kube-testenv");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'kube-testenv: error: etcd exploded' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = ControlPlane::start(&fake).unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, StartError::Exited { .. })
            && message.contains("exit status: 3")
            && message.contains("etcd exploded"),
        "{message}"
    );
}

#[test]
fn without_a_kubeconfig_flag_it_prints_usage() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, stderr, _) = run_to_exit(tmp.path(), &[]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--kubeconfig PATH is required") && stderr.contains("Usage:"),
        "{stderr}"
    );
}

#[test]
fn a_taken_port_is_a_quick_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let kubeconfig = tmp.path().join("kubeconfig");
    let (status, stderr, took) = run_to_exit(
        tmp.path(),
        &[
            "--port",
            &port,
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("port {port} on 127.0.0.1 is already in use")),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // It failed before creating anything.
    assert_eq!(entries(tmp.path()), Vec::<String>::new());
}

#[test]
fn a_kubeconfig_under_a_missing_directory_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("no-such-dir").join("kubeconfig");
    let (status, stderr, _) =
        run_to_exit(tmp.path(), &["--kubeconfig", kubeconfig.to_str().unwrap()]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot write the kubeconfig {}",
            kubeconfig.display()
        )) && stderr.contains("no such file or directory"),
        "{stderr}"
    );
    assert_eq!(entries(tmp.path()), Vec::<String>::new());
}

#[test]
fn a_kubeconfig_path_that_is_a_directory_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("a-directory");
    std::fs::create_dir(&kubeconfig).unwrap();
    let (status, stderr, _) =
        run_to_exit(tmp.path(), &["--kubeconfig", kubeconfig.to_str().unwrap()]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot write the kubeconfig {}: it is a directory",
            kubeconfig.display()
        )),
        "{stderr}"
    );
    assert_eq!(entries(tmp.path()), ["a-directory"]);
}

#[test]
fn sigterm_stops_it_cleanly_and_removes_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    let mut child = Guard(
        Command::new(binary())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = lines(child.0.stdout.take().unwrap());
    let stderr = collect(child.0.stderr.take().unwrap());
    let ready = line_starting(&stdout, "kube-testenv ready:", START);
    assert!(
        ready.ends_with(&format!("kubeconfig {}", kubeconfig.display())),
        "{ready}"
    );

    // While it runs: the kubeconfig and one state directory.
    let running = entries(tmp.path());
    assert_eq!(running.len(), 2, "{running:?}");
    assert!(running.contains(&"kubeconfig".to_owned()), "{running:?}");
    assert!(
        running.iter().any(|name| name.starts_with("kube-testenv-")),
        "{running:?}"
    );

    kill(Pid::from_raw(child.0.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_for_exit(&mut child, STOP, "kube-testenv after SIGTERM");
    let stderr = stderr.join().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("received terminated; shutting down") && stderr.contains("stopped cleanly"),
        "{stderr}"
    );
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "{stderr}");
}

#[test]
fn it_stops_cleanly_when_its_parent_dies() {
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    // The shell starts kube-testenv in the background, says its pid, and
    // waits; killing the shell makes kube-testenv an orphan.
    let mut shell = Guard(
        Command::new("sh")
            .arg("-c")
            .arg(r#""$0" --kubeconfig "$1" & echo "pid $!"; wait"#)
            .arg(binary())
            .arg(&kubeconfig)
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = lines(shell.0.stdout.take().unwrap());
    // kube-testenv inherits the pipe, so this ends when kube-testenv exits.
    let stderr = collect(shell.0.stderr.take().unwrap());
    let pid: i32 = line_starting(&stdout, "pid ", FAST)
        .strip_prefix("pid ")
        .unwrap()
        .parse()
        .unwrap();
    // Should the test fail, do not leave kube-testenv behind.
    struct KillOnDrop(i32);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if !exited(self.0) {
                let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
            }
        }
    }
    let _orphan = KillOnDrop(pid);
    line_starting(&stdout, "kube-testenv ready:", START);
    assert!(kubeconfig.is_file());

    shell.0.kill().unwrap();
    shell.0.wait().unwrap();
    let died = Instant::now();
    while !exited(pid) {
        assert!(
            died.elapsed() < STOP,
            "kube-testenv (pid {pid}) still running {STOP:?} after its parent died"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let stderr = stderr.join().unwrap();
    assert!(
        stderr.contains("is gone; shutting down") && stderr.contains("stopped cleanly"),
        "{stderr}"
    );
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "{stderr}");
}

#[test]
fn a_dropped_control_plane_shuts_down_by_itself() {
    let control_plane = ControlPlane::start(&binary()).unwrap();
    let pid = control_plane.pid() as i32;
    let kubeconfig = control_plane.kubeconfig_path().to_path_buf();
    assert!(kubeconfig.is_file());
    assert!(
        control_plane.ready_in() < START,
        "{:?}",
        control_plane.ready_in()
    );

    // Drop closes kube-testenv's stdin; it must stop by itself, well before
    // Drop would resort to killing it (20 s), removing its kubeconfig (a
    // killed one could not).
    let dropping = Instant::now();
    drop(control_plane);
    let took = dropping.elapsed();
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(exited(pid));
    assert!(!kubeconfig.exists(), "{} left behind", kubeconfig.display());
}

#[test]
fn sigterm_during_start_up_still_removes_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    let mut child = Guard(
        Command::new(binary())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = collect(child.0.stdout.take().unwrap());
    let stderr = collect(child.0.stderr.take().unwrap());
    // Wait until it has begun (its state directory exists): the API server
    // takes seconds more to be ready.
    let began = Instant::now();
    while !entries(tmp.path())
        .iter()
        .any(|name| name.starts_with("kube-testenv-"))
    {
        assert!(began.elapsed() < FAST, "no state directory after {FAST:?}");
        thread::sleep(Duration::from_millis(10));
    }
    kill(Pid::from_raw(child.0.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_for_exit(&mut child, STOP, "kube-testenv after SIGTERM in start-up");
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    assert!(
        !stdout.contains("kube-testenv ready:"),
        "it became ready before the signal; the test proves nothing: {stdout}"
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("received terminated"), "{stderr}");
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "{stderr}");
}

#[test]
fn it_cleans_up_when_its_parent_dies_with_the_output_pipes() {
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    let out = tempfile::tempdir().unwrap();
    let ready_file = out.path().join("ready");
    // Like a test binary that exits: the parent goes, and so have the
    // readers of kube-testenv's stdout and stderr (`head` quits after the
    // ready line). Its "shutting down" message then meets a broken pipe,
    // which must not cut the clean-up short.
    let mut shell = Guard(
        Command::new("sh")
            .arg("-c")
            .arg(r#""$0" --kubeconfig "$1" 2>&1 | head -n1 > "$2""#)
            .arg(binary())
            .arg(&kubeconfig)
            .arg(&ready_file)
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let began = Instant::now();
    while !std::fs::read_to_string(&ready_file).is_ok_and(|text| text.ends_with('\n')) {
        assert!(began.elapsed() < START, "not ready within {START:?}");
        thread::sleep(Duration::from_millis(50));
    }
    let ready = std::fs::read_to_string(&ready_file).unwrap();
    assert!(ready.starts_with("kube-testenv ready:"), "{ready}");
    let pid = pid_with_argument(kubeconfig.to_str().unwrap())
        .expect("the kube-testenv process is found by its --kubeconfig argument");
    struct KillOnDrop(i32);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if !exited(self.0) {
                let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
            }
        }
    }
    let _orphan = KillOnDrop(pid);

    shell.0.kill().unwrap();
    shell.0.wait().unwrap();
    let died = Instant::now();
    while !exited(pid) {
        assert!(
            died.elapsed() < STOP,
            "kube-testenv (pid {pid}) still running {STOP:?} after its parent died"
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(entries(tmp.path()), Vec::<String>::new());
}

/// The pid of the running process that has `argument` on its command line.
fn pid_with_argument(argument: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let entry = entry.ok()?;
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        let is_kube_testenv = cmdline
            .split(|&byte| byte == 0)
            .next()
            .is_some_and(|program| program.ends_with(b"kube-testenv"));
        let has_argument = cmdline
            .split(|&byte| byte == 0)
            .any(|arg| arg == argument.as_bytes());
        (is_kube_testenv && has_argument).then_some(pid)
    })
}

/// Runs kube-testenv with `args` (and TMPDIR=`tmp`) until its ready line;
/// returns the process, the ready line and its stderr (complete once it
/// exits).
fn run_until_ready(tmp: &Path, args: &[&str]) -> (Guard, String, thread::JoinHandle<String>) {
    let mut child = Guard(
        Command::new(binary())
            .args(args)
            .env("TMPDIR", tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = lines(child.0.stdout.take().unwrap());
    let stderr = collect(child.0.stderr.take().unwrap());
    let ready = line_starting(&stdout, "kube-testenv ready:", START);
    (child, ready, stderr)
}

#[test]
fn with_a_data_dir_it_keeps_its_state_and_comes_back_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let kubeconfig = tmp.path().join("kubeconfig");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let args = [
        "--data-dir",
        data.to_str().unwrap(),
        "--port",
        &port,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ];
    let (mut first, first_ready, first_stderr) = run_until_ready(tmp.path(), &args);
    assert!(
        first_ready.contains(&format!(" at https://127.0.0.1:{port},")),
        "{first_ready}"
    );
    let written = std::fs::read(&kubeconfig).unwrap();
    // No temporary state directory: everything is in the data directory.
    assert_eq!(entries(tmp.path()), ["data", "kubeconfig"]);
    assert_eq!(
        entries(&data),
        ["control-plane.log", "etcd", "kube-testenv.lock", "pki"]
    );
    assert_eq!(
        entries(&data.join("pki")),
        [
            "admin.crt",
            "admin.key",
            "apiserver.crt",
            "apiserver.key",
            "ca.crt",
            "service-account.key"
        ]
    );

    kill(Pid::from_raw(first.0.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_for_exit(&mut first, STOP, "kube-testenv after SIGTERM");
    let stderr = first_stderr.join().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains(&format!(
            "stopped cleanly; the data directory {} and the kubeconfig {} are kept",
            data.display(),
            kubeconfig.display()
        )) && !stderr.contains("reusing"),
        "{stderr}"
    );
    // Kept: the kubeconfig is valid again once it is back.
    assert_eq!(std::fs::read(&kubeconfig).unwrap(), written);

    // Again, on the same port at once (the first one's connections may be
    // in TIME_WAIT), with the same data.
    let (mut second, second_ready, second_stderr) = run_until_ready(tmp.path(), &args);
    assert!(
        second_ready.contains(&format!(" at https://127.0.0.1:{port},")),
        "{second_ready}"
    );
    assert_eq!(
        std::fs::read(&kubeconfig).unwrap(),
        written,
        "the same kubeconfig"
    );
    kill(Pid::from_raw(second.0.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_for_exit(&mut second, STOP, "kube-testenv after SIGTERM");
    let stderr = second_stderr.join().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains(&format!("reusing the data directory {}", data.display())),
        "{stderr}"
    );
    // The log of the data directory holds both runs.
    let log = std::fs::read_to_string(data.join("control-plane.log")).unwrap();
    assert_eq!(log.matches("--- kube-testenv (pid ").count(), 2);
}

#[test]
fn a_data_dir_that_is_a_file_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    let (status, stderr, took) = run_to_exit(
        tmp.path(),
        &[
            "--data-dir",
            file.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot use the data directory {}", file.display())),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(entries(tmp.path()), ["a-file"]);
}

#[test]
fn a_data_dir_with_damaged_certificates_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(data.join("pki")).unwrap();
    std::fs::write(data.join("pki").join("ca.crt"), "garbage").unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    let (status, stderr, took) = run_to_exit(
        tmp.path(),
        &[
            "--data-dir",
            data.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the certificates in {} cannot be reused",
            data.join("pki").display()
        )) && stderr.contains("remove that directory to get new ones"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // Nothing started, nothing written: no etcd data, no kubeconfig.
    assert!(!data.join("etcd").exists());
    assert!(!kubeconfig.exists());
}
