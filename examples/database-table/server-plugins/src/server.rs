//! The PostgreSQL implementation of `DatabaseServer`: the children it
//! desires for a server, from the spec and the observed Secret.

use std::collections::BTreeMap;
use std::io::Read;

use base64::Engine;
use kplug_sidecar::{BoxError, Plugin, Request, Response};
use serde::Deserialize;
use serde_json::{Value, json};

/// The implementation offered.
pub const IMPLEMENTATION: &str = "PostgreSQL";
/// The image when the spec names none: the one `compose.yaml` runs.
pub const DEFAULT_IMAGE: &str = "postgres:17-bookworm";
/// The PostgreSQL port, in the pod and on the Service.
pub const PORT: i32 = 5432;
/// The database superuser, and its database.
pub const USER: &str = "kplug";
/// The pod template annotation holding the hash of the settings file: a
/// settings edit changes the template, so the Deployment rolls and the
/// server reads the new file.
pub const SETTINGS_HASH: &str = "myorg.org/settings-hash";
/// Where the ConfigMap's `postgresql.conf` is mounted.
const SETTINGS_DIR: &str = "/etc/postgresql-settings";
/// The data volume; PGDATA is a directory in it, since initdb refuses a
/// mount point it does not own.
const DATA_DIR: &str = "/var/lib/postgresql/data";
/// Settings the plugin sets itself: the pod's wiring depends on them.
const RESERVED_SETTINGS: [&str; 6] = [
    "listen_addresses",
    "port",
    "data_directory",
    "hba_file",
    "ident_file",
    "config_file",
];

/// `DatabaseServer.spec`, as far as this implementation reads it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerSpec {
    /// The PostgreSQL image (its version).
    #[serde(default = "default_image")]
    pub image: String,
    /// postgresql.conf parameters, name to value.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
}

fn default_image() -> String {
    DEFAULT_IMAGE.to_owned()
}

/// The `postgresql-server` plugin.
#[derive(Clone, Copy, Debug, Default)]
pub struct PostgresServer;

impl Plugin for PostgresServer {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        let spec: ServerSpec = match request.spec() {
            Ok(spec) => spec,
            Err(e) => return Ok(Response::failed(e.to_string())),
        };
        let settings = match settings_file(request.name(), &spec.settings) {
            Ok(settings) => settings,
            Err(e) => return Ok(Response::failed(e)),
        };
        // The observed password, so that the answer is the same on every
        // call (a new one each time would roll the server forever).
        let password = match observed_password(&request) {
            Some(password) => password,
            None => generate_password()?,
        };
        let children = desired(&request, &spec, &settings, &password);
        Ok(crate::status::answer(&request, &spec, &settings).children(children))
    }
}

/// The four children, in a fixed order.
pub fn desired(request: &Request, spec: &ServerSpec, settings: &str, password: &str) -> Vec<Value> {
    let name = request.name();
    vec![
        secret(name, password),
        config_map(name, settings),
        service(name),
        deployment(name, spec, settings),
    ]
}

/// The Secret's name.
pub fn secret_name(server: &str) -> String {
    format!("{server}-credentials")
}

/// The ConfigMap's name.
pub fn config_map_name(server: &str) -> String {
    format!("{server}-settings")
}

/// The password (base64, as in the Secret's `data`) of the observed
/// Secret, if there is one.
pub fn observed_password(request: &Request) -> Option<String> {
    let secret = request.child("Secret", &secret_name(request.name()))?;
    let password = secret.raw()["data"]["password"].as_str()?;
    (!password.is_empty()).then(|| password.to_owned())
}

/// A new password: 18 random bytes in hex, base64-encoded for `data`.
fn generate_password() -> std::io::Result<String> {
    let mut bytes = [0u8; 18];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(base64::engine::general_purpose::STANDARD.encode(hex))
}

/// postgresql.conf from the spec's settings, in name order; a name that is
/// not a parameter name, a reserved one, or a value with a line break is
/// refused.
pub fn settings_file(server: &str, settings: &BTreeMap<String, String>) -> Result<String, String> {
    let mut file = format!(
        "# Written by the postgresql-server plugin from spec.settings of DatabaseServer {server}.\n\
         listen_addresses = '*'\n"
    );
    for (name, value) in settings {
        let valid = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
        if !valid {
            return Err(format!(
                "spec.settings.{name}: not a PostgreSQL parameter name"
            ));
        }
        if RESERVED_SETTINGS.contains(&name.as_str()) {
            return Err(format!(
                "spec.settings.{name}: set by the plugin itself, it cannot be changed"
            ));
        }
        if value.contains(['\n', '\r']) {
            return Err(format!("spec.settings.{name}: a value cannot span lines"));
        }
        let quoted = value.replace('\\', "\\\\").replace('\'', "''");
        file.push_str(&format!("{name} = '{quoted}'\n"));
    }
    Ok(file)
}

/// FNV-1a, 64 bits, in hex: stable across builds and platforms, unlike
/// `std`'s hasher, so the same settings always give the same template.
pub fn settings_hash(settings: &str) -> String {
    let hash = settings
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{hash:016x}")
}

/// The pods' labels, and the Service's selector.
pub fn labels(server: &str) -> Value {
    json!({"app.kubernetes.io/name": "postgresql", "app.kubernetes.io/instance": server})
}

fn secret(server: &str, password: &str) -> Value {
    let user = base64::engine::general_purpose::STANDARD.encode(USER);
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret_name(server), "labels": labels(server)},
        "type": "Opaque",
        "data": {"username": user, "password": password},
    })
}

fn config_map(server: &str, settings: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": config_map_name(server), "labels": labels(server)},
        "data": {"postgresql.conf": settings},
    })
}

fn service(server: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": server, "labels": labels(server)},
        "spec": {
            "selector": labels(server),
            // protocol explicitly: server-side apply keys ports by port and
            // protocol, and refuses an entry without the key.
            "ports": [{"name": "postgresql", "port": PORT, "targetPort": "postgresql", "protocol": "TCP"}],
        },
    })
}

fn deployment(server: &str, spec: &ServerSpec, settings: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": server, "labels": labels(server)},
        "spec": {
            "replicas": 1,
            // One data directory: the old server stops before the new one
            // starts.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels(server)},
            "template": {
                "metadata": {
                    "labels": labels(server),
                    "annotations": {SETTINGS_HASH: settings_hash(settings)},
                },
                "spec": pod_spec(server, spec),
            },
        },
    })
}

fn pod_spec(server: &str, spec: &ServerSpec) -> Value {
    json!({
        "enableServiceLinks": false,
        "automountServiceAccountToken": false,
        // The postgres user of the image (999, in the public image and the
        // local stand-in alike).
        "securityContext": {
            "runAsNonRoot": true, "runAsUser": 999, "runAsGroup": 999, "fsGroup": 999,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [postgres_container(server, spec)],
        "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "settings", "configMap": {"name": config_map_name(server)}},
        ],
    })
}

fn postgres_container(server: &str, spec: &ServerSpec) -> Value {
    let password = json!({"secretKeyRef": {"name": secret_name(server), "key": "password"}});
    json!({
        "name": "postgres",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["postgres", "-c", format!("config_file={SETTINGS_DIR}/postgresql.conf")],
        "env": [
            {"name": "POSTGRES_USER", "value": USER},
            {"name": "POSTGRES_DB", "value": USER},
            {"name": "POSTGRES_PASSWORD", "valueFrom": password},
            {"name": "PGDATA", "value": format!("{DATA_DIR}/pgdata")},
        ],
        "ports": [{"name": "postgresql", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "exec": {"command": ["pg_isready", "--host=127.0.0.1", "--username", USER, "--dbname", USER]},
            "periodSeconds": 2,
            "timeoutSeconds": 2,
        },
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [
            {"name": "data", "mountPath": DATA_DIR},
            {"name": "settings", "mountPath": SETTINGS_DIR, "readOnly": true},
        ],
    })
}
