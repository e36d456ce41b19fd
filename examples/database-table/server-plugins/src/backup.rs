//! The `backup` plugin's `Mutate`: a backup sidecar and a volume it shares
//! with the server, added to the pod template of every PostgreSQL
//! Deployment before the operator applies it (as a CNPG-I backup plugin
//! adds them to the pods an operator creates).
//!
//! The patch depends on the object alone, so the same call always gets the
//! same patch: the operator judges drift by the mutated object, and a
//! deterministic mutator never makes it apply again.

use kplug_sidecar::{BoxError, MutateCall, Mutation, Plugin, Request, Response};
use serde_json::{Value, json};

/// The sidecar's container name.
pub const CONTAINER: &str = "backup";
/// The shared volume's name.
pub const VOLUME: &str = "backup";
/// Where both containers mount it.
pub const MOUNT: &str = "/backup";
/// The dump the sidecar writes there.
pub const DUMP: &str = "/backup/dumpall.sql";
/// The container the mutator looks for: PostgreSQL's.
const SERVER: &str = "postgres";

/// Waits for the server, then dumps every database into the shared volume
/// every `BACKUP_INTERVAL_SECONDS`, replacing the dump only once it is
/// complete.
const SCRIPT: &str = r#"until pg_isready --quiet; do sleep 1; done
while true; do
  if pg_dumpall --file=/backup/dumpall.sql.tmp; then
    mv /backup/dumpall.sql.tmp /backup/dumpall.sql
    echo "backup: wrote /backup/dumpall.sql"
  fi
  sleep "$BACKUP_INTERVAL_SECONDS"
done
"#;

/// The `backup` plugin.
#[derive(Clone, Copy, Debug, Default)]
pub struct Backup;

impl Plugin for Backup {
    /// Never called: the plugin offers no implementation.
    async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
        Ok(Response::failed(
            "the backup plugin implements no kind; it only mutates",
        ))
    }

    async fn mutate(&self, call: MutateCall) -> Result<Mutation, BoxError> {
        Ok(mutation(call.object().raw()))
    }
}

/// The patch for `deployment`: none when it has no `postgres` container,
/// or already has a `backup` one.
pub fn mutation(deployment: &Value) -> Mutation {
    let pod = &deployment["spec"]["template"]["spec"];
    let containers = pod["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let Some((index, server)) = containers
        .iter()
        .enumerate()
        .find(|(_, c)| c["name"] == SERVER)
    else {
        return Mutation::none();
    };
    if containers.iter().any(|c| c["name"] == CONTAINER) {
        return Mutation::none();
    }
    let volume = json!({"name": VOLUME, "emptyDir": {}});
    let mount = json!({"name": VOLUME, "mountPath": MOUNT});
    let mutation = append(
        Mutation::none(),
        "/spec/template/spec/volumes",
        &pod["volumes"],
        volume,
    );
    let mounts = format!("/spec/template/spec/containers/{index}/volumeMounts");
    append(mutation, &mounts, &server["volumeMounts"], mount)
        .add("/spec/template/spec/containers/-", sidecar(server))
}

/// Appends `item` to the list at `path`, or creates the list.
fn append(mutation: Mutation, path: &str, list: &Value, item: Value) -> Mutation {
    if list.is_array() {
        mutation.add(&format!("{path}/-"), item)
    } else {
        mutation.add(path, json!([item]))
    }
}

/// The sidecar: the server's own image (it has the client tools), its
/// user and password, the shared volume.
fn sidecar(server: &Value) -> Value {
    let env = server["env"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let find = |name: &str| env.iter().find(|e| e["name"] == name);
    let user = find("POSTGRES_USER").map_or(json!("postgres"), |e| e["value"].clone());
    let mut password = json!({"name": "PGPASSWORD"});
    if let Some(from) = find("POSTGRES_PASSWORD") {
        for key in ["value", "valueFrom"] {
            if let Some(value) = from.get(key) {
                password[key] = value.clone();
            }
        }
    }
    json!({
        "name": CONTAINER,
        "image": server["image"],
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", SCRIPT],
        "env": [
            {"name": "PGHOST", "value": "127.0.0.1"},
            {"name": "PGUSER", "value": user},
            password,
            {"name": "BACKUP_INTERVAL_SECONDS", "value": "3600"},
        ],
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": VOLUME, "mountPath": MOUNT}],
    })
}
