//! compose.yaml, loaded by composecheck (compose-go: the loader, schema
//! validation and consistency checks of `docker compose config`; no
//! container engine here), then its services and the shared socket volume
//! asserted.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use kplug_deploy_tests::repo_root;
use kplug_deploy_tests::tools::{kustomize_build, run, tool};
use kplug_deploy_tests::yaml::{documents, items, kind};
use serde_json::{Value, json};

const SOCKET_DIR: &str = "/var/run/kplug";
const PLUGINS: [&str; 3] = ["sqlite-plugin", "mariadb-plugin", "postgresql-plugin"];

fn load(file: &Path) -> anyhow::Result<Value> {
    let output = run(Command::new(tool("composecheck")).arg(file))?;
    Ok(serde_json::from_slice(&output.stdout)?)
}

fn project() -> Value {
    load(&repo_root().join("compose.yaml")).unwrap_or_else(|e| panic!("compose.yaml: {e:#}"))
}

fn mounts_of<'a>(service: &'a Value, volume: &str) -> Vec<&'a Value> {
    items(service, "/volumes")
        .iter()
        .filter(|m| m["source"] == volume)
        .collect()
}

#[test]
fn services_and_the_shared_socket_volume() {
    let project = project();
    let services = project["services"].as_object().expect("services");
    let names: BTreeSet<&str> = services.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "kube-api",
            "crds",
            "crds-established",
            "operator",
            "sqlite-plugin",
            "mariadb-plugin",
            "postgresql-plugin",
            "postgresql",
            "mariadb",
            "kubectl",
        ])
    );
    assert!(
        project["volumes"].get("kplug-sockets").is_some(),
        "{}",
        project["volumes"]
    );

    // The operator and every plugin share the socket volume at the socket
    // dir, writable, and are told where it is; nothing else mounts it.
    for name in ["operator"].into_iter().chain(PLUGINS) {
        let service = &services[name];
        let mounts = mounts_of(service, "kplug-sockets");
        assert_eq!(mounts.len(), 1, "{name} mounts kplug-sockets once");
        assert_eq!(mounts[0]["type"], "volume", "{name}: a named volume");
        assert_eq!(mounts[0]["target"], SOCKET_DIR, "{name}");
        assert_ne!(mounts[0]["read_only"], true, "{name}");
        assert_eq!(
            service["environment"]["KPLUG_SOCKET_DIR"], SOCKET_DIR,
            "{name}"
        );
        assert_eq!(service["user"], "65532:65532", "{name}");
        assert_eq!(
            service["read_only"], true,
            "{name}: read-only root filesystem"
        );
    }
    for (name, service) in services {
        if name != "operator" && !PLUGINS.contains(&name.as_str()) {
            assert!(mounts_of(service, "kplug-sockets").is_empty(), "{name}");
        }
    }

    // API credentials: the operator reads the kubeconfig from the control
    // plane's volume and joins its network namespace (it listens on
    // loopback); plugins get neither.
    let operator = &services["operator"];
    assert_eq!(operator["network_mode"], "service:kube-api");
    let config = mounts_of(operator, "kube-config");
    assert_eq!(config.len(), 1);
    assert_eq!(config[0]["read_only"], true);
    let kubeconfig = operator["environment"]["KUBECONFIG"].as_str().unwrap();
    assert!(
        kubeconfig.starts_with(&format!("{}/", config[0]["target"].as_str().unwrap())),
        "KUBECONFIG {kubeconfig} is in the mounted volume"
    );
    assert_eq!(
        operator["environment"]["KPLUG_RESOURCE"],
        "myorg.org/v1alpha1/DatabaseTable"
    );
    assert_eq!(
        operator["depends_on"]["crds-established"]["condition"],
        "service_completed_successfully"
    );
    for plugin in PLUGINS {
        let service = &services[plugin];
        assert!(mounts_of(service, "kube-config").is_empty(), "{plugin}");
        assert!(
            service["environment"].get("KUBECONFIG").is_none(),
            "{plugin}"
        );
        assert_ne!(service["network_mode"], "service:kube-api", "{plugin}");
    }
    assert_eq!(services["sqlite-plugin"]["network_mode"], "none");

    // The control plane is up (its kubeconfig written) before the CRDs are
    // applied; its kubeconfig volume is where the clients look.
    let api = &services["kube-api"];
    assert_eq!(
        mounts_of(api, "kube-config")[0]["target"],
        config[0]["target"]
    );
    assert!(
        items(api, "/healthcheck/test")
            .iter()
            .any(|w| w.as_str() == Some(kubeconfig)),
        "{}",
        api["healthcheck"]
    );
    assert_eq!(
        services["crds"]["depends_on"]["kube-api"]["condition"],
        "service_healthy"
    );
    assert_eq!(
        services["crds-established"]["depends_on"]["crds"]["condition"],
        "service_completed_successfully"
    );

    // The database plugins point at the compose databases for the
    // walkthrough's server, and wait for them.
    for (plugin, variable, database, scheme) in [
        (
            "mariadb-plugin",
            "KPLUG_MARIADB_SERVERS",
            "mariadb",
            "mysql://",
        ),
        (
            "postgresql-plugin",
            "KPLUG_POSTGRES_SERVERS",
            "postgresql",
            "postgresql://",
        ),
    ] {
        let service = &services[plugin];
        let servers: Value = serde_json::from_str(
            service["environment"][variable]
                .as_str()
                .unwrap_or_else(|| panic!("{plugin} has {variable}")),
        )
        .unwrap_or_else(|e| panic!("{variable} is JSON: {e}"));
        let dsn = servers["authorization-cluster"].as_str().unwrap();
        assert!(
            dsn.starts_with(scheme) && dsn.contains(&format!("@{database}:")),
            "{plugin}: {dsn}"
        );
        assert_eq!(
            service["depends_on"][database]["condition"],
            "service_healthy"
        );
        assert!(
            services[database]["healthcheck"]["test"].is_array(),
            "{database}"
        );
    }
}

/// What compose builds exists, and is the same image the Kubernetes
/// manifests run.
#[test]
fn built_images_have_dockerfiles_and_match_the_manifests() {
    let project = project();
    let services = project["services"].as_object().unwrap();
    let root = repo_root();
    let rendered =
        documents(&kustomize_build(&root.join("manifests/overlays/all")).unwrap()).unwrap();
    let deployment = rendered.iter().find(|o| kind(o) == "Deployment").unwrap();
    let manifest_images: BTreeSet<&str> = items(deployment, "/spec/template/spec/containers")
        .iter()
        .map(|c| c["image"].as_str().unwrap())
        .collect();
    let mut built = BTreeSet::new();
    for (name, service) in services {
        let Some(build) = service.get("build") else {
            continue;
        };
        let context = Path::new(build["context"].as_str().unwrap());
        assert_eq!(
            context.canonicalize().unwrap(),
            root.canonicalize().unwrap(),
            "{name} builds from the repository root"
        );
        let dockerfile = context.join(build["dockerfile"].as_str().unwrap());
        assert!(
            dockerfile.is_file(),
            "{name}: {} does not exist",
            dockerfile.display()
        );
        if let Some(target) = build.get("target").and_then(Value::as_str) {
            let file = kplug_deploy_tests::dockerfile::parse(
                &std::fs::read_to_string(&dockerfile).unwrap(),
            )
            .unwrap();
            assert!(
                file.target(target).is_some(),
                "{name}: {} has no stage {target}",
                dockerfile.display()
            );
        }
        if name != "kube-api" {
            built.insert(service["image"].as_str().unwrap());
        }
    }
    assert_eq!(
        built, manifest_images,
        "compose builds what the manifests run"
    );
}

/// The kubectl image matches the kube-apiserver version kube-testenv is
/// built from (testenv/go.mod), within kubectl's skew policy of one minor.
#[test]
fn kubectl_matches_the_control_plane() {
    let go_mod = std::fs::read_to_string(repo_root().join("testenv/go.mod")).unwrap();
    let version = go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes "))
        .expect("testenv/go.mod requires k8s.io/kubernetes")
        .trim();
    let project = project();
    for (name, service) in project["services"].as_object().unwrap() {
        let image = service["image"].as_str().unwrap_or_default();
        if let Some(tag) = image.strip_prefix("registry.k8s.io/kubectl:") {
            assert_eq!(tag, version, "{name}");
        }
    }
}

/// composecheck is a real validator: it refuses an unknown key, a
/// reference to an undefined volume and a dependency on a missing service.
#[test]
fn composecheck_refuses_broken_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("compose.yaml");
    let good =
        "services:\n  a:\n    image: busybox:1\n    volumes: [\"data:/v\"]\nvolumes:\n  data: {}\n";
    std::fs::write(&file, good).unwrap();
    let loaded = load(&file).expect("a valid file loads");
    assert_eq!(
        loaded["services"]["a"]["volumes"][0]["source"],
        json!("data")
    );
    let cases = [
        (good.replace("image:", "imagen:"), "imagen"),
        (
            good.replace("\"data:/v\"", "\"undefined-volume:/v\""),
            "undefined-volume",
        ),
        (
            "services:\n  a:\n    image: busybox:1\n    depends_on: [missing-service]\n".to_owned(),
            "missing-service",
        ),
    ];
    for (broken, named) in cases {
        std::fs::write(&file, &broken).unwrap();
        let err = load(&file).expect_err(&format!("refused:\n{broken}"));
        assert!(format!("{err:#}").contains(named), "{err:#}");
    }
}
