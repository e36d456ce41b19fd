//! Calls: Reconcile and Finalize of each offer, judged with the operator's
//! own checks; input that is not JSON; a message past gRPC's default limit;
//! the shared cases.

use std::time::{Duration, Instant};

use kplug_checks::response::{check_finalize, check_reconcile};
use kplug_proto::v1::{
    Capability, FinalizeRequest, HeartbeatRequest, Offer, Outcome, ProbeRequest, ReconcileRequest,
};
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::{CALL_DEADLINE, Kit, timed};
use crate::checks::Verdict;

/// The size of the object in `message-limit`: past gRPC's 4 MiB default.
const LARGE_OBJECT_BYTES: usize = 5 * 1024 * 1024;
/// How long a plugin may take to become ready before calls.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// The checks that call the plugin, which [`Kit::calls`] judges.
const CALL_CHECKS: [&str; 6] = [
    "reconcile",
    "finalize",
    "mutate",
    "bad-input",
    "message-limit",
    "cases",
];

/// The two calls judged with the operator's checks.
#[derive(Clone, Copy, Debug)]
enum Call {
    Reconcile,
    Finalize,
}

/// The objects sent for one offer: a base of its kind and one extension of
/// each kind it declares, as the operator would send them.
pub(super) struct Objects {
    pub(super) implementation: String,
    pub(super) base: Value,
    extensions: Vec<Value>,
}

impl Objects {
    pub(super) fn for_offer(offer: &Offer) -> Self {
        let base = offer.base.clone().unwrap_or_default();
        let object = |group: &str, kind: &str| {
            json!({
                "apiVersion": format!("{group}/v1"),
                "kind": kind,
                "metadata": {
                    "name": "kplug-conformance",
                    "namespace": "kplug-conformance",
                    "uid": uuid::Uuid::new_v4().to_string(),
                    "generation": 1,
                    "resourceVersion": "1",
                },
                "spec": {},
            })
        };
        Self {
            implementation: offer.implementation.clone(),
            base: object(&base.group, &base.kind),
            extensions: offer
                .extensions
                .iter()
                .map(|e| object(&e.group, &e.kind))
                .collect(),
        }
    }

    pub(super) fn reconcile(&self) -> ReconcileRequest {
        ReconcileRequest {
            children: Default::default(),
            implementation: self.implementation.clone(),
            object: self.base.to_string().into_bytes(),
            extensions: self
                .extensions
                .iter()
                .map(|e| e.to_string().into_bytes())
                .collect(),
        }
    }

    /// The Finalize of the same objects, the base being deleted.
    fn finalize(&self) -> FinalizeRequest {
        let mut base = self.base.clone();
        base["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        FinalizeRequest {
            children: Default::default(),
            implementation: self.implementation.clone(),
            object: base.to_string().into_bytes(),
            extensions: self
                .extensions
                .iter()
                .map(|e| e.to_string().into_bytes())
                .collect(),
        }
    }

    fn dynamic(&self) -> (DynamicObject, Vec<DynamicObject>) {
        let decode =
            |v: &Value| serde_json::from_value(v.clone()).expect("the kit's objects decode");
        (
            decode(&self.base),
            self.extensions.iter().map(decode).collect(),
        )
    }

    fn describe(&self) -> String {
        format!(
            "{} ({})",
            self.implementation,
            self.base["kind"].as_str().unwrap_or_default()
        )
    }
}

impl Kit<'_> {
    /// `reconcile`, `finalize`, `mutate`, `bad-input`, `message-limit` and
    /// `cases`. An `Err` means the plugin stopped serving.
    pub(super) async fn calls(&mut self, first: &HeartbeatRequest) -> Result<(), String> {
        if !self.wants_any(&CALL_CHECKS) {
            return Ok(());
        }
        let started = Instant::now();
        if let Err(why) = self.await_ready(first).await {
            for name in CALL_CHECKS {
                self.record(name, Verdict::Fail(why.clone()), started);
            }
            return Ok(());
        }
        let offers: Vec<Objects> = first.offers.iter().map(Objects::for_offer).collect();
        if offers.is_empty() {
            let why = "the plugin offers no implementation, so there is nothing to call".to_owned();
            for name in ["reconcile", "finalize", "bad-input", "message-limit"] {
                self.record(name, Verdict::Fail(why.clone()), started);
            }
            return Ok(());
        }
        if self.wants("reconcile") {
            let started = Instant::now();
            let verdict =
                Verdict::from_result(self.judge_calls(first, &offers, Call::Reconcile).await);
            self.record("reconcile", verdict, started);
        }
        if self.wants("finalize") {
            let started = Instant::now();
            let verdict = if first.capabilities.contains(&(Capability::Finalize as i32)) {
                Verdict::from_result(self.judge_calls(first, &offers, Call::Finalize).await)
            } else {
                Verdict::Skip("the plugin does not advertise CAPABILITY_FINALIZE".into())
            };
            self.record("finalize", verdict, started);
        }
        if self.wants("mutate") {
            let started = Instant::now();
            let verdict = if first.capabilities.contains(&(Capability::Mutate as i32)) {
                Verdict::from_result(self.judge_mutate(first, &offers[0]).await)
            } else {
                Verdict::Skip("the plugin does not advertise CAPABILITY_MUTATE".into())
            };
            self.record("mutate", verdict, started);
        }
        if self.wants("bad-input") {
            let started = Instant::now();
            let verdict = Verdict::from_result(self.judge_bad_input(first, &offers[0]).await);
            self.record("bad-input", verdict, started);
        }
        if self.wants("message-limit") {
            let started = Instant::now();
            let verdict = Verdict::from_result(self.judge_large(first, &offers[0]).await);
            self.record("message-limit", verdict, started);
        }
        if self.wants("cases") {
            let started = Instant::now();
            let verdict = self.judge_cases(first).await;
            self.record("cases", verdict, started);
        }
        self.probe(first).await.map(|_| ())
    }

    /// `cases`: the cases of the file (those `--case` selects), in file
    /// order; skipped without a file.
    async fn judge_cases(&self, first: &HeartbeatRequest) -> Verdict {
        let Some(cases) = &self.cases else {
            return Verdict::Skip("no --cases file given".into());
        };
        let only = &self.options.only_cases;
        let selection = if only.is_empty() {
            String::new()
        } else {
            format!(" (selected with --case {})", only.join(","))
        };
        Verdict::from_result(
            crate::cases::run(&mut self.client(first), cases)
                .await
                .map(|n| format!("{n} cases answered as specified{selection}")),
        )
    }

    /// Probes until the plugin says it is ready.
    async fn await_ready(&self, first: &HeartbeatRequest) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let (ready, message) = self.probe(first).await?;
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the plugin did not become ready within {READY_TIMEOUT:?} (Probe says {message:?}); the kit calls only a ready plugin"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One Probe: ready and message.
    pub(super) async fn probe(&self, first: &HeartbeatRequest) -> Result<(bool, String), String> {
        let request = timed(ProbeRequest {}, kplug_proto::rules::HEARTBEAT_CALL_DEADLINE);
        let r = self
            .client(first)
            .probe(request)
            .await
            .map_err(|s| {
                format!(
                    "Probe failed with gRPC status {:?}: {}",
                    s.code(),
                    s.message()
                )
            })?
            .into_inner();
        Ok((r.ready, r.message))
    }

    /// Calls `call` for each offer and judges each answer with the
    /// operator's own checks.
    async fn judge_calls(
        &self,
        first: &HeartbeatRequest,
        offers: &[Objects],
        call: Call,
    ) -> Result<String, String> {
        let mut seen = Vec::new();
        for objects in offers {
            let what = format!("{call:?} of {}", objects.describe());
            let failed = |s: tonic::Status| {
                format!(
                    "{what} failed with gRPC status {:?}: {}; answer OUTCOME_FAILED instead",
                    s.code(),
                    s.message()
                )
            };
            let refused =
                |why: String| format!("the operator would refuse the answer to {what}: {why}");
            let (base, sent) = objects.dynamic();
            let mut client = self.client(first);
            let checked = match call {
                Call::Reconcile => {
                    let response = client
                        .reconcile(timed(objects.reconcile(), CALL_DEADLINE))
                        .await
                        .map_err(failed)?;
                    check_reconcile(response.into_inner(), &base, &sent).map_err(refused)?
                }
                Call::Finalize => {
                    let response = client
                        .finalize(timed(objects.finalize(), CALL_DEADLINE))
                        .await
                        .map_err(failed)?;
                    check_finalize(response.into_inner(), &base, &sent).map_err(refused)?
                }
            };
            seen.push(format!(
                "{}: {:?} {:?}",
                objects.describe(),
                checked.outcome,
                checked.message
            ));
        }
        Ok(seen.join("; "))
    }

    async fn judge_bad_input(
        &self,
        first: &HeartbeatRequest,
        objects: &Objects,
    ) -> Result<String, String> {
        let mut call = objects.reconcile();
        call.object = b"{\"apiVersion\": not JSON".to_vec();
        let request = timed(call, CALL_DEADLINE);
        let response = self
            .client(first)
            .reconcile(request)
            .await
            .map_err(|s| {
                format!(
                    "an object that is not JSON got gRPC status {:?} ({}), not an answer",
                    s.code(),
                    s.message()
                )
            })?
            .into_inner();
        if response.outcome != Outcome::Failed as i32 {
            return Err(format!(
                "an object that is not JSON got outcome {:?}; it must be OUTCOME_FAILED",
                Outcome::try_from(response.outcome).map_or_else(
                    |_| response.outcome.to_string(),
                    |o| o.as_str_name().to_owned()
                )
            ));
        }
        if response.message.is_empty() {
            return Err("an object that is not JSON got OUTCOME_FAILED without a message; say what is wrong".into());
        }
        self.probe(first).await?;
        Ok(format!("OUTCOME_FAILED: {:?}", response.message))
    }

    async fn judge_large(
        &self,
        first: &HeartbeatRequest,
        objects: &Objects,
    ) -> Result<String, String> {
        let mut base = objects.base.clone();
        base["metadata"]["annotations"] =
            json!({ "kplug.io/conformance-padding": "x".repeat(LARGE_OBJECT_BYTES) });
        let mut call = objects.reconcile();
        call.object = base.to_string().into_bytes();
        let size = call.object.len();
        let request = timed(call, CALL_DEADLINE);
        match self.client(first).reconcile(request).await {
            Ok(r) => Ok(format!(
                "a {} MiB object got {:?}",
                size / (1024 * 1024),
                Outcome::try_from(r.into_inner().outcome).unwrap_or(Outcome::Unspecified)
            )),
            Err(s) => Err(format!(
                "a {} MiB object got gRPC status {:?}: {}; raise the server's message limit to 64 MiB",
                size / (1024 * 1024),
                s.code(),
                s.message()
            )),
        }
    }
}
