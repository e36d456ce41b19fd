//! Registration: backoff while the operator fails, the handshake, Probe,
//! the heartbeats' content and interval, and registering with a restarted
//! operator.

use std::os::unix::fs::FileTypeExt;
use std::time::{Duration, Instant};

use kplug_proto::v1::{GetInfoRequest, GetInfoResponse, HeartbeatRequest};

use super::{CALL_DEADLINE, Kit, REGISTRY_INTERVAL, START_INTERVAL, secs, timed};
use crate::checks::Verdict;
use crate::registry::Heartbeat;

/// Failed heartbeats timed for `backoff`: five waits, 0.1 s to 1.6 s.
const BACKOFF_FAILURES: usize = 6;
/// How much later than the rule's longest wait a retry may come: scheduling
/// on a loaded machine, never enough to hide a plugin that waits its whole
/// interval instead of backing off.
const LATE_SLACK: Duration = Duration::from_millis(1500);
/// Timer granularity allowed below the rule's shortest wait.
const EARLY_SLACK: Duration = Duration::from_millis(20);
/// Accepted heartbeats collected for `heartbeat-*`.
const HEARTBEATS: usize = 6;

impl Kit<'_> {
    /// Starts the plugin, times its retries against a failing registry when
    /// `backoff` is selected, and returns its first accepted heartbeat.
    pub(super) async fn start_and_register(&mut self) -> Result<HeartbeatRequest, String> {
        let failing = self.wants("backoff");
        self.registry.fail(failing);
        let started = Instant::now();
        self.plugin = Some(self.start_plugin("first")?);
        if failing {
            let timeout = self.options.start_timeout + START_INTERVAL * BACKOFF_FAILURES as u32;
            let (heartbeats, _) = self
                .registry
                .wait_heartbeats(timeout, |hs| hs.len() >= BACKOFF_FAILURES)
                .await;
            let verdict = Verdict::from_result(judge_backoff(&heartbeats));
            self.record("backoff", verdict, started);
            self.registry.fail(false);
        }
        let first = self.await_registration(started).await.inspect_err(|why| {
            self.record("handshake", Verdict::Fail(why.clone()), started);
        })?;
        Ok(first.request)
    }

    /// `handshake`, `probe`, `heartbeat-content` and `heartbeat-interval`.
    pub(super) async fn handshake_and_heartbeats(&mut self, first: &HeartbeatRequest) {
        if self.wants("handshake") {
            let started = Instant::now();
            let verdict = Verdict::from_result(self.judge_handshake(first).await);
            self.record("handshake", verdict, started);
        }
        if self.wants("probe") {
            let started = Instant::now();
            let verdict = match self.probe(first).await {
                Ok((ready, message)) => {
                    Verdict::Pass(format!("ready: {ready}, message {message:?}"))
                }
                Err(why) => Verdict::Fail(why),
            };
            self.record("probe", verdict, started);
        }
        if self.wants_any(&["heartbeat-content", "heartbeat-interval"]) {
            let started = Instant::now();
            // At the registry's interval these take about 2 s; at the start
            // interval (a plugin that ignores the answer), 15 s: collect for
            // less, and judge what came.
            let window = START_INTERVAL * 4;
            let id = first.instance_id.clone();
            let ours = move |h: &&Heartbeat| h.accepted && h.request.instance_id == id;
            let (heartbeats, _) = self
                .registry
                .wait_heartbeats(window, |hs| {
                    hs.iter().filter(ours.clone()).count() >= HEARTBEATS
                })
                .await;
            let ours: Vec<Heartbeat> = heartbeats.iter().filter(ours).cloned().collect();
            let content = judge_content(first, &self.registry.heartbeats());
            self.record("heartbeat-content", Verdict::from_result(content), started);
            let interval = judge_interval(&ours, self.registry.interval(), window);
            self.record(
                "heartbeat-interval",
                Verdict::from_result(interval),
                started,
            );
        }
    }

    /// The heartbeat's own fields (the operator's checks), its socket, and
    /// `GetInfo` on it.
    async fn judge_handshake(&self, first: &HeartbeatRequest) -> Result<String, String> {
        heartbeat_fields(first)?;
        let path = self.socket_of(first);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_socket() => {}
            Ok(_) => return Err(format!("{} is not a socket", path.display())),
            Err(e) => {
                return Err(format!(
                    "{}: {e}; serve before the first heartbeat",
                    path.display()
                ));
            }
        }
        let request = timed(GetInfoRequest {}, CALL_DEADLINE);
        let info = self
            .client(first)
            .get_info(request)
            .await
            .map_err(|s| {
                format!(
                    "GetInfo on {} failed: {:?}: {}",
                    path.display(),
                    s.code(),
                    s.message()
                )
            })?
            .into_inner();
        agreement(first, &info)?;
        hooks_advertised(first)?;
        if info.description.len() > kplug_proto::limits::MAX_DESCRIPTION_LEN {
            return Err(format!(
                "GetInfo's description is {} bytes; at most {} are accepted",
                info.description.len(),
                kplug_proto::limits::MAX_DESCRIPTION_LEN
            ));
        }
        Ok(format!(
            "plugin {} {} ({}), {} offer(s), serving {}",
            first.name,
            first.version,
            first.instance_id,
            first.offers.len(),
            first.socket
        ))
    }

    /// `reregister`: the registry goes away for a second and a new one,
    /// which knows no plugin, starts; the plugin must find it.
    pub(super) async fn reregister(&mut self, first: &HeartbeatRequest) -> Result<(), String> {
        if !self.wants("reregister") {
            return Ok(());
        }
        let started = Instant::now();
        self.registry.stop().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.registry
            .start()
            .await
            .map_err(|e| format!("cannot restart the kit's registry: {e}"))?;
        let restarted = Instant::now();
        // Backing off at most to the interval, plus a heartbeat's deadline.
        let bound = REGISTRY_INTERVAL + kplug_proto::rules::HEARTBEAT_CALL_DEADLINE + LATE_SLACK;
        let (heartbeats, found) = self
            .registry
            .wait_heartbeats(bound, |hs| hs.iter().any(|h| h.accepted))
            .await;
        let verdict = match heartbeats.first() {
            None => Verdict::Fail(format!(
                "no heartbeat reached the restarted registry within {}",
                secs(bound)
            )),
            Some(_) if !found => Verdict::Fail("no accepted heartbeat after the restart".into()),
            Some(h) if h.request.instance_id != first.instance_id => Verdict::Fail(format!(
                "after the registry restarted, the plugin came back as instance {:?}, not {:?}: an operator restart must not restart the plugin",
                h.request.instance_id, first.instance_id
            )),
            Some(h) => Verdict::Pass(format!(
                "registered again {} after the registry came back",
                secs(h.received - restarted)
            )),
        };
        self.record("reregister", verdict, started);
        Ok(())
    }
}

/// Times the waits between failed heartbeats against the backoff rule.
fn judge_backoff(heartbeats: &[Heartbeat]) -> Result<String, String> {
    let failed: Vec<&Heartbeat> = heartbeats.iter().filter(|h| !h.accepted).collect();
    if failed.len() < BACKOFF_FAILURES {
        return Err(format!(
            "only {} heartbeat(s) while the registry failed; a plugin retries, backing off from 100 ms",
            failed.len()
        ));
    }
    let mut waits = Vec::new();
    for (n, pair) in failed.windows(2).take(BACKOFF_FAILURES - 1).enumerate() {
        let attempt = u32::try_from(n + 1).expect("a handful of attempts");
        // The wait starts when the plugin gets the failure, which is after
        // the registry answered: measured from the answer, it cannot be
        // shorter than the plugin's own.
        let waited = pair[1].received.saturating_duration_since(pair[0].answered);
        let shortest = kplug_proto::rules::backoff_delay(attempt, START_INTERVAL, 0.999_999);
        let longest = kplug_proto::rules::backoff_delay(attempt, START_INTERVAL, 0.0);
        if waited + EARLY_SLACK < shortest {
            return Err(format!(
                "retry {attempt} came {} after failure {attempt}; the rule waits at least {}",
                secs(waited),
                secs(shortest)
            ));
        }
        if waited > longest + LATE_SLACK {
            return Err(format!(
                "retry {attempt} came {} after failure {attempt}; the rule waits at most {}",
                secs(waited),
                secs(longest)
            ));
        }
        waits.push(secs(waited));
    }
    Ok(format!("waited {} after failures 1–5", waits.join(", ")))
}

/// Every heartbeat of the first one's instance carries the same
/// description.
fn judge_content(first: &HeartbeatRequest, heartbeats: &[Heartbeat]) -> Result<String, String> {
    let ours: Vec<&HeartbeatRequest> = heartbeats
        .iter()
        .map(|h| &h.request)
        .filter(|r| r.instance_id == first.instance_id)
        .collect();
    if ours.len() < 3 {
        return Err(format!(
            "only {} heartbeat(s) of instance {:?} to compare",
            ours.len(),
            first.instance_id
        ));
    }
    for (i, r) in ours.iter().enumerate() {
        let changed = [
            ("name", r.name != first.name),
            ("version", r.version != first.version),
            ("protocol", r.protocol != first.protocol),
            ("socket", r.socket != first.socket),
            ("offers", r.offers != first.offers),
            ("capabilities", r.capabilities != first.capabilities),
            ("hooks", r.hooks != first.hooks),
            ("call policies", r.call_policies != first.call_policies),
        ]
        .into_iter()
        .find(|(_, changed)| *changed);
        if let Some((field, _)) = changed {
            return Err(format!(
                "heartbeat {} of instance {:?} changed its {field} (first {:?}, then {:?})",
                i + 1,
                first.instance_id,
                first,
                r
            ));
        }
    }
    Ok(format!("{} heartbeats, all alike", ours.len()))
}

/// The waits between accepted heartbeats follow the registry's interval.
fn judge_interval(ours: &[Heartbeat], asked: Duration, window: Duration) -> Result<String, String> {
    // The first wait may still be the start interval's: the answer that
    // changes it arrives during that heartbeat.
    let mut waits: Vec<Duration> = ours
        .windows(2)
        .skip(1)
        .map(|p| p[1].received.saturating_duration_since(p[0].answered))
        .collect();
    if waits.is_empty() {
        return Err(format!(
            "{} accepted heartbeat(s) in {}; asked for one every {}, the plugin keeps another interval",
            ours.len(),
            secs(window),
            secs(asked)
        ));
    }
    waits.sort_unstable();
    let shortest = waits[0];
    let median = waits[waits.len() / 2];
    if shortest < asked / 2 {
        return Err(format!(
            "a heartbeat came {} after the previous one; the registry asked for {}",
            secs(shortest),
            secs(asked)
        ));
    }
    // Half-way between the asked interval and the start one: a plugin that
    // keeps its start interval lands above it, one that follows the answer,
    // however loaded the machine, well below.
    if median > (asked + START_INTERVAL) / 2 {
        return Err(format!(
            "heartbeats came every {} (median); the registry asked for {} (the plugin started with {})",
            secs(median),
            secs(asked),
            secs(START_INTERVAL)
        ));
    }
    Ok(format!(
        "every {} (median of {}); asked for {}",
        secs(median),
        waits.len(),
        secs(asked)
    ))
}

/// The heartbeat's own fields: what the operator checks, its socket path,
/// an offer.
fn heartbeat_fields(first: &HeartbeatRequest) -> Result<(), String> {
    kplug_checks::heartbeat::check_heartbeat(first)
        .map_err(|why| format!("the operator would refuse the heartbeat: {why}"))?;
    let expected = kplug_proto::plugin_socket(&first.name);
    if first.socket != expected {
        return Err(format!(
            "heartbeat socket is {:?}; it must be {expected:?} (relative to the socket dir)",
            first.socket
        ));
    }
    if first.offers.is_empty() {
        return Err("the heartbeat offers no implementation; a plugin offers at least one".into());
    }
    Ok(())
}

/// The HOOKS capability for the hooks the heartbeat declares: the operator
/// calls only what is advertised, so such hooks would silently never run.
fn hooks_advertised(first: &HeartbeatRequest) -> Result<(), String> {
    if !first.hooks.is_empty()
        && !first
            .capabilities
            .contains(&(kplug_proto::v1::Capability::Hooks as i32))
    {
        return Err(format!(
            "the plugin declares {} hook(s) but not CAPABILITY_HOOKS, so they are never called",
            first.hooks.len()
        ));
    }
    Ok(())
}

/// Whether GetInfo says what the heartbeat said: name, version, protocol,
/// offers, capabilities, hooks and call policies.
fn agreement(first: &HeartbeatRequest, info: &GetInfoResponse) -> Result<(), String> {
    let disagree = |field: &str,
                    heartbeat: &dyn std::fmt::Debug,
                    get_info: &dyn std::fmt::Debug| {
        Err(format!(
            "GetInfo and the heartbeat disagree on {field}: heartbeat {heartbeat:?}, GetInfo {get_info:?}"
        ))
    };
    if info.name != first.name {
        return disagree("name", &first.name, &info.name);
    }
    if info.version != first.version {
        return disagree("version", &first.version, &info.version);
    }
    if info.protocol != first.protocol {
        return disagree("protocol", &first.protocol, &info.protocol);
    }
    if info.offers != first.offers {
        return disagree("offers", &first.offers, &info.offers);
    }
    if info.capabilities != first.capabilities {
        return disagree("capabilities", &first.capabilities, &info.capabilities);
    }
    if info.hooks != first.hooks {
        return disagree("hooks", &first.hooks, &info.hooks);
    }
    if info.call_policies != first.call_policies {
        return disagree("call policies", &first.call_policies, &info.call_policies);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(at_ms: u64, answered_ms: u64, accepted: bool, t0: Instant) -> Heartbeat {
        Heartbeat {
            request: HeartbeatRequest {
                name: "p".into(),
                instance_id: "i".into(),
                ..Default::default()
            },
            received: t0 + Duration::from_millis(at_ms),
            answered: t0 + Duration::from_millis(answered_ms),
            accepted,
        }
    }

    #[test]
    fn backoff_by_the_rule_passes_and_a_hot_loop_fails() {
        let t0 = Instant::now();
        let mut at = 0;
        let mut good = Vec::new();
        for wait in [0, 100, 200, 400, 800, 1600] {
            at += wait;
            good.push(beat(at, at, false, t0));
        }
        assert!(judge_backoff(&good).is_ok(), "{:?}", judge_backoff(&good));
        let hot: Vec<_> = (0..6).map(|i| beat(i * 10, i * 10, false, t0)).collect();
        assert!(
            judge_backoff(&hot)
                .unwrap_err()
                .contains("retry 1 came 0.01 s")
        );
        let flat: Vec<_> = (0..6)
            .map(|i| beat(i * 3000, i * 3000, false, t0))
            .collect();
        assert!(judge_backoff(&flat).unwrap_err().contains("at most 0.10 s"));
    }

    #[test]
    fn the_interval_asked_for_is_followed() {
        let t0 = Instant::now();
        let every = |ms: u64| {
            (0..6)
                .map(|i| beat(i * ms, i * ms, true, t0))
                .collect::<Vec<_>>()
        };
        let asked = Duration::from_millis(300);
        assert!(judge_interval(&every(300), asked, Duration::from_secs(12)).is_ok());
        assert!(judge_interval(&every(3000), asked, Duration::from_secs(12)).is_err());
        assert!(judge_interval(&every(50), asked, Duration::from_secs(12)).is_err());
    }
}
