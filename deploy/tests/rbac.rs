//! The operator's RBAC (manifests/base/rbac.yaml) against the real API
//! server: the ServiceAccount, ClusterRole and ClusterRoleBinding are created
//! for real from the rendered manifests, then
//! - SubjectAccessReviews show the account can do each thing the operator
//!   does and none of a list of things it must not (read Secrets, delete
//!   DatabaseTables, create Pods, ...);
//! - the rules are exactly the expected set (so nothing can be added without
//!   this test changing);
//! - the real `kplug-operator` binary, authenticated as that account with a
//!   token from the TokenRequest API, reconciles the walkthrough's table
//!   through a real plugin: finalizer, status, extension status, Events and
//!   deletion all work with exactly these permissions.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::events::v1::Event;
use kplug_deploy_tests::repo_root;
use kplug_deploy_tests::tools::kustomize_build;
use kplug_deploy_tests::yaml::{documents, items, kind, the};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::process::Command;

const NAMESPACE: &str = "kplug-system";
const ACCOUNT: &str = "kplug-operator";
const GROUP: &str = "myorg.org";
const TABLES: &str = "databasetables";
const EXTENSIONS: [&str; 3] = [
    "databasetablemariadbextensions",
    "databasetablepostgresqlextensions",
    "databasetablesqliteextensions",
];
const T: Duration = Duration::from_secs(30);
/// The operator's leader election Lease (kplug-<kind>-<group>).
const LEASE: &str = "leases#kplug-databasetable-myorg.org";

/// The operator's objects as rendered (the `all` overlay: components add no
/// RBAC, and this checks that they do not).
fn rendered() -> Vec<Value> {
    let yaml = kustomize_build(&repo_root().join("manifests/overlays/all")).expect("render");
    documents(&yaml).expect("parse")
}

/// Creates the ServiceAccount and the RBAC objects for real, as rendered,
/// and the CRDs (the end-to-end test needs them).
async fn install(client: &Client, objects: &[Value]) {
    let params = PatchParams::apply("kplug-deploy-tests").force();
    let crds = objects
        .iter()
        .filter(|o| kind(o) == "CustomResourceDefinition")
        .map(|o| serde_json::from_value(o.clone()).unwrap())
        .collect::<Vec<_>>();
    kplug_testenv::install_crds(client, &crds).await.unwrap();
    for object in objects.iter().filter(|o| {
        matches!(
            kind(o),
            "Namespace"
                | "ServiceAccount"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "Role"
                | "RoleBinding"
        )
    }) {
        let (group, version) = object["apiVersion"]
            .as_str()
            .unwrap()
            .split_once('/')
            .unwrap_or(("", object["apiVersion"].as_str().unwrap()));
        let gvk = GroupVersionKind::gvk(group, version, kind(object));
        let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
        let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            object["metadata"]["name"].as_str().unwrap(),
            &params,
            &Patch::Apply(object),
        )
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", kind(object)));
    }
}

/// What the API server says about the operator's account doing `verb` on
/// `group/resource[/subresource]` in `namespace` ("" = all namespaces).
/// `resource` is `plural`, `plural/subresource` or `plural#name`.
async fn can(client: &Client, verb: &str, group: &str, resource: &str, namespace: &str) -> bool {
    let (resource, name) = match resource.split_once('#') {
        Some((r, n)) => (r, Some(n.to_owned())),
        None => (resource, None),
    };
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{NAMESPACE}:{ACCOUNT}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{NAMESPACE}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource,
                name,
                namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("SubjectAccessReview");
    reviewed.status.expect("a review has a status").allowed
}

async fn can_get_url(client: &Client, path: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{NAMESPACE}:{ACCOUNT}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ]),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.into()),
                verb: Some("get".into()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("SubjectAccessReview")
        .status
        .expect("status")
        .allowed
}

#[tokio::test]
async fn the_operator_account_can_do_what_the_operator_does_and_no_more() {
    let client = kplug_testenv::client().await;
    install(&client, &rendered()).await;

    // (verb, group, resource, namespace): every call the operator makes.
    // It watches all namespaces, so list/watch must work cluster-wide too.
    let mut allowed: Vec<(&str, &str, String, &str)> = Vec::new();
    for namespace in ["team-a", ""] {
        for verb in ["list", "watch"] {
            allowed.push((verb, GROUP, TABLES.into(), namespace));
            for extension in EXTENSIONS {
                allowed.push((verb, GROUP, extension.into(), namespace));
            }
        }
    }
    for verb in ["get", "patch"] {
        allowed.push((verb, GROUP, TABLES.into(), "team-a"));
    }
    allowed.push(("patch", GROUP, format!("{TABLES}/status"), "team-a"));
    for extension in EXTENSIONS {
        allowed.push(("get", GROUP, extension.into(), "team-a"));
        allowed.push(("patch", GROUP, format!("{extension}/status"), "team-a"));
    }
    for namespace in ["team-a", NAMESPACE] {
        for verb in ["create", "patch"] {
            allowed.push((verb, "events.k8s.io", "events".into(), namespace));
        }
    }
    // Leader election, on its own Lease in its own namespace.
    allowed.push(("create", "coordination.k8s.io", "leases".into(), NAMESPACE));
    for verb in ["get", "patch"] {
        allowed.push((verb, "coordination.k8s.io", LEASE.into(), NAMESPACE));
    }
    // The API server's RBAC authorizer reads roles and bindings from its
    // own informers: a binding just written may not be in force for a
    // moment (on a loaded machine the first review after `install` was
    // refused). Every needed call must be allowed within the deadline; the
    // refusals below are checked once all of these are, so that they
    // cannot pass only because the bindings were not read yet.
    kplug_testenv::eventually(
        "the operator's account may make every call it needs",
        T,
        || async {
            let mut refused_but_needed = Vec::new();
            for (verb, group, resource, namespace) in &allowed {
                if !can(&client, verb, group, resource, namespace).await {
                    refused_but_needed.push(format!("{verb} {group}/{resource} in {namespace:?}"));
                }
            }
            if refused_but_needed.is_empty() {
                Ok(())
            } else {
                Err(format!("the operator needs: {refused_but_needed:?}"))
            }
        },
    )
    .await;
    // API discovery, which resolving extensions of any kind uses.
    for path in ["/api", "/apis", "/apis/myorg.org/v1alpha1"] {
        assert!(can_get_url(&client, path).await, "discovery of {path}");
    }

    // Things the operator never does.
    let mut refused: Vec<(&str, &str, String, &str)> = vec![
        ("get", "", "secrets".into(), "team-a"),
        ("list", "", "secrets".into(), ""),
        ("get", "", "secrets".into(), NAMESPACE),
        ("get", "", "configmaps".into(), NAMESPACE),
        ("create", "", "pods".into(), NAMESPACE),
        ("list", "", "pods".into(), NAMESPACE),
        ("create", "", "pods/exec".into(), NAMESPACE),
        ("get", "", "serviceaccounts".into(), NAMESPACE),
        ("create", "", "serviceaccounts/token".into(), NAMESPACE),
        ("create", "", "events".into(), "team-a"),
        ("list", "", "namespaces".into(), ""),
        ("get", "", "nodes".into(), ""),
        ("impersonate", "", "users".into(), ""),
        ("create", "coordination.k8s.io", "leases".into(), "team-a"),
        ("delete", "coordination.k8s.io", LEASE.into(), NAMESPACE),
        (
            "patch",
            "coordination.k8s.io",
            "someone-elses-lease".into(),
            NAMESPACE,
        ),
        ("list", "coordination.k8s.io", "leases".into(), NAMESPACE),
        ("get", "events.k8s.io", "events".into(), "team-a"),
        ("delete", "events.k8s.io", "events".into(), "team-a"),
        (
            "create",
            "apiextensions.k8s.io",
            "customresourcedefinitions".into(),
            "",
        ),
        (
            "create",
            "rbac.authorization.k8s.io",
            "clusterroles".into(),
            "",
        ),
        (
            "escalate",
            "rbac.authorization.k8s.io",
            "clusterroles".into(),
            "",
        ),
        (
            "bind",
            "rbac.authorization.k8s.io",
            "clusterroles".into(),
            "",
        ),
        (
            "create",
            "rbac.authorization.k8s.io",
            "rolebindings".into(),
            NAMESPACE,
        ),
        ("patch", "apps", "deployments".into(), NAMESPACE),
    ];
    for verb in ["create", "update", "delete", "deletecollection"] {
        refused.push((verb, GROUP, TABLES.into(), "team-a"));
        for extension in EXTENSIONS {
            refused.push((verb, GROUP, extension.into(), "team-a"));
        }
    }
    refused.push(("update", GROUP, format!("{TABLES}/status"), "team-a"));
    for extension in EXTENSIONS {
        refused.push(("patch", GROUP, extension.into(), "team-a"));
        refused.push(("update", GROUP, format!("{extension}/status"), "team-a"));
    }
    let mut allowed_but_unneeded = Vec::new();
    for (verb, group, resource, namespace) in &refused {
        if can(&client, verb, group, resource, namespace).await {
            allowed_but_unneeded.push(format!("{verb} {group}/{resource} in {namespace:?}"));
        }
    }
    assert!(
        allowed_but_unneeded.is_empty(),
        "least privilege: the operator's account may {allowed_but_unneeded:?}"
    );
}

/// A role's rules, expanded to (group, resource, verb); no wildcards, no
/// names, no URLs.
fn granted(role: &Value) -> BTreeSet<(String, String, String)> {
    let mut granted = BTreeSet::new();
    for rule in items(role, "/rules") {
        assert!(rule.get("resourceNames").is_none(), "{rule}");
        assert!(rule.get("nonResourceURLs").is_none(), "{rule}");
        for group in items(rule, "/apiGroups") {
            for resource in items(rule, "/resources") {
                for verb in items(rule, "/verbs") {
                    let triple = (
                        group.as_str().unwrap().to_owned(),
                        resource.as_str().unwrap().to_owned(),
                        verb.as_str().unwrap().to_owned(),
                    );
                    assert!(
                        !triple.0.contains('*')
                            && !triple.1.contains('*')
                            && !triple.2.contains('*'),
                        "no wildcards: {triple:?}"
                    );
                    granted.insert(triple);
                }
            }
        }
    }
    granted
}

/// The `database-server` overlay keeps the base's roles as they are and
/// adds one ClusterRole, bound to the operator's account, with exactly
/// what the operator does for DatabaseServer and its children: the kind
/// and its status, the four child kinds (read uncached, watch, apply,
/// prune), and `update` on the bases' finalizers (owner references with
/// blockOwnerDeletion). The node test (`node_server.rs`) runs the operator
/// with these permissions.
#[test]
fn the_database_server_overlay_adds_exactly_the_childrens_rules() {
    let yaml =
        kustomize_build(&repo_root().join("manifests/overlays/database-server")).expect("render");
    let objects = documents(&yaml).expect("parse");
    let base = rendered();
    assert_eq!(
        the(&objects, "ClusterRole", "kplug-operator"),
        the(&base, "ClusterRole", "kplug-operator")
    );
    let role = the(&objects, "ClusterRole", "kplug-operator-database-server");
    let mut expected = BTreeSet::new();
    let mut add = |group: &str, resource: &str, verbs: &[&str]| {
        for verb in verbs {
            expected.insert((group.to_owned(), resource.to_owned(), (*verb).to_owned()));
        }
    };
    add(GROUP, "databaseservers", &["get", "list", "watch", "patch"]);
    add(GROUP, "databaseservers/status", &["patch"]);
    add(GROUP, "databaseservers/finalizers", &["update"]);
    add(GROUP, &format!("{TABLES}/finalizers"), &["update"]);
    let children = ["get", "list", "watch", "create", "patch", "delete"];
    add("apps", "deployments", &children);
    for resource in ["services", "configmaps", "secrets"] {
        add("", resource, &children);
    }
    assert_eq!(granted(role), expected);
    let binding = the(
        &objects,
        "ClusterRoleBinding",
        "kplug-operator-database-server",
    );
    assert_eq!(binding["roleRef"]["name"], "kplug-operator-database-server");
    assert_eq!(
        items(binding, "/subjects"),
        [json!({"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE})]
    );
}

/// The rules, expanded to (group, resource, verb), are exactly the
/// operator's calls: a rule added for anything else fails here.
#[test]
fn the_rules_are_exactly_the_operators_calls() {
    let objects = rendered();
    let roles: Vec<&Value> = objects
        .iter()
        .filter(|o| matches!(kind(o), "ClusterRole" | "Role"))
        .collect();
    assert_eq!(
        roles.len(),
        2,
        "the operator's role and its leader election role"
    );
    let bindings: Vec<&Value> = objects
        .iter()
        .filter(|o| matches!(kind(o), "ClusterRoleBinding" | "RoleBinding"))
        .collect();
    assert_eq!(bindings.len(), 2, "one binding each");
    let granted = granted(the(&objects, "ClusterRole", "kplug-operator"));
    let mut expected = BTreeSet::new();
    let mut add = |group: &str, resource: &str, verbs: &[&str]| {
        for verb in verbs {
            expected.insert((group.to_owned(), resource.to_owned(), (*verb).to_owned()));
        }
    };
    add(GROUP, TABLES, &["get", "list", "watch", "patch"]);
    add(GROUP, &format!("{TABLES}/status"), &["patch"]);
    for extension in EXTENSIONS {
        add(GROUP, extension, &["get", "list", "watch"]);
        add(GROUP, &format!("{extension}/status"), &["patch"]);
    }
    add("events.k8s.io", "events", &["create", "patch"]);
    assert_eq!(granted, expected);

    // Leader election: create a Lease; get and patch only its own.
    let election = the(&objects, "Role", "kplug-operator-leader-election");
    assert_eq!(
        items(election, "/rules"),
        [
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}),
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["kplug-databasetable-myorg.org"], "verbs": ["get", "patch"]}),
        ]
    );
    let election_binding = the(&objects, "RoleBinding", "kplug-operator-leader-election");
    assert_eq!(
        election_binding["roleRef"]["name"],
        "kplug-operator-leader-election"
    );
    assert_eq!(
        items(election_binding, "/subjects"),
        [json!({"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE})]
    );

    let binding = the(&objects, "ClusterRoleBinding", "kplug-operator");
    assert_eq!(binding["roleRef"]["name"], "kplug-operator");
    assert_eq!(
        items(binding, "/subjects"),
        [json!({"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE})]
    );
}

fn table_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1alpha1", kind), plural)
}

/// The real operator, authenticated as its ServiceAccount (a token from the
/// TokenRequest API, like the projected volume gives it), with the SDK's
/// scripted plugin serving PostgreSQL: the walkthrough's table is
/// reconciled, its status and its extension's status written, the finalizer
/// added and removed, Events recorded, and no request is forbidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_works_with_exactly_these_permissions() {
    let admin = kplug_testenv::client().await;
    install(&admin, &rendered()).await;

    let token = Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE)
        .create_token_request(
            ACCOUNT,
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![],
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            },
        )
        .await
        .expect("a token for the operator's account")
        .status
        .expect("a token")
        .token;
    // The admin kubeconfig (kube-testenv writes JSON) with the token instead
    // of the admin's client certificate.
    let admin_config = std::fs::read_to_string(kplug_testenv::control_plane().kubeconfig_path())
        .expect("the admin kubeconfig");
    let mut config: Value = serde_json::from_str(&admin_config).expect("a JSON kubeconfig");
    config["users"] = json!([{"name": ACCOUNT, "user": {"token": token}}]);
    config["contexts"][0]["context"]["user"] = json!(ACCOUNT);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, serde_json::to_vec(&config).unwrap()).unwrap();
    let sockets = dir.path().join("sockets");
    std::fs::create_dir(&sockets).unwrap();
    let log_path = dir.path().join("operator.log");
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();

    // Cluster-wide, as deployed (no --namespace).
    let _operator = Command::new(kplug_testenv::workspace_binary("kplug-operator"))
        .args(["--resource", "myorg.org/v1alpha1/DatabaseTable"])
        .arg("--socket-dir")
        .arg(&sockets)
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
        .args(["--heartbeat-interval", "500ms"])
        .args([
            "--extension-kind",
            "myorg.org/DatabaseTableMariaDbExtension",
            "--extension-kind",
            "myorg.org/DatabaseTablePostgreSqlExtension",
            "--extension-kind",
            "myorg.org/DatabaseTableSqliteExtension",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", "kplug-operator-rbac-test")
        .env("POD_NAMESPACE", NAMESPACE)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log_path).unwrap())
        .stderr(
            std::fs::File::options()
                .append(true)
                .open(&log_path)
                .unwrap(),
        )
        .kill_on_drop(true)
        .spawn()
        .expect("start kplug-operator");
    let _plugin = Command::new(kplug_testenv::workspace_binary("examples/scripted"))
        .env("KPLUG_SOCKET_DIR", &sockets)
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.5")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the scripted plugin");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let ns = kplug_testenv::namespace(&admin, "rbac-e2e").await.unwrap();
    let tables = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        &ns,
        &table_resource("DatabaseTable", TABLES),
    );
    let pg_extensions = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        &ns,
        &table_resource("DatabaseTablePostgreSqlExtension", EXTENSIONS[1]),
    );
    let samples = documents(
        &std::fs::read_to_string(repo_root().join("examples/database-table/samples/users.yaml"))
            .unwrap(),
    )
    .unwrap();
    for sample in &samples {
        let plural = match kind(sample) {
            "DatabaseTable" => TABLES,
            "DatabaseTableMariaDbExtension" => EXTENSIONS[0],
            "DatabaseTablePostgreSqlExtension" => EXTENSIONS[1],
            _ => EXTENSIONS[2],
        };
        let api = Api::<DynamicObject>::namespaced_with(
            admin.clone(),
            &ns,
            &table_resource(kind(sample), plural),
        );
        let object: DynamicObject = serde_json::from_value(sample.clone()).unwrap();
        api.create(&PostParams::default(), &object)
            .await
            .expect("create a sample");
    }

    // MariaDB is preferred but only PostgreSQL is served: the fallback.
    let table = kplug_testenv::eventually("users is Ready on PostgreSQL", T, || async {
        let table = tables.get("users").await.map_err(|e| e.to_string())?;
        let ready = items(&table.data, "/status/conditions")
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        if ready && table.data.pointer("/status/implementation") == Some(&json!("PostgreSQL")) {
            Ok(table)
        } else {
            Err(format!(
                "status: {}; operator log:\n{}",
                table.data["status"],
                log()
            ))
        }
    })
    .await;
    assert!(
        table.finalizers().iter().any(|f| f == "kplug.io/finalizer"),
        "the finalizer was added (JSON patch): {:?}",
        table.finalizers()
    );
    let extension = pg_extensions.get("users").await.unwrap();
    assert_eq!(
        extension.data.pointer("/status/seenBy"),
        Some(&json!("postgresql")),
        "the extension's status was applied: {}",
        extension.data
    );
    let events = kplug_testenv::eventually("the operator recorded Events", T, || async {
        let events = Api::<Event>::namespaced(admin.clone(), &ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if events.items.is_empty() {
            Err("no events yet".to_owned())
        } else {
            Ok(events.items)
        }
    })
    .await;
    assert!(
        events.iter().all(|e| e
            .reporting_controller
            .as_deref()
            .is_some_and(|c| !c.is_empty())),
        "{events:?}"
    );

    // Deletion: Finalize, then the finalizer is removed (a patch) and the
    // object goes away.
    tables
        .delete("users", &DeleteParams::default())
        .await
        .unwrap();
    kplug_testenv::eventually("users is gone", T, || async {
        match tables.get_opt("users").await {
            Ok(None) => Ok(()),
            Ok(Some(t)) => Err(format!(
                "still there: {:?}; log:\n{}",
                t.finalizers(),
                log()
            )),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;

    let log = log();
    assert!(
        !log.to_lowercase().contains("forbidden"),
        "a request of the operator was forbidden:\n{log}"
    );
}
