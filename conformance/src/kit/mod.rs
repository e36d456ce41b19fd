//! The run: the kit plays the operator against one plugin, through one
//! sequence of events, and judges each check on what it saw.
//!
//! The sequence, each step only when a selected check needs it:
//!
//! 1. serve `registry.sock` failing every heartbeat, start the plugin, and
//!    time its retries (`backoff`); then accept;
//! 2. judge the first accepted heartbeat and `GetInfo` (`handshake`),
//!    `Probe`, and the heartbeats that follow (`heartbeat-*`);
//! 3. call the plugin (`reconcile`, `finalize`, `bad-input`,
//!    `message-limit`, `cases`);
//! 4. start a second copy (`live-socket`); restart the registry
//!    (`reregister`);
//! 5. SIGKILL the plugin, put a plain file where its socket was and start it
//!    (`non-socket-file`); put the stale socket back and start it again
//!    (`stale-socket`, `restart`);
//! 6. SIGTERM it (`unregister`, `drain`, `exit`).

mod calls;
mod lifecycle;
mod mutate;
mod registration;
mod shutdown;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kplug_proto::v1::HeartbeatRequest;
use kplug_proto::v1::plugin_client::PluginClient;
use tonic::transport::Channel;

use crate::checks::{CHECKS, Check, Verdict};
use crate::process::Plugin;
use crate::registry::{Heartbeat, Registry};

/// The interval a plugin is started with (`KPLUG_HEARTBEAT_INTERVAL`): long,
/// so that following the registry's shorter one shows.
const START_INTERVAL: Duration = Duration::from_secs(3);
/// The interval the kit's registry answers with.
const REGISTRY_INTERVAL: Duration = Duration::from_millis(300);
/// How long a plugin call may take.
const CALL_DEADLINE: Duration = Duration::from_secs(10);

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The socket dir the plugin is given (`KPLUG_SOCKET_DIR`); created when
    /// missing.
    pub socket_dir: PathBuf,
    /// The command that starts the plugin, and its arguments.
    pub command: Vec<String>,
    /// Run only these checks (all when `None`).
    pub only: Option<BTreeSet<&'static str>>,
    /// The shared cases to run (`cases.json`); the `cases` check is skipped
    /// without them.
    pub cases: Option<PathBuf>,
    /// Run only the cases these select, in file order: case names, or
    /// globs in which `*` stands for any characters (`mutate-*`); every
    /// case when empty. A pattern that selects no case of the file is an
    /// [`Error::Cases`]. Without `cases` there are none to select.
    pub only_cases: Vec<String>,
    /// How long the plugin may take from start to its first heartbeat.
    pub start_timeout: Duration,
}

/// One check's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The check.
    pub check: &'static Check,
    /// What it found.
    pub verdict: Verdict,
    /// How long it took.
    pub took: Duration,
}

/// Why the kit could not run at all (not a plugin's failure).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket dir cannot be used.
    #[error("socket dir {dir}: {message}")]
    SocketDir {
        /// The directory.
        dir: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The cases file cannot be read.
    #[error("cases file {file}: {message}")]
    Cases {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The plugin command cannot be started at all.
    #[error("cannot start the plugin: {0}")]
    Start(String),
    /// Something on this machine failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Runs the selected checks against the plugin and returns every check's
/// outcome, in [`CHECKS`] order.
///
/// # Errors
/// When the kit cannot run (a socket dir in use, an unreadable cases file,
/// a case selection that selects no case), before the plugin is started.
pub async fn run(options: &Options) -> Result<Vec<Outcome>, Error> {
    let cases = read_cases(options)?;
    prepare_socket_dir(&options.socket_dir).await?;
    let mut kit = Kit {
        options,
        cases,
        registry: Registry::new(&options.socket_dir, REGISTRY_INTERVAL),
        plugin: None,
        logs: tempfile::tempdir()?,
        starts: 0,
        outcomes: Vec::new(),
    };
    kit.registry.start().await?;
    let result = kit.sequence().await;
    if let Some(plugin) = kit.plugin.as_mut() {
        plugin.kill().await;
    }
    kit.registry.stop().await;
    if kit.starts == 0 {
        // The first start failed: a wrong command, not a failing plugin.
        return Err(Error::Start(result.err().unwrap_or_default()));
    }
    if let Err(why) = result {
        kit.fail_rest(&why);
    }
    kit.outcomes
        .sort_by_key(|o| CHECKS.iter().position(|c| c.name == o.check.name));
    Ok(kit.outcomes)
}

/// The cases file, parsed, with the cases `--case` selects; `None`
/// without one.
fn read_cases(options: &Options) -> Result<Option<serde_json::Value>, Error> {
    let Some(file) = &options.cases else {
        return Ok(None);
    };
    let error = |message: String| Error::Cases {
        file: file.clone(),
        message,
    };
    let text = std::fs::read_to_string(file).map_err(|e| error(e.to_string()))?;
    let all = serde_json::from_str(&text).map_err(|e| error(e.to_string()))?;
    crate::cases::select(&all, &options.only_cases)
        .map(Some)
        .map_err(error)
}

/// Refuses a socket dir an operator (or another kit) is serving; creates it
/// when missing.
async fn prepare_socket_dir(dir: &std::path::Path) -> Result<(), Error> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| Error::SocketDir {
            dir: dir.to_owned(),
            message: e.to_string(),
        })?;
    let registry = dir.join(kplug_proto::REGISTRY_SOCKET);
    if registry.exists() && kplug_proto::socket::is_live(&registry).await {
        return Err(Error::SocketDir {
            dir: dir.to_owned(),
            message: format!(
                "{} is served by a live process (an operator?); give the kit a socket dir of its own",
                registry.display()
            ),
        });
    }
    Ok(())
}

/// The run's state.
struct Kit<'a> {
    options: &'a Options,
    cases: Option<serde_json::Value>,
    registry: Registry,
    /// The plugin process running now.
    plugin: Option<Plugin>,
    logs: tempfile::TempDir,
    /// How many times the plugin command was started.
    starts: usize,
    outcomes: Vec<Outcome>,
}

impl Kit<'_> {
    /// The whole sequence; an `Err` is a reason the remaining checks cannot
    /// run (the plugin never registered, or died).
    async fn sequence(&mut self) -> Result<(), String> {
        let first = self.start_and_register().await?;
        self.handshake_and_heartbeats(&first).await;
        self.calls(&first).await?;
        self.live_socket(&first).await;
        self.reregister(&first).await?;
        let current = self.restarts(&first).await?;
        self.shutdown(&current).await;
        Ok(())
    }

    /// Whether `name` is selected.
    fn wants(&self, name: &str) -> bool {
        self.options
            .only
            .as_ref()
            .is_none_or(|only| only.contains(name))
    }

    /// Whether any of `names` is selected.
    fn wants_any(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.wants(n))
    }

    /// Records `verdict` for `name` (when selected), timed from `since`.
    fn record(&mut self, name: &str, verdict: Verdict, since: Instant) {
        if !self.wants(name) {
            return;
        }
        let check = crate::checks::find(name).expect("the kit records only catalogued checks");
        self.outcomes.push(Outcome {
            check,
            verdict,
            took: since.elapsed(),
        });
    }

    /// Fails every selected check without an outcome: the run stopped
    /// (the plugin would not start, never registered, or stopped serving),
    /// so the plugin did not show that it keeps their rules.
    fn fail_rest(&mut self, why: &str) {
        for check in CHECKS {
            if self.wants(check.name) && !self.outcomes.iter().any(|o| o.check == check) {
                self.outcomes.push(Outcome {
                    check,
                    verdict: Verdict::Fail(format!("not run: {why}")),
                    took: Duration::ZERO,
                });
            }
        }
    }

    /// Starts the plugin command (again), logging to a file of its own.
    fn start_plugin(&mut self, label: &str) -> Result<Plugin, String> {
        let log = self
            .logs
            .path()
            .join(format!("{}-{label}.log", self.starts + 1));
        let plugin = Plugin::start(
            &self.options.command,
            &self.options.socket_dir,
            START_INTERVAL,
            log,
        )
        .map_err(|e| e.to_string())?;
        self.starts += 1;
        Ok(plugin)
    }

    /// The plugin's socket, as its heartbeat names it.
    fn socket_of(&self, heartbeat: &HeartbeatRequest) -> PathBuf {
        self.options.socket_dir.join(&heartbeat.socket)
    }

    /// A client for the plugin's socket, with the protocol's message limit.
    fn client(&self, heartbeat: &HeartbeatRequest) -> PluginClient<Channel> {
        let limit = kplug_proto::limits::MAX_PLUGIN_MESSAGE_BYTES;
        PluginClient::new(kplug_proto::socket::channel(&self.socket_of(heartbeat)))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit)
    }

    /// Waits for the first heartbeat accepted after `since`, for the
    /// start-up timeout; fails early, with the plugin's output, if the
    /// process exits.
    async fn await_registration(&mut self, since: Instant) -> Result<Heartbeat, String> {
        let deadline = Instant::now() + self.options.start_timeout;
        let new = |h: &Heartbeat| h.accepted && h.received >= since;
        loop {
            let (heartbeats, found) = self
                .registry
                .wait_heartbeats(Duration::from_millis(200), |hs| hs.iter().any(new))
                .await;
            if found {
                return Ok(heartbeats.into_iter().find(new).expect("found above"));
            }
            let plugin = self.plugin.as_mut().expect("a plugin was started");
            if let Some(status) = plugin.exited() {
                return Err(format!(
                    "the plugin exited ({status}) before it registered; its output ends with:\n{}",
                    plugin.log_tail(20)
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no accepted heartbeat within {:?} of the plugin's start (--start-timeout); its output ends with:\n{}",
                    self.options.start_timeout,
                    plugin.log_tail(20)
                ));
            }
        }
    }
}

/// `message` as a request with `deadline`.
fn timed<T>(message: T, deadline: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(deadline);
    request
}

/// A duration as seconds with two decimals, for messages.
fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}
