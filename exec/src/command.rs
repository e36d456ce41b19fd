//! Running one command for one call: the request as JSON on stdin, the
//! call in the environment, a deadline that kills the whole process group,
//! and a bound on how many run at once.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::Semaphore;

use crate::manifest::CommandSpec;

/// How much of stdout is read: a plugin's answer is at most 2 MiB.
const MAX_STDOUT_BYTES: u64 = 2 * 1024 * 1024;
/// How much of the end of stderr is kept for a failure's message.
const STDERR_TAIL_BYTES: usize = 1024;

/// The environment variable naming the call (`reconcile`, `finalize`,
/// `validate`, `default`, `hook`, `mutate`).
pub const CALL_ENV: &str = "KPLUG_CALL";
/// The environment variable naming the implementation chosen.
pub const IMPLEMENTATION_ENV: &str = "KPLUG_IMPLEMENTATION";
/// The environment variable holding the object's namespace (the base
/// object's, at admission the admitted object's, for mutate the child's).
pub const NAMESPACE_ENV: &str = "KPLUG_NAMESPACE";
/// The environment variable holding the object's name.
pub const NAME_ENV: &str = "KPLUG_NAME";
/// The environment variable naming the hook run (hooks only).
pub const HOOK_ENV: &str = "KPLUG_HOOK";
/// The environment variable naming the hook's phase (`before-reconcile`,
/// …; hooks only).
pub const PHASE_ENV: &str = "KPLUG_PHASE";

/// What the call is about, for the command's environment.
#[derive(Clone, Debug)]
pub struct CallEnv<'a> {
    /// `reconcile`, `finalize`, `validate`, `default`, `hook` or `mutate`.
    pub call: &'a str,
    /// The implementation chosen.
    pub implementation: &'a str,
    /// The object's namespace.
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// For a hook: its name and phase.
    pub hook: Option<(&'a str, &'a str)>,
}

/// How a run ended.
#[derive(Debug)]
pub enum Finished {
    /// It exited (or was killed by a signal: no code).
    Exited {
        /// The exit code.
        code: Option<i32>,
        /// Its stdout, up to 2 MiB.
        stdout: Vec<u8>,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// It ran past its deadline and was killed with its process group.
    TimedOut {
        /// The deadline.
        after: Duration,
        /// The end of its stderr so far.
        stderr_tail: String,
    },
}

/// One command of the manifest, with its concurrency bound.
#[derive(Clone, Debug)]
pub struct Runner {
    spec: CommandSpec,
    working_dir: PathBuf,
    slots: Arc<Semaphore>,
}

impl Runner {
    /// A runner for `spec`, run in `working_dir`.
    pub fn new(spec: CommandSpec, working_dir: PathBuf) -> Self {
        let slots = Arc::new(Semaphore::new(spec.concurrency));
        Self {
            spec,
            working_dir,
            slots,
        }
    }

    /// The program, for messages.
    pub fn program(&self) -> &str {
        &self.spec.command[0]
    }

    /// The command, in its working directory, with the manifest's
    /// environment and the call's.
    fn command(&self, env: &CallEnv<'_>) -> Command {
        let (program, args) = self.spec.command.split_first().expect("checked at load");
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(&self.working_dir)
            .envs(&self.spec.env)
            .env(CALL_ENV, env.call)
            .env(IMPLEMENTATION_ENV, env.implementation)
            .env(NAMESPACE_ENV, env.namespace)
            .env(NAME_ENV, env.name);
        if let Some((hook, phase)) = env.hook {
            command.env(HOOK_ENV, hook).env(PHASE_ENV, phase);
        }
        command
    }

    /// Runs the command once, waiting for a free slot first; `stdin` is
    /// written to it and closed.
    ///
    /// # Errors
    /// The command cannot be started (missing, not executable).
    pub async fn run(&self, env: &CallEnv<'_>, stdin: Vec<u8>) -> std::io::Result<Finished> {
        let _slot = self
            .slots
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let mut child = self
            .command(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that the deadline kills what it started too.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        // Killed whichever way this function ends, even if the call's future
        // is dropped halfway (kill_on_drop alone would spare its children).
        let group = GroupKill(
            child
                .id()
                .and_then(|pid| i32::try_from(pid).ok())
                .map(Pid::from_raw),
        );
        let mut input = child.stdin.take().expect("piped");
        let mut output = child.stdout.take().expect("piped");
        let mut errors = child.stderr.take().expect("piped");
        // Outside the timed future, so that what the command wrote before
        // its deadline is still there for the message.
        let mut stderr = Vec::new();
        let work = async {
            // A command that does not read its stdin gets EPIPE; that is its
            // choice, not an error.
            let feed = async {
                input.write_all(&stdin).await.ok();
                drop(input);
            };
            let mut stdout = Vec::new();
            let mut limited = (&mut output).take(MAX_STDOUT_BYTES);
            let read_out = limited.read_to_end(&mut stdout);
            let read_err = tail(&mut errors, &mut stderr);
            let (_, out, ()) = tokio::join!(feed, read_out, read_err);
            out?;
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((status, stdout))
        };
        let finished = tokio::time::timeout(self.spec.timeout(), work).await;
        // Whatever it left running in its group goes with it, and on a
        // timeout the command itself.
        drop(group);
        match finished {
            Ok(result) => {
                let (status, stdout) = result?;
                Ok(Finished::Exited {
                    code: status.code(),
                    stdout,
                    stderr_tail: text_tail(&stderr),
                })
            }
            Err(_) => Ok(Finished::TimedOut {
                after: self.spec.timeout(),
                stderr_tail: text_tail(&stderr),
            }),
        }
    }
}

/// Kills a run's process group when dropped.
struct GroupKill(Option<Pid>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            killpg(group, Signal::SIGKILL).ok();
        }
    }
}

/// Reads `from` to its end, keeping only the last bytes.
async fn tail(from: &mut (impl AsyncReadExt + Unpin), into: &mut Vec<u8>) {
    let mut buffer = [0_u8; 4096];
    while let Ok(n) = from.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        into.extend_from_slice(&buffer[..n]);
        if into.len() > 2 * STDERR_TAIL_BYTES {
            into.drain(..into.len() - STDERR_TAIL_BYTES);
        }
    }
}

/// The last lines of `bytes`, as text, trimmed.
fn text_tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).trim().to_owned()
}
