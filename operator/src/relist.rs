//! Wake-ups from a (re)list only once the cache holds it.
//!
//! A reflector's store takes a list in at its end: the objects of a list
//! (`InitApply`) go to a buffer, and the buffer replaces the cache at
//! `InitDone`. The controller reconciles each object it is woken for from
//! the cache, and drops a wake-up for an object the cache does not hold
//! ("not found in local store"). At the operator's start this is harmless:
//! the controller holds its reconciles until the first list is in. After a
//! watch expired (an API server restart, a long disconnect), the relist's
//! wake-ups came before the swap, and an object created while the watch was
//! down was woken while only the buffer had it: dropped, it waited for the
//! next resync (an hour), seen under load in `api_server_restart`.
//!
//! [`after_the_swap`] holds a list's wake-ups until its `InitDone` has gone
//! through the reflector, and then wakes each of the listed objects from
//! the cache. Only their references are held meanwhile, not a second copy
//! of the objects.

use futures::{Stream, StreamExt, stream};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

/// Turns a reflected watch stream into one whose list events come after
/// the list is in `store` (see the [module docs](self)). `store` must be
/// the reader of the reflector the stream comes from, and `resource` its
/// kind.
pub(crate) fn after_the_swap<S>(
    events: S,
    store: Store<DynamicObject>,
    resource: ApiResource,
) -> impl Stream<Item = S::Item>
where
    S: Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
{
    let mut listed: Vec<ObjectRef<DynamicObject>> = Vec::new();
    events.flat_map(move |event| {
        let held = match &event {
            Ok(watcher::Event::Init) => {
                listed.clear();
                None
            }
            Ok(watcher::Event::InitApply(obj)) => {
                listed.push(ObjectRef::from_obj_with(obj, resource.clone()));
                return stream::iter(Vec::new()).left_stream();
            }
            Ok(watcher::Event::InitDone) => Some(std::mem::take(&mut listed)),
            _ => None,
        };
        let store = store.clone();
        let woken = held.into_iter().flatten().filter_map(move |r| {
            // An object deleted since its list is gone from the cache, and
            // has nothing to reconcile.
            store
                .get(&r)
                .map(|obj| Ok(watcher::Event::InitApply(obj.as_ref().clone())))
        });
        stream::iter(std::iter::once(event).chain(woken)).right_stream()
    })
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use kube::api::{ApiResource, DynamicObject};
    use kube::core::GroupVersionKind;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use kube::runtime::{WatchStreamExt, reflector};

    use super::after_the_swap;

    fn object(name: &str) -> DynamicObject {
        let ar = resource();
        DynamicObject::new(name, &ar).within("ns")
    }

    fn resource() -> ApiResource {
        ApiResource::from_gvk(&GroupVersionKind::gvk("myorg.org", "v1", "Table"))
    }

    /// Each object woken by a relist is in the cache when its wake-up
    /// comes out, including one that only the relist has.
    #[tokio::test]
    async fn a_relist_wakes_its_objects_once_the_cache_holds_them() {
        let writer = Writer::new(resource());
        let store = writer.as_reader();
        let events = futures::stream::iter(
            [
                Event::Init,
                Event::InitApply(object("old")),
                Event::InitDone,
                Event::Init,
                Event::InitApply(object("old")),
                Event::InitApply(object("new")),
                Event::InitDone,
                Event::Apply(object("later")),
            ]
            .map(Ok),
        );
        let reflected = reflector(writer, events);
        let woken: Vec<String> = after_the_swap(reflected, store.clone(), resource())
            .applied_objects()
            .map(|obj| {
                let obj = obj.unwrap();
                let name = obj.metadata.name.clone().unwrap();
                let cached = store.get(&reflector::ObjectRef::from_obj_with(&obj, resource()));
                assert!(cached.is_some(), "{name} woken before the cache held it");
                name
            })
            .collect()
            .await;
        assert_eq!(woken, ["old", "old", "new", "later"]);
    }
}
