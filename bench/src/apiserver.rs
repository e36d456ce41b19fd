//! Requests the API server has served, from its own `/metrics`.

use std::collections::BTreeMap;

use std::path::Path;

use anyhow::Context as _;
use futures::AsyncReadExt as _;
use kube::Client;

/// Requests by verb, resource and subresource: those served (ended), and
/// the watches still open.
#[derive(Debug, Default, Clone)]
pub(crate) struct Requests {
    served: BTreeMap<String, u64>,
    open: BTreeMap<String, u64>,
}

impl Requests {
    /// The writes (create, update, patch, delete) to `resource` made since
    /// `before`.
    pub(crate) fn writes_since(&self, before: &Self, resource: &str) -> u64 {
        self.served
            .iter()
            .filter(|(key, _)| {
                let (verb, of) = key.split_once(' ').unwrap_or((key.as_str(), ""));
                let of = of.split('/').next().unwrap_or_default();
                of == resource && matches!(verb, "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE")
            })
            .map(|(key, n)| n.saturating_sub(before.served.get(key).copied().unwrap_or(0)))
            .sum()
    }

    /// The requests made since `before`, one line per verb and resource,
    /// most first (the benchmark keeps it next to the logs). A request
    /// counts once it has ended (`apiserver_request_total`), and so does a
    /// watch still open (`apiserver_longrunning_requests`): a watch is
    /// counted when it ends, and an operator's are open for as long as it
    /// runs, so that without them a client that streams its lists (one
    /// WATCH each) would look as if it made no request at all.
    pub(crate) fn since(&self, before: &Self) -> (u64, String) {
        let delta = |now: &BTreeMap<String, u64>, then: &BTreeMap<String, u64>, key: &str| {
            i128::from(now.get(key).copied().unwrap_or(0))
                - i128::from(then.get(key).copied().unwrap_or(0))
        };
        let keys: std::collections::BTreeSet<&String> =
            self.served.keys().chain(self.open.keys()).collect();
        let mut lines: Vec<(u64, &str)> = keys
            .into_iter()
            .map(|key| {
                // A watch open before and ended since counts in `served`
                // and leaves `open`: together, nothing new.
                let n =
                    delta(&self.served, &before.served, key) + delta(&self.open, &before.open, key);
                (u64::try_from(n.max(0)).unwrap_or(0), key.as_str())
            })
            .filter(|(n, _)| *n > 0)
            .collect();
        lines.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let total = lines
            .iter()
            .filter(|(_, key)| !api_servers_own(key))
            .map(|(n, _)| n)
            .sum();
        let text = lines
            .iter()
            .map(|(n, key)| {
                let note = if api_servers_own(key) {
                    " (the API server's own, not counted)"
                } else {
                    ""
                };
                format!("{n:>8} {key}{note}\n")
            })
            .collect();
        (total, text)
    }
}

/// Whether requests of `key` (verb and resource) are the API server's own
/// housekeeping, made on its own clock whoever the clients are: the
/// `kubernetes` Service's endpoints, which it reconciles every 10 s, its
/// identity Lease, which it renews with a PUT, and the Service IP repair
/// loop's LIST of Services (every 3 minutes). No controller measured here
/// makes them (`kube-lease-manager` renews a Lease with GET and PATCH, and
/// none reads Services), and counting them would charge a client for the
/// time it ran.
fn api_servers_own(key: &str) -> bool {
    let resource = key.split_once(' ').map_or("", |(_, r)| r);
    matches!(resource, "endpoints" | "endpointslices")
        || matches!(key, "PUT leases" | "LIST services")
}

/// The API server's `apiserver_request_total` and
/// `apiserver_longrunning_requests` (watches) for the requests for a
/// resource (get, list, watch, create, patch, …). Requests for no resource
/// are left out: `/metrics` (the benchmark's own reads), health probes
/// (kube-testenv's), `/version` and discovery (once per client start).
pub(crate) async fn requests(client: &Client) -> anyhow::Result<Requests> {
    Ok(parse(&metrics(client).await?))
}

/// The API server's `/metrics`, as text.
pub(crate) async fn metrics(client: &Client) -> anyhow::Result<String> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    client
        .request_text(request)
        .await
        .context("reading the API server's /metrics")
}

/// A CPU profile of the API server (and etcd: one process) over the next
/// `seconds`, from its `/debug/pprof/profile`, written to `to` for
/// `go tool pprof`. For finding what makes one controller's requests dearer
/// than another's: `KPLUG_BENCH_API_PROFILE=<seconds>` has every P2
/// measurement take one from its start.
pub(crate) async fn profile(client: &Client, seconds: u64, to: &Path) -> anyhow::Result<()> {
    let request =
        http::Request::get(format!("/debug/pprof/profile?seconds={seconds}")).body(Vec::new())?;
    let stream = client
        .request_stream(request)
        .await
        .context("asking the API server for a CPU profile")?;
    let mut stream = std::pin::pin!(stream);
    let mut body = Vec::new();
    stream
        .read_to_end(&mut body)
        .await
        .context("reading the API server's CPU profile")?;
    std::fs::write(to, body).with_context(|| format!("writing {}", to.display()))
}

fn parse(text: &str) -> Requests {
    let mut requests = Requests::default();
    for line in text.lines() {
        let map = if line.starts_with("apiserver_request_total{") {
            &mut requests.served
        } else if line.starts_with("apiserver_longrunning_requests{") {
            if label(line, "verb") != Some("WATCH") {
                continue;
            }
            &mut requests.open
        } else {
            continue;
        };
        let Some(resource) = label(line, "resource").filter(|r| !r.is_empty()) else {
            continue;
        };
        let Some(Ok(value)) = line.rsplit_once(' ').map(|(_, v)| v.parse::<f64>()) else {
            continue;
        };
        let verb = label(line, "verb").unwrap_or_default();
        let key = match label(line, "subresource").filter(|s| !s.is_empty()) {
            Some(sub) => format!("{verb} {resource}/{sub}"),
            None => format!("{verb} {resource}"),
        };
        *map.entry(key).or_default() += value as u64;
    }
    requests
}

/// The value of label `name` on a metric line (`subresource` is not
/// `resource`).
fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let labels = line.split_once('{')?.1.split_once('}')?.0;
    labels.split(',').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then(|| value.trim_matches('"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_resource_requests_and_leaves_out_probes() {
        let text = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="myorg.org",resource="databasetables",scope="resource",subresource="",verb="POST",version="v1alpha1"} 2000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="myorg.org",resource="databasetables",scope="resource",subresource="status",verb="APPLY",version="v1alpha1"} 4000
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 57
apiserver_request_total_other 9
"#;
        let requests = parse(text);
        let (since, lines) = requests.since(&Requests::default());
        assert_eq!(since, 6000);
        assert_eq!(
            lines,
            "    4000 APPLY databasetables/status\n    2000 POST databasetables\n"
        );
    }

    #[test]
    fn counts_open_watches_with_those_that_ended() {
        let before = parse(
            r#"apiserver_longrunning_requests{component="apiserver",group="myorg.org",resource="databasetables",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="myorg.org",resource="databasetables",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 3
"#,
        );
        // The open watch ended (4 served), two new ones are open, and a
        // LIST is not a watch however long it ran.
        let after = parse(
            r#"apiserver_longrunning_requests{component="apiserver",group="myorg.org",resource="databasetables",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 2
apiserver_longrunning_requests{component="apiserver",group="myorg.org",resource="databasetables",scope="namespace",subresource="",verb="LIST",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="myorg.org",resource="databasetables",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 4
"#,
        );
        let (since, lines) = after.since(&before);
        assert_eq!(since, 2, "{lines}");
        assert_eq!(lines, "       2 WATCH databasetables\n");
    }

    #[test]
    fn the_api_servers_own_housekeeping_is_listed_not_counted() {
        let text = r#"apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="endpoints",scope="resource",subresource="",verb="GET",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PATCH",version="v1"} 3
"#;
        let (since, lines) = parse(text).since(&Requests::default());
        assert_eq!(since, 3, "{lines}");
        assert_eq!(
            lines,
            "       3 PATCH leases\n       2 GET endpoints (the API server's own, not counted)\n       2 PUT leases (the API server's own, not counted)\n"
        );
    }
}
