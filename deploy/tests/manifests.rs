//! The kustomize manifests (`manifests/`): every overlay renders with the
//! pinned kustomize, the real kube-apiserver accepts every rendered object
//! (server-side dry run, strict field validation, and the operator Pod
//! through Pod Security admission), and the rendered Deployment is the
//! operator plus exactly the overlay's plugins, sharing one socket volume,
//! with API credentials in the operator container only.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kplug_deploy_tests::repo_root;
use kplug_deploy_tests::tools::kustomize_build;
use kplug_deploy_tests::yaml::{describe, documents, items, kind, name, the};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use serde_json::{Value, json};

/// The overlays and the plugin containers each must add to the operator.
const OVERLAYS: &[(&str, &[&str])] = &[
    ("sqlite", &["sqlite-plugin"]),
    ("mariadb", &["mariadb-plugin"]),
    ("postgresql", &["postgresql-plugin"]),
    (
        "all",
        &["sqlite-plugin", "mariadb-plugin", "postgresql-plugin"],
    ),
    (
        "database-server",
        &["sqlite-plugin", "postgresql-server-plugin", "backup-plugin"],
    ),
];

/// The plugins that offer no implementation (mutators): the operator takes
/// no implementation from them.
const MUTATORS: &[&str] = &["backup-plugin"];

/// The components of the DatabaseServer example, in its overlay rather than
/// in `all` (whose operator serves DatabaseTable alone).
const SERVER_COMPONENTS: &[&str] = &["postgresql-server", "backup"];

const NAMESPACE: &str = "kplug-system";
const SOCKET_DIR: &str = "/var/run/kplug";
const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const FIELD_MANAGER: &str = "kplug-deploy-tests";

fn render(overlay: &str) -> Vec<Value> {
    let dir = repo_root().join("manifests/overlays").join(overlay);
    let yaml = kustomize_build(&dir).unwrap_or_else(|e| panic!("rendering {overlay}: {e:#}"));
    documents(&yaml).unwrap_or_else(|e| panic!("parsing the {overlay} overlay: {e:#}"))
}

fn plugins_of(overlay: &str) -> &'static [&'static str] {
    OVERLAYS
        .iter()
        .find(|(name, _)| *name == overlay)
        .map(|(_, plugins)| *plugins)
        .expect("a known overlay")
}

// --- server-side dry run ----------------------------------------------------

/// Installs the CRDs, the Namespace and the ServiceAccount for real (the
/// others depend on them: custom resources need their CRD, namespaced
/// objects their namespace, a Pod its ServiceAccount), then applies every
/// other object with a server-side dry run, and creates the operator Pod as
/// the Deployment would, also as a dry run.
async fn apply_with_dry_run(client: &Client, objects: &[Value]) -> anyhow::Result<()> {
    let crds: Vec<CustomResourceDefinition> = objects
        .iter()
        .filter(|o| kind(o) == "CustomResourceDefinition")
        .map(|o| serde_json::from_value(o.clone()))
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(!crds.is_empty(), "the overlay renders no CRD");
    kplug_testenv::install_crds(client, &crds).await?;

    let for_real = PatchParams::apply(FIELD_MANAGER)
        .force()
        .validation_strict();
    let dry_run = for_real.clone().dry_run();
    for object in objects
        .iter()
        .filter(|o| matches!(kind(o), "Namespace" | "ServiceAccount"))
    {
        apply(client, object, &for_real).await?;
    }
    for object in objects.iter().filter(|o| {
        !matches!(
            kind(o),
            "CustomResourceDefinition" | "Namespace" | "ServiceAccount"
        )
    }) {
        apply(client, object, &dry_run).await?;
    }
    for deployment in objects.iter().filter(|o| kind(o) == "Deployment") {
        create_pod_dry_run(client, deployment).await?;
    }
    Ok(())
}

async fn apply(client: &Client, object: &Value, params: &PatchParams) -> anyhow::Result<()> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind(object));
    let (resource, capabilities) = pinned_kind(client, &gvk).await?;
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => {
            let namespace = object["metadata"]["namespace"].as_str().ok_or_else(|| {
                anyhow::anyhow!("{} is namespaced but has no namespace", describe(object))
            })?;
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
    };
    api.patch(name(object), params, &Patch::Apply(object))
        .await
        .map_err(|e| anyhow::anyhow!("{} was refused: {e}", describe(object)))?;
    Ok(())
}

/// What the Deployment controller would create, created with a dry run: the
/// pod template goes through admission, including Pod Security (the
/// namespace enforces `restricted`) and the ServiceAccount check, which a
/// Deployment alone does not (Pod Security only warns about templates).
async fn create_pod_dry_run(client: &Client, deployment: &Value) -> anyhow::Result<()> {
    let template = &deployment["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    metadata["name"] = json!(format!("{}-dry-run", name(deployment)));
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template["spec"],
    }))?;
    let namespace = deployment["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(
            &PostParams {
                dry_run: true,
                field_manager: Some(FIELD_MANAGER.into()),
            },
            &pod,
        )
        .await
        .map_err(|e| anyhow::anyhow!("the Pod of {} was refused: {e}", describe(deployment)))?;
    Ok(())
}

async fn overlay_is_accepted_by_the_api_server(overlay: &str) {
    let objects = render(overlay);
    let client = kplug_testenv::client().await;
    if let Err(err) = apply_with_dry_run(&client, &objects).await {
        panic!("the {overlay} overlay: {err:#}");
    }
}

#[tokio::test]
async fn overlay_sqlite_is_accepted_by_the_api_server() {
    overlay_is_accepted_by_the_api_server("sqlite").await;
}

#[tokio::test]
async fn overlay_mariadb_is_accepted_by_the_api_server() {
    overlay_is_accepted_by_the_api_server("mariadb").await;
}

#[tokio::test]
async fn overlay_postgresql_is_accepted_by_the_api_server() {
    overlay_is_accepted_by_the_api_server("postgresql").await;
}

#[tokio::test]
async fn overlay_all_is_accepted_by_the_api_server() {
    overlay_is_accepted_by_the_api_server("all").await;
}

#[tokio::test]
async fn overlay_database_server_is_accepted_by_the_api_server() {
    overlay_is_accepted_by_the_api_server("database-server").await;
}

/// The dry run above could pass by being lax; these show that it refuses
/// what it should: an unknown field, and a sidecar with privileges in the
/// namespace that enforces the `restricted` Pod Security level.
#[tokio::test]
async fn the_dry_run_refuses_unknown_fields_and_containers_with_privileges() {
    let client = kplug_testenv::client().await;
    let objects = render("all");
    apply_with_dry_run(&client, &objects)
        .await
        .expect("the unchanged overlay is accepted");

    let mut with_typo = objects.clone();
    for object in with_typo.iter_mut().filter(|o| kind(o) == "Deployment") {
        object["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = json!("Always");
    }
    let err = apply_with_dry_run(&client, &with_typo)
        .await
        .expect_err("a misspelt field must be refused");
    assert!(
        format!("{err:#}").contains("imagePullPolcy"),
        "the error names the field: {err:#}"
    );

    let mut escalating = objects.clone();
    for object in escalating.iter_mut().filter(|o| kind(o) == "Deployment") {
        let containers = object["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap();
        let plugin = containers
            .iter_mut()
            .find(|c| c["name"] != "operator")
            .expect("a plugin container");
        // Valid for the API (which refuses `privileged` outright here), but
        // not at the `restricted` Pod Security level.
        plugin["securityContext"]["allowPrivilegeEscalation"] = json!(true);
        plugin["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN"]);
    }
    let err = apply_with_dry_run(&client, &escalating)
        .await
        .expect_err("a container with privileges must be refused in kplug-system");
    let message = format!("{err:#}");
    assert!(
        message.contains("Pod of Deployment/kplug-operator")
            && message.contains("restricted")
            && message.contains("allowPrivilegeEscalation"),
        "refused by Pod Security: {message}"
    );
    // Refused by admission (403), not a transport problem.
    assert!(message.contains("Forbidden"), "{message}");
}

// --- the rendered Deployment ---------------------------------------------------

fn containers(deployment: &Value) -> &[Value] {
    items(deployment, "/spec/template/spec/containers")
}

fn container<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    containers(deployment)
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn env<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    items(container, "/env").iter().find(|e| e["name"] == name)
}

/// Volumes that carry a service-account token (a projected
/// serviceAccountToken source, or a legacy token Secret).
fn token_volumes(deployment: &Value) -> BTreeSet<String> {
    items(deployment, "/spec/template/spec/volumes")
        .iter()
        .filter(|v| {
            items(v, "/projected/sources")
                .iter()
                .any(|s| s.get("serviceAccountToken").is_some())
                || v.pointer("/secret/secretName")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.contains("token"))
        })
        .map(|v| v["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn deployment_has_operator_and_plugins(overlay: &str) {
    let objects = render(overlay);
    let deployment = the(&objects, "Deployment", "kplug-operator");
    let pod = &deployment["spec"]["template"]["spec"];
    let plugins = plugins_of(overlay);

    // Operator + exactly the overlay's plugins.
    let names: BTreeSet<&str> = containers(deployment)
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default())
        .collect();
    let expected: BTreeSet<&str> = plugins.iter().copied().chain(["operator"]).collect();
    assert_eq!(names, expected, "containers of the {overlay} overlay");
    assert_eq!(
        containers(deployment).len(),
        expected.len(),
        "no duplicates"
    );
    assert!(
        items(deployment, "/spec/template/spec/initContainers").is_empty(),
        "no init containers"
    );

    // One emptyDir socket dir, mounted at the same path in every container.
    let sockets = items(deployment, "/spec/template/spec/volumes")
        .iter()
        .find(|v| v["name"] == "sockets")
        .expect("a `sockets` volume");
    assert!(
        sockets.get("emptyDir").is_some(),
        "sockets is an emptyDir: {sockets}"
    );
    for c in containers(deployment) {
        let cname = &c["name"];
        let at_socket_dir: Vec<&Value> = items(c, "/volumeMounts")
            .iter()
            .filter(|m| m["mountPath"] == SOCKET_DIR)
            .collect();
        assert_eq!(
            at_socket_dir.len(),
            1,
            "{cname} mounts exactly one volume at {SOCKET_DIR}"
        );
        assert_eq!(at_socket_dir[0]["name"], "sockets", "{cname}");
        // Only the operator writes the socket dir (registry.sock); plugins
        // only connect to it.
        assert_eq!(
            at_socket_dir[0]["readOnly"] == true,
            cname != "operator",
            "{cname}: the socket dir is writable by the operator alone"
        );
        if let Some(var) = env(c, "KPLUG_SOCKET_DIR") {
            assert_eq!(var["value"], SOCKET_DIR, "{cname}");
        }
    }
    // Each plugin's socket is a volume of its own at plugins/<name>:
    // writable by that plugin, read-only for the operator, and mounted by
    // no other container, so no container can replace or squat on another
    // plugin's socket.
    for plugin in plugins {
        let name = plugin.trim_end_matches("-plugin");
        let dir = format!("{SOCKET_DIR}/plugins/{name}");
        let volume = items(deployment, "/spec/template/spec/volumes")
            .iter()
            .find(|v| v["name"] == format!("{name}-socket"))
            .unwrap_or_else(|| panic!("a {name}-socket volume"));
        assert!(volume.get("emptyDir").is_some(), "{volume}");
        for c in containers(deployment) {
            let cname = c["name"].as_str().unwrap_or_default();
            let mounts: Vec<&Value> = items(c, "/volumeMounts")
                .iter()
                .filter(|m| m["name"] == format!("{name}-socket"))
                .collect();
            match cname {
                "operator" => {
                    assert_eq!(
                        mounts.len(),
                        1,
                        "the operator mounts {name}'s socket volume"
                    );
                    assert_eq!(mounts[0]["mountPath"], dir.as_str());
                    assert_eq!(mounts[0]["readOnly"], true, "the operator only connects");
                }
                c if c == *plugin => {
                    assert_eq!(mounts.len(), 1, "{plugin} mounts its socket volume");
                    assert_eq!(mounts[0]["mountPath"], dir.as_str());
                    assert_ne!(mounts[0]["readOnly"], true, "{plugin} creates its socket");
                }
                other => assert!(
                    mounts.is_empty(),
                    "{other} must not mount {name}'s socket volume"
                ),
            }
        }
    }
    for plugin in plugins {
        assert_eq!(
            env(container(deployment, plugin), "KPLUG_SOCKET_DIR").map(|v| &v["value"]),
            Some(&json!(SOCKET_DIR)),
            "{plugin} is told the socket dir"
        );
    }
    let operator = container(deployment, "operator");
    assert!(
        items(operator, "/args").contains(&json!(format!("--socket-dir={SOCKET_DIR}"))),
        "{operator}"
    );

    // API credentials: none automounted, one projected token in the operator.
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["serviceAccountName"], "kplug-operator");
    let account = the(&objects, "ServiceAccount", "kplug-operator");
    assert_eq!(account["automountServiceAccountToken"], false);
    assert_eq!(
        token_volumes(deployment),
        BTreeSet::from(["kube-api-access".to_owned()]),
        "the only volume with a token"
    );
    let access = items(deployment, "/spec/template/spec/volumes")
        .iter()
        .find(|v| v["name"] == "kube-api-access")
        .unwrap();
    let sources = items(access, "/projected/sources");
    assert!(
        sources
            .iter()
            .any(|s| s["serviceAccountToken"]["path"] == "token"),
        "{access}"
    );
    assert!(
        sources
            .iter()
            .any(|s| s["configMap"]["name"] == "kube-root-ca.crt"
                && items(s, "/configMap/items")
                    .contains(&json!({"key": "ca.crt", "path": "ca.crt"}))),
        "{access}"
    );
    assert!(
        sources
            .iter()
            .any(|s| items(s, "/downwardAPI/items")
                .iter()
                .any(|i| i["path"] == "namespace"
                    && i["fieldRef"]["fieldPath"] == "metadata.namespace")),
        "{access}"
    );
    let token_mounts: Vec<&Value> = items(operator, "/volumeMounts")
        .iter()
        .filter(|m| m["name"] == "kube-api-access")
        .collect();
    assert_eq!(token_mounts.len(), 1, "{operator}");
    assert_eq!(token_mounts[0]["mountPath"], TOKEN_PATH);
    assert_eq!(token_mounts[0]["readOnly"], true);
    for plugin in plugins {
        let c = container(deployment, plugin);
        for mount in items(c, "/volumeMounts") {
            let volume = mount["name"].as_str().unwrap_or_default();
            assert!(
                !token_volumes(deployment).contains(volume),
                "{plugin} mounts the token volume {volume}"
            );
            assert!(
                !mount["mountPath"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("/var/run/secrets"),
                "{plugin} mounts something at {}",
                mount["mountPath"]
            );
        }
        assert!(env(c, "KUBECONFIG").is_none(), "{plugin} has a KUBECONFIG");
        assert!(
            items(c, "/envFrom").is_empty(),
            "{plugin} takes its whole environment from elsewhere"
        );
    }

    // The operator: downward API, probes, metrics port.
    for (var, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        assert_eq!(
            env(operator, var).map(|v| &v["valueFrom"]["fieldRef"]["fieldPath"]),
            Some(&json!(field)),
            "{var}"
        );
    }
    assert_eq!(
        items(operator, "/ports"),
        [json!({"name": "metrics", "containerPort": 8080, "protocol": "TCP"})]
    );
    assert_eq!(operator["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(operator["livenessProbe"]["httpGet"]["port"], "metrics");
    assert_eq!(operator["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(operator["readinessProbe"]["httpGet"]["port"], "metrics");
    assert!(
        items(operator, "/args").contains(&json!("--resource=myorg.org/v1alpha1/DatabaseTable")),
        "{operator}"
    );
    // Two replicas with leader election; a rollout never drops below two.
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    assert!(
        !items(operator, "/args").contains(&json!("--leader-election=false")),
        "{operator}"
    );

    // Each plugin runs as a UID of its own; the operator accepts each plugin
    // name only from that UID, and each implementation only from its plugin
    // (one variable per plugin, so components compose).
    let operator_uid = pod["securityContext"]["runAsUser"].as_u64();
    let mut uids = BTreeSet::from([operator_uid]);
    for plugin in plugins {
        let uid = container(deployment, plugin)["securityContext"]["runAsUser"].as_u64();
        assert!(uid.is_some(), "{plugin} sets its own runAsUser");
        assert!(
            uids.insert(uid),
            "{plugin} has a UID no other container has"
        );
        let name = plugin.trim_end_matches("-plugin");
        // One variable per plugin; a `-` in the name is a `_` there.
        let suffix = name.to_ascii_uppercase().replace('-', "_");
        assert_eq!(
            env(operator, &format!("KPLUG_PLUGIN_UID_{suffix}")).map(|v| &v["value"]),
            Some(&json!(format!("{name}={}", uid.unwrap_or_default()))),
            "the operator maps {name} to its container's UID"
        );
        if MUTATORS.contains(plugin) {
            continue;
        }
        let owner = env(operator, &format!("KPLUG_IMPLEMENTATION_OWNER_{suffix}"))
            .and_then(|v| v["value"].as_str())
            .unwrap_or_default();
        assert!(
            owner.ends_with(&format!("={name}")),
            "the operator gives {name} its implementation: {owner:?}"
        );
    }

    // Every container: non-root, read-only, no privileges, requests set.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert!(pod["securityContext"]["runAsUser"].as_u64().unwrap_or(0) > 0);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    for c in containers(deployment) {
        let cname = &c["name"];
        let security = &c["securityContext"];
        assert_eq!(security["allowPrivilegeEscalation"], false, "{cname}");
        assert_eq!(security["readOnlyRootFilesystem"], true, "{cname}");
        assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{cname}");
        assert!(security.get("privileged").is_none(), "{cname}");
        assert!(
            c["resources"]["requests"]["cpu"].is_string()
                && c["resources"]["requests"]["memory"].is_string()
                && c["resources"]["limits"]["memory"].is_string(),
            "{cname} has requests and a memory limit: {}",
            c["resources"]
        );
        let image = c["image"].as_str().unwrap_or_default();
        assert!(
            image.starts_with("ghcr.io/kplug/")
                && !image.ends_with(":latest")
                && image.contains(':'),
            "{cname} has a pinned kplug image: {image}"
        );
    }

    // The metrics Service selects this pod's port.
    let service = the(&objects, "Service", "kplug-operator-metrics");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_object().expect("a selector") {
        assert_eq!(
            &labels[key], value,
            "the Service selects the operator pod by {key}"
        );
    }
    assert_eq!(
        items(service, "/spec/ports")[0]["targetPort"],
        "metrics",
        "{service}"
    );

    // Everything namespaced is in kplug-system.
    for object in &objects {
        if let Some(namespace) = object["metadata"]["namespace"].as_str() {
            assert_eq!(namespace, NAMESPACE, "{}", describe(object));
        }
    }
}

#[test]
fn deployment_of_overlay_sqlite() {
    deployment_has_operator_and_plugins("sqlite");
}

#[test]
fn deployment_of_overlay_mariadb() {
    deployment_has_operator_and_plugins("mariadb");
}

#[test]
fn deployment_of_overlay_postgresql() {
    deployment_has_operator_and_plugins("postgresql");
}

#[test]
fn deployment_of_overlay_all() {
    deployment_has_operator_and_plugins("all");
}

/// The DatabaseServer overlay: one operator with both kinds, the children
/// the server plugin may have applied (for it alone, its Secret listed) and
/// the backup mutator on Deployments.
#[test]
fn deployment_of_overlay_database_server() {
    deployment_has_operator_and_plugins("database-server");
    let objects = render("database-server");
    let deployment = the(&objects, "Deployment", "kplug-operator");
    let args = items(container(deployment, "operator"), "/args");
    let resources: Vec<&Value> = args
        .iter()
        .filter(|a| a.as_str().is_some_and(|a| a.starts_with("--resource=")))
        .collect();
    assert_eq!(
        resources,
        [
            &json!("--resource=myorg.org/v1alpha1/DatabaseTable"),
            &json!("--resource=myorg.org/v1alpha1/DatabaseServer")
        ],
        "both kinds, DatabaseTable first (the Lease's name)"
    );
    let kinds = [
        "apps/v1/Deployment",
        "v1/Service",
        "v1/ConfigMap",
        "v1/Secret",
    ]
    .map(|k| format!("postgresql-server={k}"))
    .join(",");
    assert!(
        args.contains(&json!(format!("--child-kinds={kinds}"))),
        "{args:?}"
    );
    assert!(
        args.contains(&json!("--mutators=backup=apps/v1/Deployment")),
        "{args:?}"
    );
}

/// A database plugin reads its servers from a mounted Secret that this
/// repository does not ship (it holds passwords); the file path and the
/// Secret name are what docs/deploy.md tells users to create.
#[test]
fn database_plugins_read_their_servers_from_a_secret() {
    let objects = render("all");
    let deployment = the(&objects, "Deployment", "kplug-operator");
    for (plugin, variable, secret, dir) in [
        (
            "mariadb-plugin",
            "KPLUG_MARIADB_SERVERS_FILE",
            "kplug-mariadb-servers",
            "/etc/kplug/mariadb",
        ),
        (
            "postgresql-plugin",
            "KPLUG_POSTGRES_SERVERS_FILE",
            "kplug-postgresql-servers",
            "/etc/kplug/postgresql",
        ),
    ] {
        let c = container(deployment, plugin);
        assert_eq!(
            env(c, variable).map(|v| &v["value"]),
            Some(&json!(format!("{dir}/servers.json"))),
            "{plugin}"
        );
        let mount = items(c, "/volumeMounts")
            .iter()
            .find(|m| m["mountPath"] == dir)
            .unwrap_or_else(|| panic!("{plugin} mounts {dir}"));
        assert_eq!(mount["readOnly"], true);
        let volume = items(deployment, "/spec/template/spec/volumes")
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        assert_eq!(volume["secret"]["secretName"], secret, "{volume}");
        assert_eq!(
            items(volume, "/secret/items"),
            [json!({"key": "servers.json", "path": "servers.json"})]
        );
        // Only its own plugin reads it.
        for other in containers(deployment)
            .iter()
            .filter(|o| o["name"] != plugin)
        {
            assert!(
                !items(other, "/volumeMounts")
                    .iter()
                    .any(|m| m["name"] == mount["name"]),
                "{} mounts the servers of {plugin}",
                other["name"]
            );
        }
    }
}

// --- the layout -------------------------------------------------------------------

fn subdirectories(path: &str) -> BTreeSet<String> {
    std::fs::read_dir(repo_root().join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A new overlay or component must be added to the tables above (and a new
/// component to the `all` overlay), or these tests would silently skip it.
#[test]
fn every_overlay_and_component_is_tested() {
    let tested: BTreeSet<String> = OVERLAYS.iter().map(|(o, _)| (*o).to_owned()).collect();
    assert_eq!(subdirectories("manifests/overlays"), tested);
    let components = subdirectories("manifests/components");
    let in_all: BTreeSet<String> = plugins_of("all")
        .iter()
        .map(|p| p.trim_end_matches("-plugin").to_owned())
        .chain(SERVER_COMPONENTS.iter().map(|c| (*c).to_owned()))
        .collect();
    assert_eq!(
        components, in_all,
        "the `all` overlay has every DatabaseTable component"
    );
    for component in SERVER_COMPONENTS {
        assert!(
            plugins_of("database-server").contains(&format!("{component}-plugin").as_str()),
            "the database-server overlay has {component}"
        );
    }
}

/// manifests/crds/crds.yaml is a copy (kustomize's load restrictor refuses
/// files outside a kustomization's directory); it must not drift.
#[test]
fn the_crds_are_the_examples_crds() {
    let root = repo_root();
    let original = std::fs::read_to_string(root.join("examples/database-table/crds.yaml")).unwrap();
    let copy = std::fs::read_to_string(root.join("manifests/crds/crds.yaml")).unwrap();
    assert!(
        original == copy,
        "manifests/crds/crds.yaml differs from examples/database-table/crds.yaml; refresh it: \
         cp examples/database-table/crds.yaml manifests/crds/crds.yaml"
    );
}

/// The sample objects of the walkthrough are valid against the CRDs (a real
/// dry run), so the compose and docs instructions that apply them work.
#[tokio::test]
async fn the_samples_are_valid_custom_resources() {
    let client = kplug_testenv::client().await;
    let root = repo_root();
    kplug_testenv::install_crd_yaml(
        &client,
        &std::fs::read_to_string(root.join("examples/database-table/crds.yaml")).unwrap(),
    )
    .await
    .unwrap();
    let namespace = kplug_testenv::namespace(&client, "samples").await.unwrap();
    let read = |file: &str| {
        documents(
            &std::fs::read_to_string(root.join("examples/database-table/samples").join(file))
                .unwrap(),
        )
        .unwrap()
    };
    let samples = read("users.yaml");
    let servers = read("server.yaml");
    let kinds: Vec<&str> = samples.iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            "DatabaseTable",
            "DatabaseTableMariaDbExtension",
            "DatabaseTablePostgreSqlExtension",
            "DatabaseTableSqliteExtension"
        ]
    );
    let params = PatchParams::apply(FIELD_MANAGER)
        .validation_strict()
        .dry_run();
    // A freshly installed CRD can take a moment to be served for writes.
    for sample in samples.iter().chain(&servers) {
        let mut sample = sample.clone();
        sample["metadata"]["namespace"] = json!(namespace);
        kplug_testenv::eventually("the sample is accepted", Duration::from_secs(10), || {
            apply(&client, &sample, &params)
        })
        .await;
    }
    let table = &samples[0];
    assert_eq!(table["spec"]["preferredImplementation"], "MariaDB");
    assert_eq!(table["spec"]["serverName"], "authorization-cluster");
    assert_eq!(samples[1]["spec"]["storageEngine"], "InnoDB");
    assert_eq!(samples[2]["spec"]["partitionBy"], "hash");
    assert_eq!(
        servers.iter().map(kind).collect::<Vec<_>>(),
        ["DatabaseServer"]
    );
    assert_eq!(servers[0]["spec"]["preferredImplementation"], "PostgreSQL");
}

// --- monitoring -------------------------------------------------------------------

/// `manifests/monitoring` renders: the ServiceMonitor scrapes the operator's
/// metrics Service by its labels and port name, and the dashboard ships as a
/// ConfigMap Grafana's sidecar picks up. (The metric names the dashboard and
/// the alerts use are checked against the operator's own metrics in
/// `operator/src/metrics`.)
#[test]
fn monitoring_scrapes_the_operator_service_and_ships_the_dashboard() {
    let dir = repo_root().join("manifests/monitoring");
    let objects = documents(&kustomize_build(&dir).unwrap()).unwrap();
    let service = the(&render("sqlite"), "Service", "kplug-operator-metrics").clone();
    let monitor = the(&objects, "ServiceMonitor", "kplug-operator");
    assert_eq!(monitor["metadata"]["namespace"], NAMESPACE);
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(
            &service["metadata"]["labels"][key],
            value,
            "the ServiceMonitor selects {key}={value}: {}",
            describe(&service)
        );
    }
    let ports: Vec<&Value> = items(&service, "/spec/ports")
        .iter()
        .map(|p| &p["name"])
        .collect();
    for endpoint in items(monitor, "/spec/endpoints") {
        assert!(
            ports.contains(&&endpoint["port"]),
            "{endpoint} not in {ports:?}"
        );
    }
    the(&objects, "PrometheusRule", "kplug-operator");
    let dashboard = the(&objects, "ConfigMap", "kplug-grafana-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: Value = serde_json::from_str(
        dashboard["data"]["grafana-dashboard.json"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["uid"], "kplug-operator");
}
