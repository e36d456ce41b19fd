//! Plugins and extensions for the reconcile's unit tests: scripted answers,
//! recorded calls, no processes and no sockets.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kplug_proto::v1::{
    Capability, FinalizeRequest, FinalizeResponse, GroupKind, Offer, ReconcileRequest,
    ReconcileResponse,
};
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};

use crate::extensions::{ExtensionRef, Problem, Resolution};
use crate::plugin::{CallError, PluginInstance};
use crate::reconcile::Backend;
use crate::selection::Candidate;

type Answers<T> = Mutex<HashMap<String, VecDeque<Result<T, CallError>>>>;

/// A hook run when the reconcile reads the candidates.
type Hook = Box<dyn Fn(&FakeBackend) + Send + Sync>;

#[derive(Default)]
pub(super) struct FakeBackend {
    plugins: Mutex<Vec<Arc<PluginInstance>>>,
    offered: Mutex<BTreeSet<String>>,
    reconciles: Answers<ReconcileResponse>,
    finalizes: Answers<FinalizeResponse>,
    /// `(plugin, rpc, implementation, extensions sent)` of every call.
    calls: Mutex<Vec<(String, &'static str, String, usize)>>,
    /// Start-up grace left, one value per read (the last one sticks).
    grace: Mutex<VecDeque<Option<Duration>>>,
    extensions: Mutex<Vec<DynamicObject>>,
    unsynced: AtomicBool,
    on_candidates: Mutex<Option<Hook>>,
}

impl FakeBackend {
    /// A ready plugin `name` offering `implementation` of `Greeting`, with
    /// `capabilities`, and extension kind `GreetingStyle`.
    pub(super) fn add_plugin(&self, name: &str, implementation: &str, capabilities: &[Capability]) {
        let offer = Offer {
            children: Default::default(),
            base: Some(greeting_kind()),
            implementation: implementation.to_owned(),
            extensions: vec![GroupKind {
                group: "example.com".into(),
                kind: "GreetingStyle".into(),
            }],
        };
        let instance = PluginInstance::fake(name, "1.0.0", vec![offer], capabilities.to_vec());
        self.lock_offered().insert(implementation.to_owned());
        let mut plugins = self.plugins.lock().unwrap_or_else(|e| e.into_inner());
        plugins.retain(|p| p.name != name);
        plugins.push(Arc::new(instance));
    }

    pub(super) fn answer(&self, plugin: &str, answer: Result<ReconcileResponse, CallError>) {
        lock(&self.reconciles)
            .entry(plugin.into())
            .or_default()
            .push_back(answer);
    }

    pub(super) fn answer_finalize(
        &self,
        plugin: &str,
        answer: Result<FinalizeResponse, CallError>,
    ) {
        lock(&self.finalizes)
            .entry(plugin.into())
            .or_default()
            .push_back(answer);
    }

    pub(super) fn calls(&self) -> Vec<(String, &'static str, String, usize)> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(super) fn set_grace(&self, values: impl IntoIterator<Item = Option<Duration>>) {
        *self.grace.lock().unwrap_or_else(|e| e.into_inner()) = values.into_iter().collect();
    }

    pub(super) fn add_extension(&self, ext: DynamicObject) {
        self.extensions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ext);
    }

    /// The extension watches have not listed yet.
    pub(super) fn set_unsynced(&self, unsynced: bool) {
        self.unsynced.store(unsynced, Ordering::Release);
    }

    pub(super) fn on_candidates(&self, hook: impl Fn(&FakeBackend) + Send + Sync + 'static) {
        *self.on_candidates.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(hook));
    }

    fn lock_offered(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.offered.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, plugin: &str, rpc: &'static str, implementation: &str, extensions: usize) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push((
            plugin.to_owned(),
            rpc,
            implementation.to_owned(),
            extensions,
        ));
    }
}

fn lock<T>(
    answers: &Answers<T>,
) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<Result<T, CallError>>>> {
    answers.lock().unwrap_or_else(|e| e.into_inner())
}

fn next<T>(answers: &Answers<T>, plugin: &str, rpc: &str) -> Result<T, CallError> {
    lock(answers)
        .get_mut(plugin)
        .and_then(VecDeque::pop_front)
        .unwrap_or_else(|| panic!("{plugin} was called ({rpc}) with no answer scripted"))
}

pub(super) fn greeting_kind() -> GroupKind {
    GroupKind {
        group: "example.com".into(),
        kind: "Greeting".into(),
    }
}

impl Backend for FakeBackend {
    fn candidates(&self, base: &GroupKind) -> Vec<Candidate> {
        if let Some(hook) = &*self.on_candidates.lock().unwrap_or_else(|e| e.into_inner()) {
            hook(self);
        }
        self.plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .flat_map(|p| p.candidates(base).collect::<Vec<_>>())
            .collect()
    }

    fn ever_offered(&self, _base: &GroupKind) -> Vec<String> {
        self.lock_offered().iter().cloned().collect()
    }

    fn start_up_grace_left(&self) -> Option<Duration> {
        let mut grace = self.grace.lock().unwrap_or_else(|e| e.into_inner());
        if grace.len() > 1 {
            grace.pop_front().flatten()
        } else {
            grace.front().copied().flatten()
        }
    }

    fn registry_socket(&self) -> PathBuf {
        PathBuf::from("/var/run/kplug/registry.sock")
    }

    fn plugin(&self, plugin: &str) -> Option<Arc<PluginInstance>> {
        self.plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|p| p.name == plugin)
            .cloned()
    }

    async fn reconcile(
        &self,
        plugin: &str,
        request: ReconcileRequest,
    ) -> Result<ReconcileResponse, CallError> {
        self.record(
            plugin,
            "Reconcile",
            &request.implementation,
            request.extensions.len(),
        );
        next(&self.reconciles, plugin, "Reconcile")
    }

    async fn finalize(
        &self,
        plugin: &str,
        request: FinalizeRequest,
    ) -> Result<FinalizeResponse, CallError> {
        self.record(
            plugin,
            "Finalize",
            &request.implementation,
            request.extensions.len(),
        );
        next(&self.finalizes, plugin, "Finalize")
    }

    fn hooks(
        &self,
        _base: &GroupKind,
        _phase: kplug_proto::v1::HookPhase,
    ) -> Vec<crate::reconcile::hooks::Declared> {
        // Hooks are called on real plugin processes (operator/tests/hooks.rs).
        Vec::new()
    }

    async fn resolve(&self, base: &DynamicObject, refs: &[ExtensionRef]) -> Resolution {
        let mut resolution = Resolution::default();
        if self.unsynced.load(Ordering::Acquire) && !refs.is_empty() {
            resolution
                .waiting
                .push("the GreetingStyle watch has not listed yet".into());
            return resolution;
        }
        let extensions = self.extensions.lock().unwrap_or_else(|e| e.into_inner());
        for r in refs {
            let found = extensions.iter().find(|e| {
                e.types.as_ref().is_some_and(|t| t.kind == r.kind)
                    && e.name_any() == r.name
                    && e.namespace() == base.namespace()
            });
            match found {
                Some(ext) => resolution.found.push(ext.clone()),
                None => resolution.problems.push((
                    Problem::NotFound,
                    format!("extension {} {} not found", r.kind, r.name),
                )),
            }
        }
        resolution
    }

    fn forget(&self, _base: &DynamicObject) {}

    fn extension_api(&self, ext: &DynamicObject) -> ApiResource {
        let kind = ext
            .types
            .as_ref()
            .map(|t| t.kind.clone())
            .unwrap_or_default();
        ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            plural: format!("{}s", kind.to_ascii_lowercase()),
            kind,
        }
    }
}
