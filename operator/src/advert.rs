//! Where `kubectl kplug` finds an operator running on this machine.
//!
//! In a cluster, `kubectl kplug` asks the operator's Pods through the API
//! server. An operator started by hand (the tutorial's, a developer's, one
//! under `docker compose`) has no Pod, and its `/plugins` is wherever
//! `--metrics-addr` put it, often a port picked at random. So each
//! operator that serves its endpoints leaves an advert: a small JSON file
//! named for its process, in a directory of the user's ([`dir`]), with its
//! address and the cluster it works for, removed when it stops.
//!
//! # Guarantees
//! - Best effort: an advert that cannot be written (a read-only file
//!   system, in a container) is logged at debug and changes nothing else.
//! - The cluster is told by the UID of its `default` namespace, which every
//!   API server creates: `kubectl kplug` keeps only the adverts of the
//!   cluster its kubeconfig names. An operator that may not read it
//!   advertises no cluster, and is kept for any.
//!
//! # Caveats
//! - An operator killed (SIGKILL) leaves its advert; the next operator to
//!   start and `kubectl kplug` remove an advert whose process is gone
//!   ([`is_alive`]), and `kubectl kplug` one whose address refuses
//!   connections.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use serde::{Deserialize, Serialize};

/// One operator's advert.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Advert {
    /// Where it serves `/plugins`, `/calls` and `/metrics`.
    pub url: String,
    /// The UID of its cluster's `default` namespace, if it could read it.
    pub cluster: Option<String>,
    /// The kind it manages, `<Kind>.<group>`.
    pub kind: String,
    /// Its process.
    pub pid: u32,
}

/// The adverts' directory: `$XDG_RUNTIME_DIR/kplug/operators`, or
/// `<temp dir>/kplug-<uid>/operators` without it.
pub fn dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(runtime) if !runtime.is_empty() => PathBuf::from(runtime).join("kplug/operators"),
        _ => std::env::temp_dir()
            .join(format!("kplug-{}", nix::unistd::getuid()))
            .join("operators"),
    }
}

/// The cluster's identity for adverts: the UID of its `default` namespace.
pub async fn cluster_of(client: &kube::Client) -> Option<String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.get("default").await.ok()?.metadata.uid
}

/// The adverts in [`dir`] for the cluster `client` works for (and those
/// that name no cluster).
pub async fn find(client: &kube::Client) -> Vec<(PathBuf, Advert)> {
    let cluster = cluster_of(client).await;
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, Advert)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let advert: Advert = serde_json::from_str(&text).ok()?;
            Some((path, advert))
        })
        .filter(|(_, a)| a.cluster.is_none() || cluster.is_none() || a.cluster == cluster)
        .collect();
    found.sort_by_key(|(_, a)| a.pid);
    found
}

/// Whether the advert's process still runs (a killed operator leaves its
/// advert, and another process may have its port since).
pub fn is_alive(advert: &Advert) -> bool {
    let Ok(pid) = i32::try_from(advert.pid) else {
        return false;
    };
    // Signal 0 checks that the process exists; EPERM: it does, another
    // user's.
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// An advert on disk, removed when dropped (when the operator stops).
#[derive(Debug)]
pub(crate) struct Published(PathBuf);

impl Drop for Published {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Leaves the advert of this process, serving on `addr`, managing `kind`
/// (see the [module docs](self)).
pub(crate) async fn publish(
    client: &kube::Client,
    addr: SocketAddr,
    kind: String,
) -> Option<Published> {
    // An address for every interface is reached on loopback.
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        ip => ip,
    };
    let advert = Advert {
        url: format!("http://{}", SocketAddr::new(ip, addr.port())),
        cluster: cluster_of(client).await,
        kind,
        pid: std::process::id(),
    };
    sweep();
    // One process may run several operators (a library user's, tests).
    let path = dir().join(format!("{}-{}.json", advert.pid, addr.port()));
    match write(&path, &advert) {
        Ok(()) => Some(Published(path)),
        Err(error) => {
            tracing::debug!(path = %path.display(), %error, "no advert for kubectl kplug");
            None
        }
    }
}

/// Removes the adverts of processes that are gone (killed operators).
fn sweep() {
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return;
    };
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        let advert = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str::<Advert>(&text).ok());
        if advert.is_some_and(|a| !is_alive(&a)) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn write(path: &Path, advert: &Advert) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, serde_json::to_vec(advert)?)
}
