//! A control plane that is stopped and started again with its data
//! (`ControlPlane::start_with`, kube-testenv's `--data-dir`), against the
//! real API server: objects, certificates and service-account tokens survive
//! a restart, clients and watches from before it keep working, and a data
//! directory serves one kube-testenv at a time. Each test runs its own
//! control plane, not the shared one.
//!
//! Restart timings are printed (straight to stderr, past the test harness's
//! capture), not asserted: they depend on the machine.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::io::Write;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kplug_testenv::{ControlPlane, RestartTiming, StartError, StartOptions};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config};
use serde_json::json;

/// Bound for a control plane to come back (it takes seconds).
const BACK: Duration = Duration::from_secs(60);

const GADGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.restart.testenv.kplug.dev
spec:
  group: restart.testenv.kplug.dev
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
            status:
              type: object
              properties:
                phase: {type: string}
"#;

fn gadgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("restart.testenv.kplug.dev", "v1", "Gadget"),
        "gadgets",
    )
}

/// Starts a control plane of the test's own (blocking, so off the runtime's
/// thread: the tests run on the multi-threaded runtime).
fn start(options: StartOptions) -> ControlPlane {
    tokio::task::block_in_place(|| ControlPlane::start_with(options))
        .unwrap_or_else(|err| panic!("the control plane starts: {err}"))
}

/// Restarts it, printing how long that took.
fn restart(control_plane: &mut ControlPlane, test: &str) -> RestartTiming {
    let timing = tokio::task::block_in_place(|| control_plane.restart())
        .unwrap_or_else(|err| panic!("the control plane restarts: {err}"));
    let _ = writeln!(
        std::io::stderr(),
        "kplug-testenv: {test}: restart took {:.2}s (stop {:.2}s, start to ready {:.2}s)",
        timing.total().as_secs_f64(),
        timing.stop.as_secs_f64(),
        timing.start.as_secs_f64(),
    );
    timing
}

fn config_map(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "data": { "value": value },
    }))
    .unwrap()
}

/// A client that authenticates with a bearer token instead of the admin
/// certificate (the server and CA from the kubeconfig).
async fn token_client(control_plane: &ControlPlane, token: &str) -> Client {
    let kubeconfig = Kubeconfig::read_from(control_plane.kubeconfig_path()).unwrap();
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.auth_info = AuthInfo {
        token: Some(token.to_owned().into()),
        ..AuthInfo::default()
    };
    Client::try_from(config).unwrap()
}

/// Who the API server says `client` is (SelfSubjectReview).
async fn whoami(client: &Client) -> Result<String, kube::Error> {
    let review: SelfSubjectReview = serde_json::from_value(json!({})).unwrap();
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(review
        .status
        .and_then(|status| status.user_info)
        .and_then(|user| user.username)
        .unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_certificates_and_tokens_survive_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let mut control_plane = start(StartOptions {
        data_dir: Some(data.path().join("control-plane")),
        ..StartOptions::default()
    });
    assert_eq!(
        control_plane.data_dir(),
        Some(data.path().join("control-plane").as_path())
    );
    assert!(
        control_plane
            .kubeconfig_path()
            .starts_with(data.path().join("control-plane"))
    );
    // Clients made before the restart, used after it.
    let client = control_plane.client().await.unwrap();
    let ns = kplug_testenv::namespace(&client, "restart").await.unwrap();

    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    let created = config_maps
        .create(&PostParams::default(), &config_map("kept", "before"))
        .await
        .unwrap();

    kplug_testenv::install_crd_yaml(&client, GADGET_CRD)
        .await
        .unwrap();
    let gadget_api = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &gadgets());
    let gadget = DynamicObject::new("g1", &gadgets()).data(json!({ "spec": { "size": 3 } }));
    let gadget = gadget_api
        .create(&PostParams::default(), &gadget)
        .await
        .unwrap();

    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &ns);
    let account: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "robot" } })).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let token = accounts
        .create_token_request(
            "robot",
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let robot = token_client(&control_plane, &token).await;
    let robot_name = format!("system:serviceaccount:{ns}:robot");
    assert_eq!(whoami(&robot).await.unwrap(), robot_name);
    assert_eq!(whoami(&client).await.unwrap(), "kube-testenv-admin");

    let server = control_plane.server().to_owned();
    let kubeconfig = std::fs::read(control_plane.kubeconfig_path()).unwrap();
    let old_pid = control_plane.pid();

    restart(&mut control_plane, "objects_certificates_and_tokens");

    assert!(control_plane.is_running());
    assert_ne!(control_plane.pid(), old_pid, "a new process");
    assert_eq!(control_plane.server(), server, "back on the same port");
    assert_eq!(
        std::fs::read(control_plane.kubeconfig_path()).unwrap(),
        kubeconfig,
        "the kubeconfig is the same, byte for byte"
    );

    // The clients from before: the admin certificate and the serving
    // certificate (TLS to the same CA) are those of before, and so are the
    // objects. No retry: once the restart returns, the server answers.
    let kept = config_maps.get("kept").await.unwrap();
    assert_eq!(kept.metadata.uid, created.metadata.uid);
    assert_eq!(kept.data.unwrap()["value"], "before");
    let kept_gadget = gadget_api.get("g1").await.unwrap();
    assert_eq!(kept_gadget.metadata.uid, gadget.metadata.uid);
    assert_eq!(kept_gadget.data["spec"]["size"], 3);
    // The service-account token is still accepted: the signing key is kept
    // (and the ServiceAccount it is bound to is still there).
    assert_eq!(whoami(&robot).await.unwrap(), robot_name);
    // Writes work too, and a client from the kubeconfig file as it is now.
    config_maps
        .create(&PostParams::default(), &config_map("new", "after"))
        .await
        .unwrap();
    let fresh = control_plane.client().await.unwrap();
    let names: Vec<_> = Api::<ConfigMap>::namespaced(fresh, &ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .filter(|name| name != "kube-root-ca.crt")
        .collect();
    assert_eq!(names, ["kept", "new"]);

    // Stopped, the kubeconfig and the data stay; a new ControlPlane on the
    // same directory and port serves them again.
    let port = control_plane.port();
    let data_dir = control_plane.data_dir().unwrap().to_owned();
    let status = tokio::task::block_in_place(|| control_plane.stop()).unwrap();
    assert!(status.success(), "{status}");
    assert!(!control_plane.is_running());
    assert!(control_plane.kubeconfig_path().is_file());
    drop(control_plane);
    assert!(data_dir.join("etcd").is_dir(), "a given data dir is kept");

    let again = start(StartOptions {
        data_dir: Some(data_dir),
        port: Some(port),
        ..StartOptions::default()
    });
    assert_eq!(again.server(), server);
    assert_eq!(std::fs::read(again.kubeconfig_path()).unwrap(), kubeconfig);
    assert_eq!(
        config_maps.get("kept").await.unwrap().metadata.uid,
        created.metadata.uid
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_open_across_a_restart_resumes() {
    let mut control_plane = start(StartOptions::default());
    let client = control_plane.client().await.unwrap();
    let ns = kplug_testenv::namespace(&client, "restart-watch")
        .await
        .unwrap();
    let api = Api::<ConfigMap>::namespaced(client.clone(), &ns);

    // The watcher runs on its own task, through the restart, as a
    // controller's would; its events and errors come out of a channel.
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let watching = tokio::spawn({
        let api = api.clone();
        async move {
            let mut stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = stream.next().await {
                if tx.send(event).is_err() {
                    break;
                }
            }
        }
    });
    let mut errors = Vec::new();

    api.create(&PostParams::default(), &config_map("before", "1"))
        .await
        .unwrap();
    seen(&mut events, "before", &mut errors).await;
    assert!(errors.is_empty(), "{errors:?}");

    let timing = restart(&mut control_plane, "a_watch_open_across_a_restart_resumes");

    let created_after = Instant::now();
    api.create(&PostParams::default(), &config_map("after", "2"))
        .await
        .unwrap();
    let relisted = seen(&mut events, "after", &mut errors).await;
    let _ = writeln!(
        std::io::stderr(),
        "kplug-testenv: the watcher saw an object created after the restart {:.2}s later \
         ({}), {:.2}s after the restart began; {} watcher error(s) meanwhile: {errors:?}",
        created_after.elapsed().as_secs_f64(),
        if relisted {
            "in a relist"
        } else {
            "as a watch event"
        },
        (timing.total() + created_after.elapsed()).as_secs_f64(),
        errors.len(),
    );
    watching.abort();
}

type WatchEvents = tokio::sync::mpsc::UnboundedReceiver<watcher::Result<watcher::Event<ConfigMap>>>;

/// Waits for the ConfigMap `name` to come out of the watcher, collecting the
/// watcher's errors meanwhile; returns whether it came in a (re)list
/// (`InitApply`) rather than as a watch event (`Apply`).
async fn seen(events: &mut WatchEvents, name: &str, errors: &mut Vec<String>) -> bool {
    let found = tokio::time::timeout(BACK, async {
        loop {
            match events.recv().await.expect("the watcher runs") {
                Ok(watcher::Event::Apply(cm)) if cm.metadata.name.as_deref() == Some(name) => {
                    return false;
                }
                Ok(watcher::Event::InitApply(cm)) if cm.metadata.name.as_deref() == Some(name) => {
                    return true;
                }
                Ok(_) => {}
                Err(err) => errors.push(err.to_string()),
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| {
        panic!("the watcher did not see {name} within {BACK:?}; its errors: {errors:?}")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_control_plane_comes_back_with_its_data() {
    let mut control_plane = start(StartOptions::default());
    let client = control_plane.client().await.unwrap();
    let ns = kplug_testenv::namespace(&client, "restart-kill")
        .await
        .unwrap();
    let api = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    let created = api
        .create(&PostParams::default(), &config_map("acked", "1"))
        .await
        .unwrap();

    let status = tokio::task::block_in_place(|| control_plane.kill()).unwrap();
    assert!(!status.success(), "{status}");
    assert!(!control_plane.is_running());
    assert!(api.get("acked").await.is_err(), "the API server is gone");

    let ready_in = tokio::task::block_in_place(|| control_plane.start_again()).unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "kplug-testenv: a_killed_control_plane_comes_back: ready again {:.2}s after SIGKILL",
        ready_in.as_secs_f64()
    );
    // A write the API server acknowledged before the crash is there.
    assert_eq!(
        api.get("acked").await.unwrap().metadata.uid,
        created.metadata.uid
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_in_use_is_refused_and_left_intact() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().join("shared");
    let mut first = start(StartOptions {
        data_dir: Some(data_dir.clone()),
        ..StartOptions::default()
    });
    let client = first.client().await.unwrap();
    let ns = kplug_testenv::namespace(&client, "restart-in-use")
        .await
        .unwrap();
    let api = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    let created = api
        .create(&PostParams::default(), &config_map("precious", "1"))
        .await
        .unwrap();

    // A second kube-testenv on the same data directory (another port, and
    // another kubeconfig, so that nothing else is in its way).
    let began = Instant::now();
    let second = tokio::task::block_in_place(|| {
        ControlPlane::start_with(StartOptions {
            data_dir: Some(data_dir.clone()),
            kubeconfig: Some(data.path().join("second.kubeconfig")),
            ..StartOptions::default()
        })
    });
    let took = began.elapsed();
    let err = second.expect_err("a second kube-testenv on a data dir in use is refused");
    let message = err.to_string();
    assert!(
        matches!(err, StartError::Exited { .. })
            && message.contains(&format!(
                "the data directory {} is in use by another kube-testenv (pid {})",
                data_dir.display(),
                first.pid()
            )),
        "{message}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(!data.path().join("second.kubeconfig").exists());

    // Starting the running one again is refused too.
    let err = first.start_again().unwrap_err();
    assert!(
        matches!(err, StartError::Running { pid } if pid == first.pid()),
        "{err}"
    );

    // The first one was not disturbed, and its data survives a restart.
    assert_eq!(
        api.get("precious").await.unwrap().metadata.uid,
        created.metadata.uid
    );
    restart(&mut first, "a_data_dir_in_use_is_refused_and_left_intact");
    assert_eq!(
        api.get("precious").await.unwrap().metadata.uid,
        created.metadata.uid
    );
}

#[test]
fn a_control_plane_without_a_data_dir_cannot_be_restarted() {
    let mut control_plane = ControlPlane::start(&kplug_testenv::testenv_binary()).unwrap();
    assert_eq!(control_plane.data_dir(), None);
    let err = control_plane.restart().unwrap_err();
    assert!(matches!(err, StartError::NotRestartable), "{err}");
    assert!(
        control_plane.is_running(),
        "a refused restart stops nothing"
    );
}

#[test]
fn an_owned_data_dir_is_removed_on_drop() {
    let control_plane = ControlPlane::start_with(StartOptions::default()).unwrap();
    let data_dir = control_plane.data_dir().unwrap().to_owned();
    assert!(data_dir.join("etcd").is_dir());
    assert!(data_dir.join("pki").join("ca.crt").is_file());
    assert!(control_plane.kubeconfig_path().starts_with(&data_dir));
    let port = control_plane.port();
    let ephemeral_start: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    if ephemeral_start > 21000 {
        assert!(
            (20000..ephemeral_start).contains(&port),
            "a port below the ephemeral range ({ephemeral_start}...): {port}"
        );
    }
    drop(control_plane);
    assert!(!data_dir.exists(), "{} left behind", data_dir.display());
}
