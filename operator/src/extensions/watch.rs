//! One watch per extension kind: a reflector cache that extensions are read
//! from, and the events that wake the bases whose extensions changed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, store::Writer};
use kube::runtime::{WatchStreamExt, reflector::Store, watcher};
use kube::{Client, ResourceExt};

use super::Extensions;
use super::seen::{ExtKey, Seen, Version};
use crate::initial_list::InitialList;

/// The cache of one extension kind, filled by its own watch.
#[derive(Debug)]
pub(crate) struct KindWatch {
    ar: ApiResource,
    store: Store<DynamicObject>,
    /// Set once the first list has been applied to `store`; until then the
    /// cache says nothing about what exists.
    synced: AtomicBool,
    /// The watch's last error, shown to users waiting for the first list.
    last_error: Mutex<Option<String>>,
}

impl KindWatch {
    /// Starts watching `ar` with `api` (in the operator's namespace, or all).
    /// The task ends when `extensions` is dropped.
    pub(crate) fn start(
        client: &Client,
        namespace: Option<&str>,
        initial_list: InitialList,
        ar: &ApiResource,
        namespaced: bool,
        extensions: Weak<Extensions>,
    ) -> Arc<Self> {
        let api = crate::target::api_in(client, ar, namespace.filter(|_| namespaced));
        let writer = Writer::new(ar.clone());
        let this = Arc::new(Self {
            ar: ar.clone(),
            store: writer.as_reader(),
            synced: AtomicBool::new(false),
            last_error: Mutex::new(None),
        });
        tracing::info!(kind = %ar.kind, group = %ar.group, "watching extension kind");
        let config = initial_list.watcher_config();
        tokio::spawn(Arc::clone(&this).run(api, config, writer, extensions));
        this
    }

    async fn run(
        self: Arc<Self>,
        api: Api<DynamicObject>,
        config: watcher::Config,
        writer: Writer<DynamicObject>,
        extensions: Weak<Extensions>,
    ) {
        // The reflector applies each event to the cache before yielding it,
        // so what is compared below is what the next resolve will read.
        let events = watcher(api, config).default_backoff().reflect(writer);
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let Some(extensions) = extensions.upgrade() else {
                return;
            };
            match event {
                Ok(watcher::Event::Apply(obj) | watcher::Event::Delete(obj)) => {
                    self.set_error(None);
                    extensions.wake_stale(&self, &[self.key(&obj)]);
                }
                // A (re)list is complete: compare everything the bases saw
                // with it. Edits made before the first list, or while the
                // watch was down, are found here.
                Ok(watcher::Event::InitDone) => {
                    self.synced.store(true, Ordering::Release);
                    self.set_error(None);
                    extensions.wake_stale_kind(&self);
                }
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                Err(error) => {
                    tracing::warn!(kind = %self.ar.kind, group = %self.ar.group, %error, "extension watch failed; retrying with backoff");
                    self.set_error(Some(error.to_string()));
                }
            }
        }
    }

    fn set_error(&self, error: Option<String>) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = error;
    }

    /// The group and kind watched.
    pub(crate) fn kind(&self) -> (&str, &str) {
        (&self.ar.group, &self.ar.kind)
    }

    pub(crate) fn key(&self, obj: &DynamicObject) -> ExtKey {
        ExtKey {
            group: self.ar.group.clone(),
            kind: self.ar.kind.clone(),
            namespace: obj.namespace(),
            name: obj.name_any(),
        }
    }

    /// The cached object, `Err` until the first list is in.
    pub(crate) fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, String> {
        if !self.synced.load(Ordering::Acquire) {
            let why = self
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|e| format!(" (last error: {e})"))
                .unwrap_or_default();
            return Err(format!(
                "waiting for the operator's watch of {} ({}) to list them{why}",
                self.ar.kind, self.ar.api_version
            ));
        }
        let mut key = ObjectRef::new_with(name, self.ar.clone());
        if let Some(namespace) = namespace {
            key = key.within(namespace);
        }
        Ok(self.store.get(&key))
    }

    /// What the cache says of `key` now.
    pub(crate) fn current(&self, key: &ExtKey) -> Seen {
        match self.get(key.namespace.as_deref(), &key.name) {
            Err(_) => Seen::Unsynced,
            Ok(None) => Seen::Absent,
            Ok(Some(obj)) => Seen::At(Version::of(&obj)),
        }
    }
}
