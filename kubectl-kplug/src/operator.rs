//! Asking the operator which plugins are registered: its read-only
//! `/plugins` endpoint, on each replica's Pod through the API server's pod
//! proxy, at an address given with `--operator`, or, when no Pod matches,
//! on each operator started on this machine for the same cluster (the
//! adverts of `kplug_operator::advert`).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde::Deserialize;

use crate::Error;

/// Where the operator is.
#[derive(Debug, clap::Args)]
pub(crate) struct Source {
    /// The operator's HTTP address (e.g. http://localhost:8080 after
    /// `kubectl port-forward`); default: every operator Pod, through the API
    /// server's pod proxy, or without one every operator started on this
    /// machine for the same cluster
    #[arg(long, value_name = "URL")]
    operator: Option<String>,

    /// Namespace of the operator's Pods
    #[arg(long, default_value = "kplug-system")]
    operator_namespace: String,

    /// Label selector of the operator's Pods
    #[arg(long, default_value = "app.kubernetes.io/name=kplug-operator")]
    operator_selector: String,

    /// The operator's metrics port (--metrics-addr)
    #[arg(long, default_value_t = 8080)]
    operator_port: u16,
}

/// What one replica's `/plugins` says.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Replica {
    /// Where it was asked: a Pod name or the `--operator` address.
    #[serde(skip)]
    pub(crate) source: String,
    /// The shared socket dir, where plugins register.
    pub(crate) socket_dir: String,
    /// The registered plugins.
    pub(crate) plugins: Vec<Plugin>,
}

/// One registered plugin.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Plugin {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) ready: bool,
    pub(crate) last_heartbeat_seconds_ago: f64,
    pub(crate) offers: Vec<Offer>,
    /// Its hooks (an older operator reports none).
    #[serde(default)]
    pub(crate) hooks: Vec<Hook>,
}

/// A hook a plugin declared, which the operator calls.
#[derive(Debug, Deserialize)]
pub(crate) struct Hook {
    pub(crate) name: String,
    pub(crate) base: Option<GroupKind>,
    pub(crate) phase: String,
    pub(crate) behaviour: String,
    pub(crate) order: i32,
}

impl std::fmt::Display for Hook {
    /// `check: before-reconcile sync-enforce (order 5) of DatabaseTable.myorg.org`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} {} (order {})",
            self.name, self.phase, self.behaviour, self.order
        )?;
        match &self.base {
            Some(base) => write!(f, " of {base}"),
            None => Ok(()),
        }
    }
}

/// What a plugin serves.
#[derive(Debug, Deserialize)]
pub(crate) struct Offer {
    pub(crate) base: Option<GroupKind>,
    pub(crate) implementation: String,
    pub(crate) extensions: Vec<GroupKind>,
}

/// A kind and its group.
#[derive(Debug, Deserialize)]
pub(crate) struct GroupKind {
    pub(crate) group: String,
    pub(crate) kind: String,
}

impl std::fmt::Display for GroupKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

impl Plugin {
    /// The implementation it offers for `kind` of `group`, if any.
    pub(crate) fn offers_for(&self, group: &str, kind: &str) -> Vec<&Offer> {
        self.offers
            .iter()
            .filter(|o| {
                o.base
                    .as_ref()
                    .is_some_and(|b| b.kind == kind && b.group.eq_ignore_ascii_case(group))
            })
            .collect()
    }
}

impl Source {
    /// Every replica's registered plugins.
    ///
    /// # Errors
    /// When no replica can be asked, with what to check.
    pub(crate) async fn replicas(&self, client: &kube::Client) -> Result<Vec<Replica>, Error> {
        let mut replicas = Vec::new();
        for (source, text) in self.ask(client, "/plugins").await? {
            let text =
                text.ok_or_else(|| format!("{source} has no /plugins: is it a kplug operator?"))?;
            replicas.push(parse(&source, &text)?);
        }
        Ok(replicas)
    }

    /// The last plugin call each replica made for the object `uid`:
    /// (replica, call), for the replicas that made one.
    ///
    /// # Errors
    /// When no replica can be asked.
    pub(crate) async fn last_calls(
        &self,
        client: &kube::Client,
        uid: &str,
    ) -> Result<Vec<(String, LastCall)>, Error> {
        let mut calls = Vec::new();
        for (source, text) in self.ask(client, &format!("/calls/{uid}")).await? {
            if let Some(text) = text {
                let call = serde_json::from_str(&text).map_err(|e| {
                    format!("{source} answered /calls with something else than JSON: {e}")
                })?;
                calls.push((source, call));
            }
        }
        Ok(calls)
    }

    /// GET `path` on each replica: (replica, body), the body `None` on 404.
    async fn ask(
        &self,
        client: &kube::Client,
        path: &str,
    ) -> Result<Vec<(String, Option<String>)>, Error> {
        if let Some(url) = &self.operator {
            let config =
                kube::Config::new(url.parse().map_err(|e| format!("--operator {url}: {e}"))?);
            let direct = kube::Client::try_from(config)?;
            let text = get(&direct, path)
                .await
                .map_err(|e| format!("asking the operator at {url} for {path}: {e}"))?;
            return Ok(vec![(url.clone(), text)]);
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.operator_namespace);
        let list = pods
            .list(&ListParams::default().labels(&self.operator_selector))
            .await
            .map_err(|e| {
                format!(
                    "listing the operator's Pods in {}: {e}",
                    self.operator_namespace
                )
            })?;
        if list.items.is_empty() {
            return self.ask_local(client, path).await;
        }
        let mut answers = Vec::new();
        for pod in list.items {
            let name = pod.metadata.name.unwrap_or_default();
            let proxied = format!(
                "/api/v1/namespaces/{}/pods/{name}:{}/proxy{path}",
                self.operator_namespace, self.operator_port
            );
            let text = get(client, &proxied)
                .await
                .map_err(|e| format!("asking Pod {name} for {path} through the API server: {e}"))?;
            answers.push((name, text));
        }
        Ok(answers)
    }
}

impl Source {
    /// GET `path` on each operator started on this machine for the
    /// cluster `client` works for (`kplug_operator::advert`): one with no
    /// Pod, such as the tutorial's.
    async fn ask_local(
        &self,
        client: &kube::Client,
        path: &str,
    ) -> Result<Vec<(String, Option<String>)>, Error> {
        let mut answers = Vec::new();
        for (file, advert) in kplug_operator::advert::find(client).await {
            if !kplug_operator::advert::is_alive(&advert) {
                let _ = std::fs::remove_file(&file);
                continue;
            }
            let config = kube::Config::new(
                advert
                    .url
                    .parse()
                    .map_err(|e| format!("{}: {e}", file.display()))?,
            );
            let direct = kube::Client::try_from(config)?;
            match get(&direct, path).await {
                Ok(text) => answers.push((
                    format!("{} (pid {}, {})", advert.url, advert.pid, advert.kind),
                    text,
                )),
                // Gone without removing its advert (killed): forget it.
                Err(_) => {
                    let _ = std::fs::remove_file(&file);
                }
            }
        }
        if answers.is_empty() {
            return Err(format!(
                "no Pod in namespace {} matches {}, and no operator on this machine serves this cluster \
                 (none advertised in {}): pass --operator-namespace and --operator-selector, or --operator URL",
                self.operator_namespace,
                self.operator_selector,
                kplug_operator::advert::dir().display()
            )
            .into());
        }
        Ok(answers)
    }
}

/// GET `path`; `None` when it answers 404.
async fn get(client: &kube::Client, path: &str) -> Result<Option<String>, Error> {
    match client
        .request_text(http::Request::get(path).body(Vec::new())?)
        .await
    {
        Ok(text) => Ok(Some(text)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// The last plugin call a replica made for an object.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LastCall {
    pub(crate) plugin: String,
    pub(crate) call: String,
    pub(crate) outcome: String,
    pub(crate) took_seconds: f64,
    pub(crate) seconds_ago: f64,
}

fn parse(source: &str, text: &str) -> Result<Replica, Error> {
    let mut replica: Replica = serde_json::from_str(text).map_err(|e| {
        format!("{source} answered /plugins with something else than the operator's JSON: {e}")
    })?;
    replica.source = source.to_owned();
    Ok(replica)
}
