//! Shutdown: SIGTERM → Unregister → calls still served and drained → the
//! socket removed → exit 0.

use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use kplug_proto::rules::UNREGISTER_DEADLINE;
use kplug_proto::v1::{HeartbeatRequest, ProbeRequest};
use nix::sys::signal::Signal;

use super::calls::Objects;
use super::{CALL_DEADLINE, Kit, secs, timed};
use crate::checks::Verdict;
use crate::registry::Unregister;

/// How long the kit's registry holds the Unregister answer, as an operator
/// does while the instance's calls finish.
const UNREGISTER_HOLD: Duration = Duration::from_millis(1500);
/// The SDKs' default grace period for calls in flight.
const GRACE: Duration = Duration::from_secs(10);
/// Scheduling slack on top of the grace period.
const EXIT_SLACK: Duration = Duration::from_secs(5);

impl Kit<'_> {
    /// `unregister`, `drain` and `exit`.
    pub(super) async fn shutdown(&mut self, current: &HeartbeatRequest) {
        if !self.wants_any(&["unregister", "drain", "exit"]) {
            return;
        }
        let started = Instant::now();
        self.registry.delay_unregister(UNREGISTER_HOLD);
        // A connection opened before SIGTERM, as the operator's is.
        let mut client = self.client(current);
        let probe = timed(ProbeRequest {}, CALL_DEADLINE);
        if let Err(s) = client.probe(probe).await {
            let why = format!(
                "the plugin stopped answering Probe before SIGTERM: {:?}: {}",
                s.code(),
                s.message()
            );
            for name in ["unregister", "drain", "exit"] {
                self.record(name, Verdict::Fail(why.clone()), started);
            }
            return;
        }
        let plugin = self.plugin.as_mut().expect("a plugin is running");
        plugin.signal(Signal::SIGTERM);
        let unregister = self.registry.wait_unregister(UNREGISTER_DEADLINE).await;
        // Called at once, while the registry holds its answer to Unregister.
        let drained = match (&unregister, current.offers.first()) {
            (Some(_), Some(offer)) => {
                let request = timed(Objects::for_offer(offer).reconcile(), CALL_DEADLINE);
                Some(client.reconcile(request).await.map(|_| ()))
            }
            (Some(_), None) => {
                let request = timed(ProbeRequest {}, CALL_DEADLINE);
                Some(client.probe(request).await.map(|_| ()))
            }
            (None, _) => None,
        };
        let verdict = unregister_verdict(unregister.as_ref(), current, started);
        self.record("unregister", verdict, started);
        let verdict = drain_verdict(drained);
        self.record("drain", verdict, started);
        let socket = self.socket_of(current);
        let plugin = self.plugin.as_mut().expect("a plugin is running");
        let status = plugin.wait(UNREGISTER_HOLD + GRACE + EXIT_SLACK).await;
        let verdict = exit_verdict(status, &plugin.log_tail(10), &socket, started);
        self.record("exit", verdict, started);
        self.registry.delay_unregister(Duration::ZERO);
    }
}

/// `unregister`: one came in time, naming the running instance.
fn unregister_verdict(
    unregister: Option<&Unregister>,
    current: &HeartbeatRequest,
    started: Instant,
) -> Verdict {
    match unregister {
        None => Verdict::Fail(format!(
            "no Unregister within {} of SIGTERM",
            secs(UNREGISTER_DEADLINE)
        )),
        Some(u)
            if u.request.name != current.name || u.request.instance_id != current.instance_id =>
        {
            Verdict::Fail(format!(
                "Unregister named plugin {:?} instance {:?}; the running instance is {:?} {:?}",
                u.request.name, u.request.instance_id, current.name, current.instance_id
            ))
        }
        Some(u) => Verdict::Pass(format!(
            "Unregister {} after SIGTERM",
            secs(u.received - started)
        )),
    }
}

/// `drain`: a call made while Unregister was pending was answered.
fn drain_verdict(drained: Option<Result<(), tonic::Status>>) -> Verdict {
    match drained {
        None => Verdict::Fail(
            "no Unregister came, so no call could be made while it was pending".into(),
        ),
        Some(Ok(())) => {
            Verdict::Pass("a Reconcile sent while Unregister was pending was answered".into())
        }
        Some(Err(s)) => Verdict::Fail(format!(
            "a Reconcile sent while Unregister was pending failed with gRPC status {:?}: {}; stop serving only after Unregister returns, then let calls finish",
            s.code(),
            s.message()
        )),
    }
}

/// `exit`: exited 0 in time, its socket removed.
fn exit_verdict(
    status: Option<ExitStatus>,
    log_tail: &str,
    socket: &Path,
    started: Instant,
) -> Verdict {
    match status {
        None => Verdict::Fail(format!(
            "still running {} after SIGTERM",
            secs(UNREGISTER_HOLD + GRACE + EXIT_SLACK)
        )),
        Some(s) if !s.success() => Verdict::Fail(format!(
            "exited with {s} after SIGTERM; a clean shutdown exits 0. Its output ends with:\n{log_tail}"
        )),
        Some(_) if socket.exists() => Verdict::Fail(format!(
            "exited 0 but left its socket {} behind",
            socket.display()
        )),
        Some(_) => Verdict::Pass(format!(
            "exited 0 {} after SIGTERM, socket removed",
            secs(started.elapsed())
        )),
    }
}
