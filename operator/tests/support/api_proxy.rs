//! A fault-injecting proxy in front of the real kube-apiserver.
//!
//! Some guarantees are about what happens while a watch is listing or
//! relisting, a window the real API server opens at random. The proxy makes
//! it open on demand: it serves plain HTTP on loopback (like `kubectl
//! proxy`), forwards every request with the test's admin client, and per
//! resource plural it can
//! - hold LIST requests (and streaming lists: a WATCH with `sendInitialEvents`) until released ([`ApiProxy::hold_lists`]), and
//! - force a relist ([`ApiProxy::force_relist`]): cut the open watches and
//!   answer the next watch with `410 Gone`, as the API server does when a
//!   resource version is too old.
//!
//! The operator under test gets [`ApiProxy::kubeconfig`]; everything else it
//! does reaches the real API server unchanged, and the proxy lists its
//! requests ([`ApiProxy::requests`]) and writes ([`ApiProxy::writes`]).
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::watch;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// What the proxy does to one resource plural.
#[derive(Clone, Debug, Default)]
struct Rule {
    /// LIST requests wait while this is set.
    hold_lists: bool,
    /// LIST requests that arrived since the hold was set.
    held: usize,
    /// The next watch request is answered with an ERROR 410 event.
    gone_next_watch: bool,
    /// Open watches end when this changes.
    cut: u64,
}

/// A running proxy; it stops when dropped.
pub struct ApiProxy {
    rules: watch::Sender<HashMap<String, Rule>>,
    requests: Arc<Mutex<Vec<String>>>,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ApiProxy {
    /// Starts a proxy to the shared test control plane.
    pub async fn start() -> Self {
        let client = kplug_testenv::client().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the API proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let dir = tempfile::tempdir().expect("proxy dir");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\ncurrent-context: proxy\nusers:\n- name: proxy\n  user: {{}}\n"
            ),
        )
        .expect("write the proxy kubeconfig");
        let (rules, _) = watch::channel(HashMap::new());
        let shared = rules.clone();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let client = client.clone();
                let rules = shared.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        if !is_watch(req.uri().query().unwrap_or_default()) {
                            seen.lock().unwrap().push(format!(
                                "{} {}",
                                req.method(),
                                req.uri().path()
                            ));
                        }
                        handle(client.clone(), rules.clone(), req)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            rules,
            requests,
            kubeconfig,
            _dir: dir,
            task,
        }
    }

    /// A kubeconfig that reaches the API server through this proxy.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Every request but a watch forwarded so far, as `METHOD path`, in the
    /// order received.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// Every request but a GET forwarded so far, as `METHOD path`, in the
    /// order received.
    pub fn writes(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| !r.starts_with("GET "))
            .collect()
    }

    /// Holds every LIST of `plural` until [`Self::release_lists`].
    pub fn hold_lists(&self, plural: &str) {
        self.rules.send_modify(|rules| {
            let rule = rules.entry(plural.to_owned()).or_default();
            rule.hold_lists = true;
            rule.held = 0;
        });
    }

    /// Lets held and later LISTs of `plural` through.
    pub fn release_lists(&self, plural: &str) {
        self.rules.send_modify(|rules| {
            rules.entry(plural.to_owned()).or_default().hold_lists = false;
        });
    }

    /// Makes the watches of `plural` relist: LISTs are held (until
    /// [`Self::release_lists`]), open watches end, and the watch that
    /// follows is told its resource version is gone.
    pub fn force_relist(&self, plural: &str) {
        self.rules.send_modify(|rules| {
            let rule = rules.entry(plural.to_owned()).or_default();
            rule.hold_lists = true;
            rule.held = 0;
            rule.gone_next_watch = true;
            rule.cut += 1;
        });
    }

    /// Waits until a LIST of `plural` is being held.
    pub async fn wait_for_held_list(&self, plural: &str, timeout: Duration) {
        let mut rules = self.rules.subscribe();
        let held = tokio::time::timeout(
            timeout,
            rules.wait_for(|rules| rules.get(plural).is_some_and(|r| r.held > 0)),
        )
        .await;
        assert!(
            matches!(held, Ok(Ok(_))),
            "no LIST of {plural} reached the API proxy within {timeout:?}"
        );
    }
}

/// The resource plural of a collection path (`.../<plural>`), which is what
/// LIST and WATCH requests address.
fn plural(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1")
}

async fn handle(
    client: kube::Client,
    rules: watch::Sender<HashMap<String, Rule>>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let plural = plural(parts.uri.path()).to_owned();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let get = parts.method == hyper::Method::GET;
    let ruled = get && rules.borrow().contains_key(&plural);
    let watch = get && is_watch(&query);
    // A list is a LIST, or a streaming list: a WATCH that starts with the
    // initial state (`sendInitialEvents=true`, what the operator's watches
    // use on API servers that have it).
    let list = !watch || query.split('&').any(|kv| kv == "sendInitialEvents=true");
    let mut cut = None;
    if watch {
        let mut gone = false;
        rules.send_if_modified(|rules| {
            if let Some(rule) = rules.get_mut(&plural) {
                gone = std::mem::take(&mut rule.gone_next_watch);
            }
            gone
        });
        if gone {
            return Ok(gone_response());
        }
        // Every watch can be cut later, also one opened before any rule.
        let epoch = rules.borrow().get(&plural).map(|r| r.cut);
        let mut changes = rules.subscribe();
        let plural = plural.clone();
        cut = Some(async move {
            let _ = changes
                .wait_for(|rules| rules.get(&plural).map(|r| r.cut) != epoch)
                .await;
        });
    }
    if ruled && list {
        let mut waiting = false;
        rules.send_if_modified(|rules| {
            let rule = rules.get_mut(&plural).expect("ruled");
            if rule.hold_lists {
                rule.held += 1;
                waiting = true;
            }
            waiting
        });
        if waiting {
            let _ = rules
                .subscribe()
                .wait_for(|rules| rules.get(&plural).is_none_or(|r| !r.hold_lists))
                .await;
        }
    }

    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return Ok(error_response(StatusCode::BAD_REQUEST, &e.to_string())),
    };
    let mut upstream = Request::builder().method(parts.method).uri(
        parts
            .uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_owned(),
    );
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "host" | "connection" | "content-length" | "transfer-encoding"
        ) {
            upstream = upstream.header(name, value);
        }
    }
    let upstream = upstream
        .body(kube::client::Body::from(body.to_vec()))
        .expect("a request built from a valid one");
    let response = match client.send(upstream).await {
        Ok(response) => response,
        Err(e) => return Ok(error_response(StatusCode::BAD_GATEWAY, &e.to_string())),
    };
    let (mut parts, body) = response.into_parts();
    parts.headers.remove("transfer-encoding");
    parts.headers.remove("connection");
    let frames = BodyStream::new(body.map_err(|e| Box::new(e) as BoxError));
    let body = match cut {
        Some(cut) => BodyExt::boxed_unsync(StreamBody::new(frames.take_until(Box::pin(cut)))),
        None => BodyExt::boxed_unsync(StreamBody::new(frames)),
    };
    Ok(Response::from_parts(parts, body))
}

fn full(body: impl Into<Bytes>) -> ProxyBody {
    Full::new(body.into())
        .map_err(|e| match e {})
        .boxed_unsync()
}

fn gone_response() -> Response<ProxyBody> {
    let event = serde_json::json!({
        "type": "ERROR",
        "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version (forced by the test's API proxy)",
            "reason": "Expired", "code": 410,
        },
    });
    Response::builder()
        .header("content-type", "application/json")
        .body(full(format!("{event}\n")))
        .expect("a valid response")
}

fn error_response(status: StatusCode, message: &str) -> Response<ProxyBody> {
    Response::builder()
        .status(status)
        .body(full(message.to_owned()))
        .expect("a valid response")
}
