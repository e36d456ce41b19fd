//! Requests the API server has served, from its own `/metrics`.

use std::collections::BTreeMap;

use anyhow::Context as _;
use kube::Client;

/// Requests served, by verb, resource and subresource.
#[derive(Debug, Default, Clone)]
pub(crate) struct Requests(BTreeMap<String, u64>);

impl Requests {
    /// All of them.
    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// What was served since `before`, one line per verb and resource,
    /// most first (the benchmark keeps it next to the logs).
    pub(crate) fn since(&self, before: &Self) -> (u64, String) {
        let mut lines: Vec<(u64, &str)> = self
            .0
            .iter()
            .map(|(key, n)| (n - before.0.get(key).copied().unwrap_or(0), key.as_str()))
            .filter(|(n, _)| *n > 0)
            .collect();
        lines.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let text = lines
            .iter()
            .map(|(n, key)| format!("{n:>8} {key}\n"))
            .collect();
        (self.total() - before.total(), text)
    }
}

/// The API server's `apiserver_request_total` for the requests for a
/// resource (get, list, watch, create, patch, …). Requests for no resource
/// are left out: `/metrics` (the benchmark's own reads), health probes
/// (kube-testenv's), and discovery (once per client start, the same for
/// kplug and its baseline).
pub(crate) async fn requests(client: &Client) -> anyhow::Result<Requests> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client
        .request_text(request)
        .await
        .context("reading the API server's /metrics")?;
    Ok(parse(&text))
}

fn parse(text: &str) -> Requests {
    let mut requests = Requests::default();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
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
        *requests.0.entry(key).or_default() += value as u64;
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
        assert_eq!(requests.total(), 6000);
        let (since, lines) = requests.since(&Requests::default());
        assert_eq!(since, 6000);
        assert_eq!(
            lines,
            "    4000 APPLY databasetables/status\n    2000 POST databasetables\n"
        );
    }
}
