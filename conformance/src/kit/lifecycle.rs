//! Sockets across process starts: a second copy next to a live one, a plain
//! file where the socket was, a stale socket after SIGKILL, and a fresh
//! instance id per start.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, Instant};

use kplug_proto::v1::HeartbeatRequest;

use super::{Kit, secs};
use crate::checks::Verdict;
use crate::process::Plugin;

/// What the kit writes where the socket was, for `non-socket-file`.
const NOT_A_SOCKET: &str =
    "kplug-conformance: a plain file, not a socket; a plugin must not delete it\n";

impl Kit<'_> {
    /// `live-socket`: a second copy of the plugin, started while the first
    /// serves, must fail without touching the first's socket.
    pub(super) async fn live_socket(&mut self, first: &HeartbeatRequest) {
        if !self.wants("live-socket") {
            return;
        }
        let started = Instant::now();
        let path = self.socket_of(first);
        let inode = std::fs::symlink_metadata(&path).map(|m| m.ino()).ok();
        let verdict = match self.start_plugin("second") {
            Err(why) => Verdict::Fail(why),
            Ok(mut second) => {
                let verdict = self.judge_second(first, &mut second, &path, inode).await;
                second.kill().await;
                verdict
            }
        };
        self.record("live-socket", verdict, started);
    }

    async fn judge_second(
        &self,
        first: &HeartbeatRequest,
        second: &mut Plugin,
        path: &Path,
        inode: Option<u64>,
    ) -> Verdict {
        let deadline = Instant::now() + self.options.start_timeout;
        loop {
            let stolen = std::fs::symlink_metadata(path).map(|m| m.ino()).ok() != inode;
            let other = self
                .registry
                .heartbeats()
                .into_iter()
                .find(|h| h.request.instance_id != first.instance_id);
            if stolen {
                return Verdict::Fail(format!(
                    "a second instance replaced {}, which the first was serving",
                    path.display()
                ));
            }
            if let Some(h) = other {
                return Verdict::Fail(format!(
                    "a second instance ({:?}) registered while the first served the socket",
                    h.request.instance_id
                ));
            }
            if let Some(status) = second.wait(Duration::from_millis(100)).await {
                if status.success() {
                    return Verdict::Fail("a second instance exited 0; failing to bind is a start-up error, with a non-zero status".into());
                }
                return match self.probe(first).await {
                    Ok(_) => Verdict::Pass(format!(
                        "the second instance exited ({status}): {}",
                        last_line(&second.log_tail(1))
                    )),
                    Err(why) => Verdict::Fail(format!(
                        "after a second instance started, the first stopped serving: {why}"
                    )),
                };
            }
            if Instant::now() > deadline {
                return Verdict::Fail(format!(
                    "a second instance was still running {} after it started; it must fail at start-up while another serves {}",
                    secs(self.options.start_timeout),
                    path.display()
                ));
            }
        }
    }

    /// `non-socket-file`, `stale-socket` and `restart`: SIGKILL the plugin,
    /// then start it over a plain file, then over its stale socket. Returns
    /// the heartbeat of the instance running afterwards.
    pub(super) async fn restarts(
        &mut self,
        first: &HeartbeatRequest,
    ) -> Result<HeartbeatRequest, String> {
        if !self.wants_any(&["non-socket-file", "stale-socket", "restart"]) {
            return Ok(first.clone());
        }
        let started = Instant::now();
        if let Some(plugin) = self.plugin.as_mut() {
            plugin.kill().await;
        }
        let path = self.socket_of(first);
        let stale_left = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if self.wants("non-socket-file") {
            let verdict = self.judge_plain_file(&path).await;
            self.record("non-socket-file", verdict, started);
        }
        let restarted = Instant::now();
        self.plugin = Some(self.start_plugin("restart")?);
        let registered = self.await_registration(restarted).await;
        let stale = match &registered {
            Ok(_) if stale_left => Verdict::Pass(
                "started over the socket its killed predecessor left, and registered".into(),
            ),
            Ok(_) => Verdict::Skip("the killed plugin left no socket behind to be stale".into()),
            Err(why) => Verdict::Fail(format!(
                "the plugin did not start over the stale socket {}: {why}",
                path.display()
            )),
        };
        self.record("stale-socket", stale, restarted);
        let now = registered?.request;
        let fresh = if now.instance_id == first.instance_id {
            Verdict::Fail(format!(
                "the restarted process heartbeats with instance id {:?}, the same as before; generate a fresh one per start",
                now.instance_id
            ))
        } else {
            Verdict::Pass(format!(
                "{:?}, then {:?}",
                first.instance_id, now.instance_id
            ))
        };
        self.record("restart", fresh, restarted);
        Ok(now)
    }

    /// Starts the plugin with a plain file where its socket was: it must
    /// fail and leave the file alone. The stale socket is kept aside and put
    /// back afterwards.
    async fn judge_plain_file(&mut self, path: &Path) -> Verdict {
        let aside = path.with_extension("sock.kplug-conformance");
        let had_socket = std::fs::rename(path, &aside).is_ok();
        if let Err(e) = std::fs::write(path, NOT_A_SOCKET) {
            return Verdict::Fail(format!("the kit cannot write {}: {e}", path.display()));
        }
        let verdict = match self.start_plugin("over-a-file") {
            Err(why) => Verdict::Fail(why),
            Ok(mut plugin) => {
                let status = plugin.wait(self.options.start_timeout).await;
                let intact = std::fs::read_to_string(path).is_ok_and(|t| t == NOT_A_SOCKET);
                let verdict = match status {
                    _ if !intact => Verdict::Fail(format!("the plugin deleted or replaced {}, a plain file", path.display())),
                    None => Verdict::Fail(format!(
                        "the plugin was still running {} after it started with a plain file at {}; that is a start-up error",
                        secs(self.options.start_timeout),
                        path.display()
                    )),
                    Some(s) if s.success() => Verdict::Fail("the plugin exited 0 with a plain file at its socket path; that is a start-up error, with a non-zero status".into()),
                    Some(s) => Verdict::Pass(format!("exited ({s}), file intact: {}", last_line(&plugin.log_tail(1)))),
                };
                plugin.kill().await;
                verdict
            }
        };
        std::fs::remove_file(path).ok();
        if had_socket {
            std::fs::rename(&aside, path).ok();
        }
        verdict
    }
}

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or("(no output)")
}
