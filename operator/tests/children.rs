//! End-to-end: children, the Kubernetes objects a plugin manages without
//! credentials, against the real kube-apiserver. The plugin here is written
//! from the proto alone (no SDK): its answers come from each table's
//! annotations, and it keeps the observed children each request carried.
//! - a ConfigMap child is applied with the controller owner reference, its
//!   own field manager and kplug's labels; a spec edit updates it, a child
//!   deleted or edited by hand is put back, the next request carries it,
//!   and a child no longer desired is pruned;
//! - each rule refuses a child with a condition and a Warning Event naming
//!   it, and nothing is created or changed;
//! - FAILED and invalid answers change nothing, RETRY applies and prunes
//!   nothing, an answer without children leaves them;
//! - two bases that desire one name: the second is refused;
//! - the children go with their base;
//! - the operator's capabilities are negotiated.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kplug_proto::v1::plugin_server::{Plugin, PluginServer};
use kplug_proto::v1::registry_client::RegistryClient;
use kplug_proto::v1::*;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

const T: Duration = Duration::from_secs(30);
const CHILDREN: &str = "kplug.test/children";
const OUTCOME: &str = "kplug.test/outcome";
/// Bytes of padding the plugin adds to each child's `data.blob` (an
/// annotation cannot hold a child past the operator's bound itself).
const PAD: &str = "kplug.test/pad";

fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

/// The child kinds the proto-only plugin's DatabaseTable offer declares,
/// by default (not all of them allowed).
fn declared() -> Vec<GroupVersionKind> {
    vec![
        gvk("", "v1", "ConfigMap"),
        gvk("", "v1", "Secret"),
        gvk("", "v1", "Service"),
        gvk("", "v1", "PersistentVolume"),
        gvk("rbac.authorization.k8s.io", "v1", "Role"),
    ]
}

/// The proto-only plugin's description: one offer for DatabaseTable, with
/// the default child kinds.
fn heartbeat(capabilities: Vec<i32>) -> HeartbeatRequest {
    declaring(capabilities, declared())
}

/// The proto-only plugin's description, its DatabaseTable offer declaring
/// `children`.
fn declaring(capabilities: Vec<i32>, children: Vec<GroupVersionKind>) -> HeartbeatRequest {
    HeartbeatRequest {
        name: "keeper".into(),
        version: "0.0.1".into(),
        instance_id: "keeper-1".into(),
        protocol: "kplug.v1".into(),
        socket: "plugins/keeper.sock".into(),
        offers: vec![
            Offer {
                base: Some(GroupKind {
                    group: "myorg.org".into(),
                    kind: "DatabaseTable".into(),
                }),
                implementation: "Keeper".into(),
                extensions: Vec::new(),
                children,
            },
            // A second kind, for an operator that manages both.
            Offer {
                base: Some(GroupKind {
                    group: "example.com".into(),
                    kind: "Greeting".into(),
                }),
                implementation: "Keeper".into(),
                extensions: Vec::new(),
                children: vec![gvk("", "v1", "ConfigMap")],
            },
        ],
        capabilities,
        hooks: Vec::new(),
        call_policies: Vec::new(),
        mutations: Vec::new(),
    }
}

fn capabilities() -> Vec<i32> {
    vec![Capability::Reconcile as i32, Capability::Children as i32]
}

/// What the plugin was sent, by table name: the observed children of each
/// Reconcile request, in order.
type Seen = Arc<Mutex<BTreeMap<String, Vec<Vec<Value>>>>>;

/// The child kinds the running proto-only plugin declares; a test may
/// change them, and the next heartbeat and GetInfo say so.
type Declared = Arc<Mutex<Vec<GroupVersionKind>>>;

struct Keeper {
    seen: Seen,
    declared: Declared,
}

// The calls it does not serve answer UNIMPLEMENTED (the generated default
// stubs), as the protocol asks of a call whose capability is not advertised.
#[tonic::async_trait]
impl Plugin for Keeper {
    async fn get_info(
        &self,
        _: tonic::Request<GetInfoRequest>,
    ) -> Result<tonic::Response<GetInfoResponse>, tonic::Status> {
        let hb = declaring(capabilities(), self.declared.lock().unwrap().clone());
        Ok(tonic::Response::new(GetInfoResponse {
            name: hb.name,
            version: hb.version,
            protocol: hb.protocol,
            offers: hb.offers,
            capabilities: hb.capabilities,
            description: "answers children from the table's annotations".into(),
            hooks: Vec::new(),
            call_policies: Vec::new(),
            mutations: Vec::new(),
        }))
    }

    async fn probe(
        &self,
        _: tonic::Request<ProbeRequest>,
    ) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        Ok(tonic::Response::new(ProbeResponse {
            ready: true,
            message: String::new(),
        }))
    }

    /// Answers with the children in the table's `kplug.test/children`
    /// annotation (a JSON array; none: no children message), with the
    /// outcome in `kplug.test/outcome` (OK by default).
    async fn reconcile(
        &self,
        request: tonic::Request<ReconcileRequest>,
    ) -> Result<tonic::Response<ReconcileResponse>, tonic::Status> {
        let r = request.into_inner();
        let table: Value = serde_json::from_slice(&r.object).unwrap();
        let name = table["metadata"]["name"].as_str().unwrap().to_owned();
        let observed = r
            .children
            .iter()
            .map(|c| serde_json::from_slice(c).unwrap())
            .collect();
        self.seen
            .lock()
            .unwrap()
            .entry(name)
            .or_default()
            .push(observed);
        let annotations = &table["metadata"]["annotations"];
        let pad = annotations[PAD].as_str().map_or(0, |n| n.parse().unwrap());
        let children = annotations[CHILDREN].as_str().map(|text| {
            let mut list: Vec<Value> = serde_json::from_str(text).unwrap();
            if pad > 0 {
                for child in &mut list {
                    child["data"]["blob"] = json!("x".repeat(pad));
                }
            }
            Children {
                objects: list
                    .iter()
                    .map(|c| serde_json::to_vec(c).unwrap())
                    .collect(),
            }
        });
        let (outcome, retry_after) = match annotations[OUTCOME].as_str() {
            Some("RETRY") => (
                Outcome::Retry,
                Some(prost_types::Duration {
                    seconds: 3600,
                    nanos: 0,
                }),
            ),
            Some("FAILED") => (Outcome::Failed, None),
            _ => (Outcome::Ok, None),
        };
        Ok(tonic::Response::new(ReconcileResponse {
            outcome: outcome as i32,
            message: "kept".into(),
            retry_after,
            children,
            ..ReconcileResponse::default()
        }))
    }
}

/// Serves the proto-only plugin and heartbeats for it; returns what it
/// was sent.
async fn keeper(w: &World) -> Seen {
    keeper_declaring(w, Declared::new(Mutex::new(declared()))).await
}

/// [`keeper`], declaring the child kinds in `declared` at each heartbeat.
async fn keeper_declaring(w: &World, declared: Declared) -> Seen {
    let seen = Seen::default();
    let socket = w.sockets.path().join("plugins/keeper.sock");
    let listener = kplug_proto::socket::bind(&socket).await.unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PluginServer::new(Keeper {
                seen: seen.clone(),
                declared: declared.clone(),
            }))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
    );
    let registry_socket = w.sockets.path().join("registry.sock");
    tokio::spawn(async move {
        let mut registry = RegistryClient::new(kplug_proto::socket::channel(&registry_socket));
        loop {
            let children = declared.lock().unwrap().clone();
            let _ = registry
                .heartbeat(declaring(capabilities(), children))
                .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    w.until_plugin_up("keeper", T).await;
    seen
}

fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// The `kplug.test/children` annotation for `children`.
fn desiring(children: &[Value]) -> Value {
    json!({ CHILDREN: serde_json::to_string(children).unwrap() })
}

async fn set_children(w: &World, table: &str, children: &[Value]) {
    annotate(w, table, desiring(children)).await;
}

/// Merges `annotations` into table `name`, with a spec change: only a new
/// generation has the plugin called again.
async fn annotate(w: &World, table: &str, annotations: Value) {
    static EDITS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let edit = EDITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    w.merge_table(
        table,
        json!({"metadata": {"annotations": annotations}, "spec": {"serverName": format!("server-{edit}")}}),
    )
    .await;
}

fn config_maps(w: &World) -> Api<ConfigMap> {
    Api::namespaced(w.client.clone(), &w.ns)
}

/// Waits until ConfigMap `name` exists with `check` holding.
async fn config_map_until(
    w: &World,
    name: &str,
    what: &str,
    check: impl Fn(&ConfigMap) -> Result<(), String>,
) -> ConfigMap {
    let api = config_maps(w);
    kplug_testenv::eventually(what, T, || async {
        let cm = api
            .get_opt(name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("ConfigMap {name} does not exist"))?;
        check(&cm).map(|()| cm)
    })
    .await
}

fn data_is(key: &str, value: &str) -> impl Fn(&ConfigMap) -> Result<(), String> {
    let (key, value) = (key.to_owned(), value.to_owned());
    move |cm| match cm.data.as_ref().and_then(|d| d.get(&key)) {
        Some(v) if *v == value => Ok(()),
        other => Err(format!("data.{key} is {other:?}, want {value}")),
    }
}

async fn table_uid(w: &World, name: &str) -> String {
    w.tables().get(name).await.unwrap().uid().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_is_applied_owned_kept_and_pruned() {
    let w = world("children", &["--child-kinds", "v1/ConfigMap"]).await;
    let seen = keeper(&w).await;
    let settings = config_map("t1-settings", json!({"a": "1"}));
    w.create_table("t1", "Keeper", desiring(&[settings]), false)
        .await;
    let table = w.ready_on("t1", "Keeper", T).await;
    let uid = table.uid().unwrap();

    // Applied with the controller owner reference, its own field manager
    // and the labels.
    let cm = config_map_until(&w, "t1-settings", "the child is applied", data_is("a", "1")).await;
    let owner = &cm.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("DatabaseTable", "t1", uid.as_str())
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    let labels = cm.labels();
    assert_eq!(labels.get("kplug.io/base-uid"), Some(&uid));
    assert_eq!(
        labels.get("kplug.io/plugin").map(String::as_str),
        Some("keeper")
    );
    let managers: Vec<String> = cm
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.manager.clone())
        .collect();
    assert!(
        managers.iter().any(|m| m.starts_with("kplug/keeper/")),
        "{managers:?}"
    );
    assert_eq!(
        table.data.pointer("/status/children/0/state"),
        Some(&json!("Applied")),
        "{}",
        table.data["status"]
    );

    // A spec edit updates the child.
    set_children(&w, "t1", &[config_map("t1-settings", json!({"a": "2"}))]).await;
    config_map_until(&w, "t1-settings", "the edit is applied", data_is("a", "2")).await;

    // Deleted by hand, it comes back.
    let first = config_maps(&w).get("t1-settings").await.unwrap().uid();
    config_maps(&w)
        .delete("t1-settings", &DeleteParams::default())
        .await
        .unwrap();
    config_map_until(&w, "t1-settings", "the child comes back", |cm| {
        (cm.uid() != first)
            .then_some(())
            .ok_or_else(|| "still the old one".into())
    })
    .await;

    // Edited by hand in a field the plugin manages, it is put back.
    config_maps(&w)
        .patch(
            "t1-settings",
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"data": {"a": "by hand"}})),
        )
        .await
        .unwrap();
    config_map_until(
        &w,
        "t1-settings",
        "the hand edit is undone",
        data_is("a", "2"),
    )
    .await;

    // The next request carries the observed child.
    set_children(&w, "t1", &[config_map("t1-settings", json!({"a": "2"}))]).await;
    kplug_testenv::eventually("a request carries the observed child", T, || async {
        let seen = seen.lock().unwrap();
        let last = seen.get("t1").and_then(|calls| calls.last()).cloned();
        match last.as_deref() {
            Some([child])
                if child["data"]["a"] == "2" && child["metadata"]["managedFields"].is_null() =>
            {
                Ok(())
            }
            other => Err(format!("last request's children: {other:?}")),
        }
    })
    .await;

    // No longer desired, it is pruned.
    set_children(&w, "t1", &[]).await;
    kplug_testenv::eventually("the child is pruned", T, || async {
        match config_maps(&w).get_opt("t1-settings").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rule_refuses_its_child_and_says_so_on_the_base() {
    let w = world("refusals", &["--child-kinds", "v1/ConfigMap"]).await;
    keeper(&w).await;
    // Someone else's ConfigMap, and one no controller owns.
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "unowned", "namespace": w.ns}, "data": {"mine": "yes"}});
    config_maps(&w)
        .create(
            &PostParams::default(),
            &serde_json::from_value(theirs).unwrap(),
        )
        .await
        .unwrap();
    let cases = [
        (
            "a-secret",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pw"}, "stringData": {"p": "x"}}),
            "Secrets are applied only when --child-kinds lists them",
        ),
        (
            "a-service",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
            "kind Service is not in the operator's --child-kinds",
        ),
        (
            "a-volume",
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {}}),
            "PersistentVolume is cluster-scoped",
        ),
        (
            "a-role",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": []}),
            "RBAC, admission and API registration kinds are never applied",
        ),
        (
            "a-deployment",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}),
            "does not declare kind Deployment.apps",
        ),
        (
            "elsewhere",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "away", "namespace": "default"}, "data": {}}),
            "it is aimed at namespace default",
        ),
        (
            "not-ours",
            config_map("unowned", json!({"mine": "no"})),
            "it exists and no controller owns it",
        ),
        (
            "too-large",
            config_map("big", json!({})),
            "at most 262144 are applied",
        ),
    ];
    for (table, child, _) in &cases {
        let mut annotations = desiring(std::slice::from_ref(child));
        if *table == "too-large" {
            annotations[PAD] = json!((300 * 1024).to_string());
        }
        w.create_table(table, "Keeper", annotations, false).await;
    }
    for (table, child, rule) in &cases {
        let base = w
            .table_until(table, "the child is refused", T, |t| {
                expect_condition(t, "Ready", "False", "ChildRefused")
            })
            .await;
        let (_, _, message) = condition(&base, "Reconciled").unwrap();
        let name = child["metadata"]["name"].as_str().unwrap();
        assert!(
            message.contains(rule) && message.contains(name),
            "{table}: {message}"
        );
        assert_eq!(
            base.data.pointer("/status/children/0/state"),
            Some(&json!("Refused")),
            "{table}: {}",
            base.data["status"]
        );
        w.until_events(
            table,
            &format!("{table}: a ChildRefused Warning"),
            |events| {
                events.iter().any(|(type_, reason, note)| {
                    type_ == "Warning" && reason == "ChildRefused" && note.contains(rule)
                })
            },
        )
        .await;
    }
    // Nothing was created, and nothing already there changed.
    for name in ["away", "big"] {
        assert!(
            config_maps(&w).get_opt(name).await.unwrap().is_none(),
            "{name}"
        );
    }
    let unowned = config_maps(&w).get("unowned").await.unwrap();
    assert_eq!(unowned.data.unwrap()["mine"], "yes");
    assert!(unowned.metadata.owner_references.is_none());
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(w.client.clone(), &w.ns);
    assert!(secrets.get_opt("pw").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_past_the_count_per_base_are_refused_and_the_rest_applied() {
    let w = world("too-many", &["--child-kinds", "v1/ConfigMap"]).await;
    keeper(&w).await;
    let max = kplug_proto::limits::MAX_CHILDREN;
    let children: Vec<Value> = (0..=max)
        .map(|j| config_map(&format!("m{j}"), json!({"j": j.to_string()})))
        .collect();
    w.create_table("many", "Keeper", desiring(&children), false)
        .await;
    let base = w
        .table_until("many", "the child past the count is refused", T, |t| {
            expect_condition(t, "Ready", "False", "ChildRefused")
        })
        .await;
    let last = format!("m{max}");
    let rule = format!("at most {max} per base object are applied");
    let (_, _, message) = condition(&base, "Reconciled").unwrap();
    assert!(
        message.contains(&last) && message.contains(&rule),
        "{message}"
    );
    let states: Vec<&str> = base.data["status"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["state"].as_str().unwrap())
        .collect();
    let mut want = vec!["Applied"; max];
    want.push("Refused");
    assert_eq!(states, want, "{}", base.data["status"]);
    w.until_events("many", "a ChildRefused Warning", |events| {
        events.iter().any(|(type_, reason, note)| {
            type_ == "Warning" && reason == "ChildRefused" && note.contains(&last)
        })
    })
    .await;
    let listed = config_maps(&w).list(&Default::default()).await.unwrap();
    let mut names: Vec<String> = listed
        .items
        .iter()
        .map(|c| c.name_any())
        .filter(|n| n.starts_with('m'))
        .collect();
    names.sort();
    let mut applied: Vec<String> = (0..max).map(|j| format!("m{j}")).collect();
    applied.sort();
    assert_eq!(names, applied, "the first {max} are applied, {last} is not");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_ok_answer_prunes_and_only_a_valid_one_applies() {
    let w = world("outcomes", &["--child-kinds", "v1/ConfigMap"]).await;
    keeper(&w).await;
    let a = config_map("o-a", json!({"v": "1"}));
    let b = config_map("o-b", json!({"v": "1"}));
    w.create_table("o", "Keeper", desiring(&[a.clone(), b.clone()]), false)
        .await;
    w.ready_on("o", "Keeper", T).await;
    config_map_until(&w, "o-b", "both children applied", data_is("v", "1")).await;

    // RETRY applies (a's change) and prunes nothing (b stays).
    annotate(
        &w,
        "o",
        json!({
            OUTCOME: "RETRY",
            CHILDREN: serde_json::to_string(&[config_map("o-a", json!({"v": "2"}))]).unwrap(),
        }),
    )
    .await;
    config_map_until(&w, "o-a", "RETRY applies", data_is("v", "2")).await;
    w.table_until("o", "the RETRY is written", T, |t| {
        expect_condition(t, "Reconciled", "False", "Retrying")
    })
    .await;
    assert!(
        config_maps(&w).get_opt("o-b").await.unwrap().is_some(),
        "RETRY pruned o-b"
    );

    // FAILED applies nothing and prunes nothing.
    annotate(
        &w,
        "o",
        json!({
            OUTCOME: "FAILED",
            CHILDREN: serde_json::to_string(&[config_map("o-a", json!({"v": "3"}))]).unwrap(),
        }),
    )
    .await;
    w.table_until("o", "the failure is written", T, |t| {
        expect_condition(t, "Reconciled", "False", "PluginFailed")
    })
    .await;
    // An invalid answer (one child twice) applies nothing either.
    annotate(
        &w,
        "o",
        json!({
            OUTCOME: "OK",
            CHILDREN: serde_json::to_string(&[
                config_map("o-a", json!({"v": "4"})),
                config_map("o-a", json!({"v": "5"})),
            ]).unwrap(),
        }),
    )
    .await;
    w.table_until("o", "the invalid answer is named", T, |t| {
        expect_condition(t, "Reconciled", "False", "InvalidPluginResponse")
    })
    .await;
    let a_now = config_maps(&w).get("o-a").await.unwrap();
    assert_eq!(a_now.data.unwrap()["v"], "2");
    assert!(config_maps(&w).get_opt("o-b").await.unwrap().is_some());

    // An answer without children leaves them as they are.
    annotate(&w, "o", json!({OUTCOME: "OK", CHILDREN: null})).await;
    w.table_until("o", "Ready again", T, |t| {
        expect_condition(t, "Ready", "True", "Reconciled")
    })
    .await;
    assert_eq!(
        config_maps(&w).get("o-a").await.unwrap().data.unwrap()["v"],
        "2"
    );
    assert!(config_maps(&w).get_opt("o-b").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_one_bases_and_children_go_with_their_base() {
    let w = world("shared-name", &["--child-kinds", "v1/ConfigMap"]).await;
    keeper(&w).await;
    let shared = config_map("shared", json!({"by": "first"}));
    w.create_table("first", "Keeper", desiring(&[shared]), false)
        .await;
    w.ready_on("first", "Keeper", T).await;
    let first_uid = table_uid(&w, "first").await;
    w.create_table(
        "second",
        "Keeper",
        desiring(&[config_map("shared", json!({"by": "second"}))]),
        false,
    )
    .await;
    let second = w
        .table_until("second", "the second base is refused", T, |t| {
            expect_condition(t, "Ready", "False", "ChildRefused")
        })
        .await;
    let (_, _, message) = condition(&second, "Reconciled").unwrap();
    assert!(
        message.contains("ConfigMap shared")
            && message.contains("controlled by DatabaseTable first"),
        "{message}"
    );
    let cm = config_maps(&w).get("shared").await.unwrap();
    assert_eq!(cm.labels().get("kplug.io/base-uid"), Some(&first_uid));
    assert_eq!(cm.data.unwrap()["by"], "first");

    // Deleting the base removes its children (there is no garbage
    // collector on this control plane: the operator does it).
    w.tables()
        .delete("first", &DeleteParams::default())
        .await
        .unwrap();
    w.until_gone(&table_resource(), "first", T).await;
    kplug_testenv::eventually("the child goes with its base", T, || async {
        match config_maps(&w).get_opt("shared").await {
            Ok(None) => Ok(()),
            Ok(Some(cm)) if cm.metadata.deletion_timestamp.is_some() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_negotiated_both_ways() {
    let w = world("negotiation", &[]).await;
    let mut registry = RegistryClient::new(kplug_proto::socket::channel(
        &w.sockets.path().join("registry.sock"),
    ));
    // Refused before anything is dialled: the plugin declares a
    // capability from the future.
    let mut from_the_future = capabilities();
    from_the_future.push(99);
    let answer = registry
        .heartbeat(heartbeat(from_the_future))
        .await
        .unwrap()
        .into_inner();
    assert!(!answer.accepted);
    assert!(
        answer
            .reason
            .contains("capability 99, which this operator does not know"),
        "{}",
        answer.reason
    );
    // The answer says what the operator supports.
    let supported: Vec<Capability> = answer
        .capabilities
        .iter()
        .filter_map(|c| Capability::try_from(*c).ok())
        .collect();
    assert!(
        supported.contains(&Capability::Children) && supported.contains(&Capability::Mutate),
        "{supported:?}"
    );
    // Mutations without the capability.
    let mut mutations_only = backup_heartbeat();
    mutations_only.capabilities = vec![Capability::Reconcile as i32];
    let answer = registry
        .heartbeat(mutations_only)
        .await
        .unwrap()
        .into_inner();
    assert!(
        !answer.accepted
            && answer
                .reason
                .contains("mutations without CAPABILITY_MUTATE"),
        "{}",
        answer.reason
    );
    // Child kinds without the capability.
    let answer = registry
        .heartbeat(heartbeat(vec![Capability::Reconcile as i32]))
        .await
        .unwrap()
        .into_inner();
    assert!(
        !answer.accepted
            && answer
                .reason
                .contains("declares child kinds without CAPABILITY_CHILDREN"),
        "{}",
        answer.reason
    );
    w.until_refused("UnsupportedCapability", T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serves_two_kinds_and_keeps_their_children_apart() {
    kplug_testenv::install_crd_yaml(&kplug_testenv::client().await, GREETING.crds)
        .await
        .unwrap();
    let w = world(
        "two-kinds",
        &[
            "--resource",
            GREETING.resource,
            "--child-kinds",
            "v1/ConfigMap",
        ],
    )
    .await;
    keeper(&w).await;
    w.create_table(
        "table",
        "Keeper",
        desiring(&[config_map("of-the-table", json!({"k": "table"}))]),
        false,
    )
    .await;
    w.create(
        &greeting_resource(),
        json!({"apiVersion": "example.com/v1", "kind": "Greeting",
               "metadata": {"name": "greeting", "annotations": desiring(&[config_map("of-the-greeting", json!({"k": "greeting"}))])},
               "spec": {"preferredImplementation": "Keeper"}}),
    )
    .await;
    w.ready_on("table", "Keeper", T).await;
    let greeting = w
        .until(
            &greeting_resource(),
            "greeting",
            "the Greeting is Ready",
            T,
            |g| expect_condition(g, "Ready", "True", "Reconciled"),
        )
        .await;
    let table_cm = config_map_until(
        &w,
        "of-the-table",
        "the table's child",
        data_is("k", "table"),
    )
    .await;
    let greeting_cm = config_map_until(
        &w,
        "of-the-greeting",
        "the greeting's child",
        data_is("k", "greeting"),
    )
    .await;
    let owner = |cm: &ConfigMap| {
        cm.metadata.owner_references.as_ref().unwrap()[0]
            .kind
            .clone()
    };
    assert_eq!(owner(&table_cm), "DatabaseTable");
    assert_eq!(owner(&greeting_cm), "Greeting");
    assert_eq!(
        greeting_cm.labels().get("kplug.io/base-uid"),
        greeting.uid().as_ref()
    );
    // Each kind's children are its own: pruning the greeting's leaves the
    // table's.
    w.api(&greeting_resource())
        .patch(
            "greeting",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": desiring(&[])}, "spec": {"salutation": "again"}})),
        )
        .await
        .unwrap();
    kplug_testenv::eventually("the greeting's child is pruned", T, || async {
        match config_maps(&w).get_opt("of-the-greeting").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        config_maps(&w)
            .get_opt("of-the-table")
            .await
            .unwrap()
            .is_some()
    );
}

/// A proto-only mutator: patches every ConfigMap it is sent with the
/// annotation `backup.example/enabled`, or, when the child's own
/// annotation `kplug.test/mutate` is `outside`, with a patch of its name.
struct Backup;

fn backup_heartbeat() -> HeartbeatRequest {
    HeartbeatRequest {
        name: "backup".into(),
        version: "0.0.1".into(),
        instance_id: "backup-1".into(),
        protocol: "kplug.v1".into(),
        socket: "plugins/backup.sock".into(),
        offers: Vec::new(),
        capabilities: vec![Capability::Mutate as i32],
        hooks: Vec::new(),
        call_policies: Vec::new(),
        mutations: vec![Mutation {
            kind: Some(gvk("", "v1", "ConfigMap")),
        }],
    }
}

// The calls it does not serve answer UNIMPLEMENTED (the generated default
// stubs), as the protocol asks of a call whose capability is not advertised.
#[tonic::async_trait]
impl Plugin for Backup {
    async fn get_info(
        &self,
        _: tonic::Request<GetInfoRequest>,
    ) -> Result<tonic::Response<GetInfoResponse>, tonic::Status> {
        let hb = backup_heartbeat();
        Ok(tonic::Response::new(GetInfoResponse {
            name: hb.name,
            version: hb.version,
            protocol: hb.protocol,
            offers: hb.offers,
            capabilities: hb.capabilities,
            description: "annotates ConfigMaps".into(),
            hooks: Vec::new(),
            call_policies: Vec::new(),
            mutations: hb.mutations,
        }))
    }

    async fn probe(
        &self,
        _: tonic::Request<ProbeRequest>,
    ) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        Ok(tonic::Response::new(ProbeResponse {
            ready: true,
            message: String::new(),
        }))
    }

    async fn mutate(
        &self,
        request: tonic::Request<MutateRequest>,
    ) -> Result<tonic::Response<MutateResponse>, tonic::Status> {
        let object: Value = serde_json::from_slice(&request.into_inner().object).unwrap();
        let patch = if object["metadata"]["annotations"]["kplug.test/mutate"] == "outside" {
            json!([{"op": "replace", "path": "/metadata/name", "value": "elsewhere"}])
        } else {
            json!([{"op": "add", "path": "/metadata/annotations/backup.example~1enabled", "value": "true"}])
        };
        Ok(tonic::Response::new(MutateResponse {
            patch: serde_json::to_vec(&patch).unwrap(),
            warnings: vec!["the backup annotation is set".into()],
        }))
    }
}

/// Serves the mutator and heartbeats for it until the returned tasks are
/// aborted.
async fn backup(w: &World) -> Vec<tokio::task::JoinHandle<()>> {
    let tasks = backup_in(w.sockets.path()).await;
    w.until_plugin_up("backup", T).await;
    tasks
}

/// Serves the mutator in the socket dir `sockets`, heartbeating to its
/// registry.
async fn backup_in(sockets: &std::path::Path) -> Vec<tokio::task::JoinHandle<()>> {
    let socket = sockets.join("plugins/backup.sock");
    let _ = std::fs::remove_file(&socket);
    let listener = kplug_proto::socket::bind(&socket).await.unwrap();
    let server = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(PluginServer::new(Backup))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
            .await;
    });
    let registry_socket = sockets.join("registry.sock");
    let heartbeats = tokio::spawn(async move {
        let mut registry = RegistryClient::new(kplug_proto::socket::channel(&registry_socket));
        loop {
            let _ = registry.heartbeat(backup_heartbeat()).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    vec![server, heartbeats]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutator_patches_children_holds_them_while_down_and_never_loops() {
    let proxy = api_proxy::ApiProxy::start().await;
    let w = world_with_kubeconfig(
        "mutate",
        &[
            "--child-kinds",
            "v1/ConfigMap",
            "--mutators",
            "backup=v1/ConfigMap",
        ],
        proxy.kubeconfig(),
    )
    .await;
    keeper(&w).await;
    // The mutator is not there yet: the child waits for it, and the base
    // names it.
    w.create_table(
        "m",
        "Keeper",
        desiring(&[config_map("m-settings", json!({"a": "1"}))]),
        false,
    )
    .await;
    let held = w
        .table_until("m", "the child waits for the mutator", T, |t| {
            expect_condition(t, "Ready", "False", "WaitingForMutator")
        })
        .await;
    let (_, _, message) = condition(&held, "Reconciled").unwrap();
    assert!(
        message.contains("mutator backup") && message.contains("ConfigMap m-settings"),
        "{message}"
    );
    assert!(
        config_maps(&w)
            .get_opt("m-settings")
            .await
            .unwrap()
            .is_none()
    );

    // It comes: the child is applied with its patch.
    let _backup = backup(&w).await;
    let cm = config_map_until(
        &w,
        "m-settings",
        "the mutated child is applied",
        |cm| match cm
            .annotations()
            .get("backup.example/enabled")
            .map(String::as_str)
        {
            Some("true") => Ok(()),
            other => Err(format!("backup annotation is {other:?}")),
        },
    )
    .await;
    w.ready_on("m", "Keeper", T).await;
    // Its warning is on the base.
    w.until_events("m", "the mutator's warning", |events| {
        events.iter().any(|(type_, reason, note)| {
            type_ == "Warning"
                && reason == "MutatorWarning"
                && note.contains(
                    "mutator backup on ConfigMap m-settings: the backup annotation is set",
                )
        })
    })
    .await;

    // A second reconcile with nothing changed writes nothing to the child:
    // no request at all (an apply that changes nothing is still one).
    let since = proxy.requests().len();
    set_children(&w, "m", &[config_map("m-settings", json!({"a": "1"}))]).await;
    let generation = w.tables().get("m").await.unwrap().metadata.generation;
    w.table_until("m", "the edit is reconciled", T, |t| {
        match t
            .data
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64)
        {
            Some(seen) if Some(seen) == generation => Ok(()),
            seen => Err(format!("observedGeneration {seen:?}, want {generation:?}")),
        }
    })
    .await;
    let again = config_maps(&w).get("m-settings").await.unwrap();
    assert_eq!(
        again.metadata.resource_version,
        cm.metadata.resource_version
    );
    let to_the_child: Vec<String> = proxy.requests()[since..]
        .iter()
        .filter(|r| r.contains("/configmaps/m-settings"))
        .cloned()
        .collect();
    assert!(
        to_the_child.is_empty(),
        "requests to the unchanged child: {to_the_child:#?}"
    );

    // A patch outside the allowed paths is refused, and the base says so.
    let outside = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "m-outside", "annotations": {"kplug.test/mutate": "outside"}}, "data": {}});
    w.create_table("outside", "Keeper", desiring(&[outside]), false)
        .await;
    let refused = w
        .table_until("outside", "the patch is refused", T, |t| {
            expect_condition(t, "Ready", "False", "ChildRefused")
        })
        .await;
    let (_, _, message) = condition(&refused, "Reconciled").unwrap();
    assert!(
        message.contains("mutator backup") && message.contains("/metadata/name"),
        "{message}"
    );
    assert!(
        config_maps(&w)
            .get_opt("m-outside")
            .await
            .unwrap()
            .is_none()
    );
}

/// Restarts the world's operator with `args`, reaching the API server
/// through `kubeconfig`.
fn restart_operator(w: &mut World, args: &[&str], kubeconfig: &std::path::Path) {
    w.operator = operator_command_for(
        &DATABASE_TABLE,
        "kplug-operator-0",
        &w.ns,
        w.sockets.path(),
        w.metrics_port,
        args,
        kubeconfig,
    )
    .spawn()
    .expect("start kplug-operator again");
}

/// The Reconcile calls the plugin has seen, in all.
fn calls(seen: &Seen) -> usize {
    seen.lock().unwrap().values().map(Vec::len).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_over_converged_children_writes_nothing() {
    let proxy = api_proxy::ApiProxy::start().await;
    let args = ["--child-kinds", "v1/ConfigMap"];
    let mut w = world_with_kubeconfig("children-restart", &args, proxy.kubeconfig()).await;
    let seen = keeper(&w).await;
    const N: usize = 4;
    for i in 0..N {
        let children: Vec<Value> = (0..3)
            .map(|j| config_map(&format!("t{i}-c{j}"), json!({"j": j.to_string()})))
            .collect();
        w.create_table(&format!("t{i}"), "Keeper", desiring(&children), false)
            .await;
    }
    for i in 0..N {
        w.ready_on(&format!("t{i}"), "Keeper", T).await;
        config_map_until(&w, &format!("t{i}-c2"), "the last child", data_is("j", "2")).await;
    }
    let before = calls(&seen);
    signal(&w.operator, nix::sys::signal::Signal::SIGTERM);
    assert!(w.operator.wait().await.unwrap().success());
    let since = proxy.requests().len();
    restart_operator(&mut w, &args, proxy.kubeconfig());
    kplug_testenv::eventually("every table called by the new operator", T, || async {
        let after = calls(&seen) - before;
        (after >= N)
            .then_some(())
            .ok_or(format!("{after}/{N} calls since the restart"))
    })
    .await;
    // Settled: no call for 2 s.
    let mut settled = calls(&seen);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        if calls(&seen) == settled {
            break;
        }
        settled = calls(&seen);
    }
    let about_children: Vec<String> = proxy.requests()[since..]
        .iter()
        .filter(|r| r.contains("/configmaps"))
        .filter(|r| {
            !r.starts_with("GET ") || !r.ends_with("/configmaps") && !r.contains("/configmaps?")
        })
        .cloned()
        .collect();
    assert!(
        about_children.is_empty(),
        "a restart over converged children wrote or read one by one: {about_children:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_operator_leaks_nothing_and_sweeps_kinds_no_longer_allowed_or_declared() {
    let kubeconfig = kplug_testenv::control_plane().kubeconfig_path().to_owned();
    let all = ["--child-kinds", "v1/ConfigMap,v1/Secret,v1/Service"];
    let mut w = world("children-kill", &all).await;
    let declared = Declared::new(Mutex::new(declared()));
    let seen = keeper_declaring(&w, declared.clone()).await;
    // Killed while it applies: many children, and no wait.
    let mut children: Vec<Value> = (0..20)
        .map(|j| config_map(&format!("k-c{j}"), json!({"j": j.to_string()})))
        .collect();
    children.push(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k-password"},
                         "stringData": {"password": "not-a-real-one"}}),
    );
    children.push(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "k-server"},
                         "spec": {"ports": [{"port": 5432}]}}),
    );
    w.create_table("k", "Keeper", desiring(&children), false)
        .await;
    kplug_testenv::eventually("the first children are being applied", T, || async {
        let listed = config_maps(&w)
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        (listed.items.iter().any(|c| c.name_any().starts_with("k-c")))
            .then_some(())
            .ok_or("none yet".to_owned())
    })
    .await;
    signal(&w.operator, nix::sys::signal::Signal::SIGKILL);
    let _ = w.operator.wait().await;
    // Then pruning is interrupted too: half the ConfigMaps go.
    restart_operator(&mut w, &all, &kubeconfig);
    w.ready_on("k", "Keeper", T).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(w.client.clone(), &w.ns);
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(w.client.clone(), &w.ns);
    assert!(secrets.get_opt("k-password").await.unwrap().is_some());
    assert!(services.get_opt("k-server").await.unwrap().is_some());
    set_children(&w, "k", &children[10..]).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    signal(&w.operator, nix::sys::signal::Signal::SIGKILL);
    let _ = w.operator.wait().await;
    // Restarted without Services allowed, and with a plugin that no longer
    // declares Secrets, desiring ten ConfigMaps: the children converge, the
    // Service, of a kind no longer watched, is swept from the base's list
    // of kinds, and the Secret, of a kind the plugin no longer declares, is
    // pruned.
    *declared.lock().unwrap() = vec![gvk("", "v1", "ConfigMap"), gvk("", "v1", "Service")];
    restart_operator(
        &mut w,
        &["--child-kinds", "v1/ConfigMap,v1/Secret"],
        &kubeconfig,
    );
    set_children(&w, "k", &children[10..20]).await;
    let uid = table_uid(&w, "k").await;
    kplug_testenv::eventually("the children converge", T, || async {
        let listed = config_maps(&w)
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut names: Vec<String> = listed
            .items
            .iter()
            .filter(|c| c.labels().get("kplug.io/base-uid") == Some(&uid))
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .map(|c| c.name_any())
            .collect();
        names.sort();
        let mut want: Vec<String> = (10..20).map(|j| format!("k-c{j}")).collect();
        want.sort();
        (names == want)
            .then_some(())
            .ok_or(format!("children: {names:?}"))
    })
    .await;
    kplug_testenv::eventually("the Secret and the Service are swept", T, || async {
        let secret = secrets
            .get_opt("k-password")
            .await
            .map_err(|e| e.to_string())?;
        let service = services
            .get_opt("k-server")
            .await
            .map_err(|e| e.to_string())?;
        let gone = |deleting: Option<bool>| deleting.is_none_or(|d| d);
        match (
            gone(secret.map(|s| s.metadata.deletion_timestamp.is_some())),
            gone(service.map(|s| s.metadata.deletion_timestamp.is_some())),
        ) {
            (true, true) => Ok(()),
            left => Err(format!("(Secret, Service) gone: {left:?}")),
        }
    })
    .await;
    assert!(calls(&seen) > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedding_operator_passes_its_own_objects_through_the_mutators() {
    use kplug_operator::{Delegate, MutateError, Mutators, Registry, RegistryConfig};
    let client = kplug_testenv::client().await;
    kplug_testenv::install_crd_yaml(&client, CRDS)
        .await
        .unwrap();
    let sockets = tempfile::tempdir().unwrap();
    let mut metrics = prometheus_client::registry::Registry::default();
    let registry = Registry::new(
        RegistryConfig {
            socket_dir: sockets.path().to_owned(),
            ..RegistryConfig::default()
        },
        &mut metrics,
    );
    let kplug =
        Delegate::<kube::api::DynamicObject>::builder_with(client, &registry, table_resource())
            .mutators(Mutators::new(
                Mutators::parse("backup=v1/ConfigMap").unwrap(),
            ))
            .build()
            .await
            .unwrap();
    tokio::spawn(registry.serve(std::future::pending()));
    let mine: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "mine", "namespace": "default", "annotations": {}},
        "data": {"k": "v"},
    }))
    .unwrap();
    // No mutator yet: held, nothing to write.
    match kplug.mutate(&mine, None, None).await {
        Err(MutateError::Held(why)) => assert!(why.contains("mutator backup"), "{why}"),
        other => panic!("expected held, got {other:?}"),
    }
    let _backup = backup_in(sockets.path()).await;
    let patched = kplug_testenv::eventually("the mutator patches my object", T, || async {
        kplug
            .mutate(&mine, None, None)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(
        patched
            .annotations()
            .get("backup.example/enabled")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(patched.data, mine.data);
    // A kind no mutator is allowed for comes back as it is.
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
    }))
    .unwrap();
    assert_eq!(kplug.mutate(&secret, None, None).await.unwrap(), secret);
}
