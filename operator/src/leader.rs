//! Leader election: only the holder of a `coordination.k8s.io` Lease
//! reconciles.
//!
//! # Expected flow
//! - Every replica serves its own registry and `/metrics`, so its plugin
//!   sidecars are registered and ready before it ever leads.
//! - [`Elector::start`] takes part in the election for the Lease
//!   (`--lease-name` in `--lease-namespace`), with this replica's identity
//!   (`POD_NAME`, so a restarted container of the same pod takes its own
//!   Lease back at once).
//! - While it holds the Lease, the replica runs the controller; the moment it
//!   learns it lost it, the controller is dropped (calls in flight are
//!   cancelled, nothing more is written).
//! - On shutdown the Lease is released, so a follower takes over at once
//!   instead of after the Lease duration.
//!
//! # Guarantees
//! - A Lease has one holder at a time (server-side apply with conflict
//!   detection, in `kube-lease-manager`).
//! - A holder that dies is replaced within the Lease duration.
//!
//! # Caveats
//! - A holder that cannot reach the API server keeps acting on what it knows
//!   until it learns it lost the Lease; the renewal margin
//!   ([`LeaderElection::grace`]) bounds that for clocks and renewals that
//!   work. What it writes in that window is repaired by the new leader
//!   (see `crate::written`).

use std::time::Duration;

use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Leader election settings.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// The Lease's name.
    pub lease_name: String,
    /// The Lease's namespace.
    pub lease_namespace: String,
    /// This replica's identity (unique among replicas).
    pub identity: String,
    /// How long a Lease stays valid after its last renewal.
    pub duration: Duration,
    /// How long before expiry the holder renews.
    pub grace: Duration,
}

impl LeaderElection {
    /// The default Lease name for a kind: `kplug-<kind>-<group>`, lowercase.
    pub fn default_lease_name(kind: &str, group: &str) -> String {
        let name = if group.is_empty() {
            format!("kplug-{kind}")
        } else {
            format!("kplug-{kind}-{group}")
        };
        name.to_ascii_lowercase()
    }

    /// This replica's identity: `POD_NAME` when set (stable across container
    /// restarts), else the host name and process id.
    pub fn default_identity() -> String {
        std::env::var("POD_NAME")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_owned())
                    .unwrap_or_else(|_| "kplug-operator".into());
                format!("{host}-{}", std::process::id())
            })
    }
}

/// This replica's part in the election.
#[derive(Debug)]
pub(crate) struct Elector {
    leading: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
    identity: String,
}

impl Elector {
    /// Joins the election (creating the Lease if it does not exist).
    ///
    /// # Errors
    /// [`crate::Error::Leader`] when the Lease cannot be read or created
    /// (e.g. the operator may not `get`/`create` Leases in that namespace).
    pub(crate) async fn start(
        client: kube::Client,
        config: &LeaderElection,
    ) -> Result<Self, crate::Error> {
        let seconds = |d: Duration| d.as_secs().max(1);
        let manager = LeaseManagerBuilder::new(client, &config.lease_name)
            .with_namespace(&config.lease_namespace)
            .with_identity(&config.identity)
            .with_duration(seconds(config.duration))
            .with_grace(seconds(config.grace))
            .build()
            .await
            .map_err(|source| crate::Error::Leader {
                lease: format!("{}/{}", config.lease_namespace, config.lease_name),
                source,
            })?;
        let (leading, task) = manager.watch().await;
        tracing::info!(
            lease = %config.lease_name,
            namespace = %config.lease_namespace,
            identity = %config.identity,
            "joined leader election"
        );
        Ok(Self {
            leading,
            task,
            identity: config.identity.clone(),
        })
    }

    /// Waits until this replica holds the Lease.
    pub(crate) async fn until_leading(&mut self) {
        let _ = self.leading.wait_for(|leading| *leading).await;
        tracing::info!(identity = %self.identity, "became the leader; reconciling");
    }

    /// Waits until this replica no longer holds the Lease.
    pub(crate) async fn until_lost(&mut self) {
        let _ = self.leading.wait_for(|leading| !*leading).await;
        tracing::warn!(identity = %self.identity, "lost the leadership; stopped reconciling");
    }

    /// Leaves the election, releasing the Lease if held.
    pub(crate) async fn release(self) {
        drop(self.leading);
        match tokio::time::timeout(Duration::from_secs(5), self.task).await {
            Ok(Ok(Ok(_))) => tracing::info!("released the leader Lease"),
            Ok(Ok(Err(error))) => {
                tracing::warn!(%error, "could not release the leader Lease; the next leader waits for it to expire")
            }
            Ok(Err(_)) | Err(_) => tracing::warn!(
                "leader election did not stop in time; the next leader waits for the Lease to expire"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_lowercase_and_name_the_kind() {
        assert_eq!(
            LeaderElection::default_lease_name("DatabaseTable", "myorg.org"),
            "kplug-databasetable-myorg.org"
        );
        assert_eq!(
            LeaderElection::default_lease_name("ConfigMap", ""),
            "kplug-configmap"
        );
    }
}
