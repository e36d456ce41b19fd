//! Acceptance tests of issue 2 against the real control plane: what kplug
//! relies on from the API server works here as in a cluster.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use kube::{Client, Error};
use serde_json::{Value, json};

const GROUP: &str = "testenv.kplug.dev";
const CRD_NAME: &str = "widgets.testenv.kplug.dev";

/// A CRD with a status subresource and a schema strict enough to reject
/// malformed objects.
const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.testenv.kplug.dev
spec:
  group: testenv.kplug.dev
  names:
    kind: Widget
    listKind: WidgetList
    plural: widgets
    singular: widget
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              properties:
                size:
                  type: integer
                  minimum: 1
                  maximum: 10
                color:
                  type: string
                  enum: [red, green, blue]
            status:
              type: object
              properties:
                phase:
                  type: string
                message:
                  type: string
"#;

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Widget"), "widgets")
}

/// A client, the Widget CRD installed, and a fresh namespace.
async fn setup(test: &str) -> (Client, String) {
    let client = kplug_testenv::client().await;
    kplug_testenv::install_crd_yaml(&client, WIDGET_CRD)
        .await
        .expect("the Widget CRD installs");
    let ns = kplug_testenv::namespace(&client, test)
        .await
        .expect("a test namespace");
    (client, ns)
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    DynamicObject::new(name, &widgets()).data(json!({ "spec": spec }))
}

/// The API error of a failed call, or a panic naming what happened instead.
fn api_error<T: std::fmt::Debug>(result: Result<T, Error>) -> kube::core::Status {
    match result {
        Err(Error::Api(status)) => *status,
        other => panic!("expected an error from the API server, got {other:?}"),
    }
}

#[tokio::test]
async fn the_api_server_is_the_version_pinned_in_go_mod() {
    let go_mod = std::fs::read_to_string(kplug_testenv::workspace_root().join("testenv/go.mod"))
        .expect("testenv/go.mod");
    let pinned = go_mod
        .lines()
        .find_map(|line| line.trim().strip_prefix("k8s.io/kubernetes v"))
        .expect("go.mod requires k8s.io/kubernetes");
    let client = kplug_testenv::client().await;
    let info = client.apiserver_version().await.expect("GET /version");
    assert_eq!(info.git_version, format!("v{pinned}"));
    let mut parts = pinned.split('.');
    assert_eq!(Some(info.major.as_str()), parts.next());
    assert_eq!(Some(info.minor.as_str()), parts.next());
    assert_eq!(kplug_testenv::control_plane().version(), info.git_version);
    assert!(
        kplug_testenv::control_plane()
            .server()
            .starts_with("https://127.0.0.1:")
    );
}

#[tokio::test]
async fn a_crd_with_a_status_subresource_is_established_and_served() {
    let client = kplug_testenv::client().await;
    kplug_testenv::install_crd_yaml(&client, WIDGET_CRD)
        .await
        .unwrap();
    // Installing again replaces it in place (tests share the CRD).
    kplug_testenv::install_crd_yaml(&client, WIDGET_CRD)
        .await
        .unwrap();

    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(CRD_NAME)
        .await
        .unwrap();
    let conditions = crd.status.unwrap().conditions.unwrap();
    for wanted in ["Established", "NamesAccepted"] {
        let condition = conditions
            .iter()
            .find(|c| c.type_ == wanted)
            .unwrap_or_else(|| panic!("no {wanted} condition in {conditions:?}"));
        assert_eq!(condition.status, "True", "{condition:?}");
    }
    let version = &crd.spec.versions[0];
    assert!(
        version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some(),
        "{version:?}"
    );
    assert!(
        crd.metadata
            .managed_fields
            .unwrap()
            .iter()
            .any(
                |m| m.manager.as_deref() == Some(kplug_testenv::FIELD_MANAGER)
                    && m.operation.as_deref() == Some("Apply")
            ),
        "the CRD is applied under the kplug-testenv field manager"
    );

    // Discovery serves the resource and its status subresource.
    let resources = client
        .list_api_group_resources(&format!("{GROUP}/v1"))
        .await
        .unwrap();
    let names: Vec<_> = resources
        .resources
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert!(
        names.contains(&"widgets") && names.contains(&"widgets/status"),
        "{names:?}"
    );
}

#[tokio::test]
async fn a_crd_the_server_refuses_is_reported_by_name() {
    let client = kplug_testenv::client().await;
    // metadata.name must be <plural>.<group>.
    let bad = WIDGET_CRD.replace(
        "name: widgets.testenv.kplug.dev",
        "name: gizmos.testenv.kplug.dev",
    );
    let err = kplug_testenv::install_crd_yaml(&client, &bad)
        .await
        .unwrap_err();
    let message = format!("{err:#}");
    assert!(
        message.contains("installing the CRD gizmos.testenv.kplug.dev")
            && message.contains("metadata.name"),
        "{message}"
    );
}

#[tokio::test]
async fn a_custom_resource_is_created_listed_and_watched() {
    let (client, ns) = setup("watch").await;
    let api = Api::<DynamicObject>::namespaced_with(client, &ns, &widgets());

    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    // The initial list of an empty namespace ends before anything is created,
    // so the object below must arrive as a live watch event.
    let initial = tokio::time::timeout(Duration::from_secs(20), async {
        let mut seen = Vec::new();
        while let Some(event) = events.try_next().await.unwrap() {
            match event {
                watcher::Event::InitDone => return seen,
                other => seen.push(format!("{other:?}")),
            }
        }
        panic!("the watch stream ended during its initial list")
    })
    .await
    .expect("the watcher's initial list finishes");
    assert!(initial.iter().all(|e| e.starts_with("Init")), "{initial:?}");

    let created = api
        .create(
            &PostParams::default(),
            &widget("w1", json!({ "size": 3, "color": "red" })),
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());

    let listed = api.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = listed
        .items
        .iter()
        .map(|o| o.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["w1"]);
    assert_eq!(listed.items[0].data["spec"]["size"], 3);

    let applied = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = events.try_next().await.unwrap() {
            if let watcher::Event::Apply(object) = event {
                return object;
            }
        }
        panic!("the watch stream ended")
    })
    .await
    .expect("the created widget is seen by the watcher");
    assert_eq!(applied.metadata.name.as_deref(), Some("w1"));
    assert_eq!(applied.metadata.uid, created.metadata.uid);
    assert_eq!(applied.data["spec"]["color"], "red");
}

#[tokio::test]
async fn status_is_applied_on_the_subresource_per_field_manager() {
    let (client, ns) = setup("status").await;
    let api = Api::<DynamicObject>::namespaced_with(client, &ns, &widgets());
    api.create(&PostParams::default(), &widget("w1", json!({ "size": 1 })))
        .await
        .unwrap();
    let status = |fields: Value| {
        Patch::Apply(json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "Widget",
            "metadata": { "name": "w1" },
            "status": fields,
        }))
    };

    api.patch_status(
        "w1",
        &PatchParams::apply("plugin-a"),
        &status(json!({ "phase": "Provisioning" })),
    )
    .await
    .unwrap();
    api.patch_status(
        "w1",
        &PatchParams::apply("plugin-b"),
        &status(json!({ "message": "from plugin b" })),
    )
    .await
    .unwrap();
    // plugin-a applies again: its field changes, plugin-b's field stays
    // although plugin-a's apply does not mention it.
    api.patch_status(
        "w1",
        &PatchParams::apply("plugin-a"),
        &status(json!({ "phase": "Ready" })),
    )
    .await
    .unwrap();

    let object = api.get("w1").await.unwrap();
    assert_eq!(
        object.data["status"],
        json!({ "phase": "Ready", "message": "from plugin b" })
    );
    // A status apply never touches the spec.
    assert_eq!(object.data["spec"], json!({ "size": 1 }));

    let managed = object.metadata.managed_fields.unwrap();
    let owned = |manager: &str| -> Value {
        let entry = managed
            .iter()
            .find(|m| m.manager.as_deref() == Some(manager))
            .unwrap_or_else(|| panic!("no managedFields entry for {manager}: {managed:?}"));
        assert_eq!(entry.operation.as_deref(), Some("Apply"), "{entry:?}");
        assert_eq!(entry.subresource.as_deref(), Some("status"), "{entry:?}");
        entry.fields_v1.as_ref().unwrap().0["f:status"].clone()
    };
    assert_eq!(owned("plugin-a"), json!({ "f:phase": {} }));
    assert_eq!(owned("plugin-b"), json!({ "f:message": {} }));

    // Taking over another manager's field is a conflict unless forced.
    let conflict = api_error(
        api.patch_status(
            "w1",
            &PatchParams::apply("plugin-b"),
            &status(json!({ "message": "from plugin b", "phase": "Mine" })),
        )
        .await,
    );
    assert_eq!(conflict.code, 409, "{conflict:?}");
    assert!(
        conflict.message.contains("plugin-a") && conflict.message.contains(".status.phase"),
        "{}",
        conflict.message
    );
}

#[tokio::test]
async fn a_lease_is_created_and_renewed() {
    let client = kplug_testenv::client().await;
    let ns = kplug_testenv::namespace(&client, "lease").await.unwrap();
    let api = Api::<Lease>::namespaced(client, &ns);
    let acquired = Timestamp::now();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": { "name": "kplug-operator" },
        "spec": {
            "holderIdentity": "operator-1",
            "leaseDurationSeconds": 15,
            "acquireTime": acquired.to_string(),
            "renewTime": acquired.to_string(),
            "leaseTransitions": 0,
        },
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    let first_renew = created.spec.as_ref().unwrap().renew_time.clone().unwrap();

    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut renewal = created.clone();
    renewal.spec.as_mut().unwrap().renew_time = Some(MicroTime(Timestamp::now()));
    let renewed = api
        .replace("kplug-operator", &PostParams::default(), &renewal)
        .await
        .unwrap();
    let second_renew = renewed.spec.as_ref().unwrap().renew_time.clone().unwrap();
    assert!(
        second_renew > first_renew,
        "{second_renew:?} > {first_renew:?}"
    );
    assert_ne!(
        renewed.metadata.resource_version,
        created.metadata.resource_version
    );

    let stored = api.get("kplug-operator").await.unwrap();
    let spec = stored.spec.unwrap();
    assert_eq!(spec.renew_time, Some(second_renew));
    assert_eq!(spec.holder_identity.as_deref(), Some("operator-1"));
    assert_eq!(
        stored.metadata.resource_version,
        renewed.metadata.resource_version
    );

    // A renewal based on a stale read loses: leader election relies on it.
    let stale = api_error(
        api.replace("kplug-operator", &PostParams::default(), &renewal)
            .await,
    );
    assert_eq!(stale.code, 409, "{stale:?}");
}

#[tokio::test]
async fn a_deployment_is_accepted_by_a_server_side_dry_run_and_not_stored() {
    let client = kplug_testenv::client().await;
    let ns = kplug_testenv::namespace(&client, "dry-run").await.unwrap();
    let api = Api::<Deployment>::namespaced(client, &ns);
    let deployment = |template_app: &str| -> Deployment {
        serde_json::from_value(json!({
            "metadata": { "name": "web" },
            "spec": {
                "replicas": 2,
                "selector": { "matchLabels": { "app": "web" } },
                "template": {
                    "metadata": { "labels": { "app": template_app } },
                    "spec": { "containers": [{ "name": "web", "image": "nginx:1.27" }] },
                },
            },
        }))
        .unwrap()
    };
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    let accepted = api.create(&dry_run, &deployment("web")).await.unwrap();
    // The server really processed it: defaults were filled in.
    let spec = accepted.spec.unwrap();
    assert_eq!(
        spec.strategy.and_then(|s| s.type_).as_deref(),
        Some("RollingUpdate")
    );
    let container = &spec.template.spec.unwrap().containers[0];
    assert_eq!(
        container.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(
        api.get_opt("web").await.unwrap(),
        None,
        "a dry run stores nothing"
    );
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // And the dry run validates: a selector that does not match the
    // template's labels is refused.
    let refused = api_error(api.create(&dry_run, &deployment("other")).await);
    assert_eq!(refused.code, 422, "{refused:?}");
    assert!(
        refused.message.contains("spec.template.metadata.labels")
            && refused.message.contains("does not match template `labels`"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn a_malformed_custom_resource_is_rejected_with_the_field_named() {
    let (client, ns) = setup("invalid").await;
    let api = Api::<DynamicObject>::namespaced_with(client, &ns, &widgets());

    let too_small = api_error(
        api.create(&PostParams::default(), &widget("w0", json!({ "size": 0 })))
            .await,
    );
    assert_eq!(
        (too_small.code, too_small.reason.as_str()),
        (422, "Invalid")
    );
    assert!(
        too_small.message.contains("spec.size")
            && too_small
                .message
                .contains("should be greater than or equal to 1"),
        "{}",
        too_small.message
    );

    let bad_color = api_error(
        api.create(
            &PostParams::default(),
            &widget("w1", json!({ "size": 2, "color": "purple" })),
        )
        .await,
    );
    assert_eq!(bad_color.code, 422, "{bad_color:?}");
    assert!(
        bad_color.message.contains("spec.color") && bad_color.message.contains("purple"),
        "{}",
        bad_color.message
    );

    let missing = api_error(
        api.create(
            &PostParams::default(),
            &widget("w2", json!({ "color": "red" })),
        )
        .await,
    );
    assert_eq!(missing.code, 422, "{missing:?}");
    assert!(
        missing.message.contains("spec.size") && missing.message.contains("Required value"),
        "{}",
        missing.message
    );

    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
