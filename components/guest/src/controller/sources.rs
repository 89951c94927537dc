//! What a reconciler follows and reads: its sources, each change naming item keys (and, for a
//! watched collection, carrying the object, as an informer's cache would), and [`Pair`], desired
//! rows beside the live objects they stand for.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use crate::feed::Feed;
use crate::follow::{Pass, Source, Watched, WhyFull};
use crate::kube::{
    ChangeType, Collection, Identity, Kube, KubeError, ListOptions, Object, ObjectRef,
};

/// What the changes told of the object at an item's key.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// Nothing: the object is read.
    Unknown,
    /// The object as its latest change carried it: as fresh as the watch. A write on it is
    /// guarded by its resourceVersion or uid ([`super::Context`]), so one made on a stale copy
    /// fails with a conflict rather than undo a newer change.
    Live(Box<Object>),
    /// It left the followed collection (deleted, or no longer matching its label selector):
    /// nothing of it is there, until a later change says otherwise.
    Gone,
}

/// An item a pass on the changes visits: its key, and what the changes told of its object.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    /// The item's key.
    pub key: String,
    /// What the changes told of its object.
    pub seen: Seen,
}

impl Named {
    /// `key`, its object to be read.
    pub fn key(key: impl Into<String>) -> Named {
        Named {
            key: key.into(),
            seen: Seen::Unknown,
        }
    }

    /// The keys of `named`, in order.
    pub fn keys(named: &[Named]) -> Vec<String> {
        named.iter().map(|n| n.key.clone()).collect()
    }
}

/// Where a reconciler hears of changes, each naming the items it touches.
pub trait Follow {
    /// Takes where it stands now, before a full pass reads.
    fn mark(&self, pass: &mut Pass<'_>) -> Result<(), String>;
    /// The items its changes since the last pass name, in the order heard; `Err` says why the
    /// pass must be full.
    fn changed(&self, pass: &mut Pass<'_>) -> Result<Vec<Named>, WhyFull>;
}

/// A [`Source`] whose changes map to item keys.
pub struct Keyed<S, F> {
    source: S,
    keys: F,
}

/// Follows `source`, each change naming the items `keys` says.
pub fn keyed<S, F>(source: S, keys: F) -> Keyed<S, F>
where
    S: Source,
    F: Fn(S::Change) -> Vec<String>,
{
    Keyed { source, keys }
}

impl<S, F> Follow for Keyed<S, F>
where
    S: Source,
    F: Fn(S::Change) -> Vec<String>,
{
    fn mark(&self, pass: &mut Pass<'_>) -> Result<(), String> {
        pass.mark(&self.source)
            .map_err(|e| format!("{}: {e}", self.source.key()))
    }

    fn changed(&self, pass: &mut Pass<'_>) -> Result<Vec<Named>, WhyFull> {
        let changes = pass.changes(&self.source)?;
        Ok(changes
            .into_iter()
            .flat_map(&self.keys)
            .map(Named::key)
            .collect())
    }
}

/// A collection followed as lethe's own identity, each change naming its object's
/// [`object_key`] and carrying it.
struct Watching<'a> {
    watched: Watched<'a>,
}

impl Follow for Watching<'_> {
    fn mark(&self, pass: &mut Pass<'_>) -> Result<(), String> {
        pass.mark(&self.watched)
            .map_err(|e| format!("{}: {e}", self.watched.key()))
    }

    fn changed(&self, pass: &mut Pass<'_>) -> Result<Vec<Named>, WhyFull> {
        let changes = pass.changes(&self.watched)?;
        Ok(changes
            .into_iter()
            .map(|change| Named {
                key: object_key(&change.object),
                seen: match change.change_type {
                    ChangeType::Deleted => Seen::Gone,
                    _ => Seen::Live(Box::new(change.object)),
                },
            })
            .collect())
    }
}

/// The key of `object` among a reconciler's items, as [`watching`] and [`Pair`] name it:
/// `namespace/name`, or `name` for a cluster-scoped object.
pub fn object_key(object: &Object) -> String {
    match &object.target.namespace {
        Some(namespace) => format!("{namespace}/{}", object.target.name),
        None => object.target.name.clone(),
    }
}

/// Follows `collection` as lethe's own identity, each change naming its object's [`object_key`]
/// and carrying the object ([`Seen`]), so that a pass on the changes need not read it again.
pub fn watching<'a>(kube: &'a dyn Kube, collection: Collection) -> Box<dyn Follow + 'a> {
    Box::new(Watching {
        watched: Watched::new(kube, collection),
    })
}

/// Follows a desired-state feed, whose changes are item keys.
pub fn feed<'a>(feed: Feed<'a>) -> Box<dyn Follow + 'a> {
    Box::new(keyed(feed, |key| vec![key]))
}

/// An item of a reconciler whose desired state is rows and whose objects live in the cluster:
/// the row and the object at one key, either possibly missing.
#[derive(Debug, Clone)]
pub struct Pair<D> {
    /// Its key ([`object_key`]).
    pub key: String,
    /// Its row.
    pub desired: Option<D>,
    /// Its object; `Err` when it could not be read, so that the item fails alone and backs off.
    pub live: Result<Option<Object>, KubeError>,
}

impl<D> Pair<D> {
    /// Every row beside every object of `collection` (listed as lethe, 500 a page), by key, each
    /// handed to `visit` (a [`Reconciler::read_all`]) until it says `Break`.
    pub fn all(
        kube: &dyn Kube,
        collection: &Collection,
        rows: Vec<D>,
        key_of: impl Fn(&D) -> String,
        visit: &mut dyn FnMut(Pair<D>) -> ControlFlow<()>,
    ) -> Result<(), KubeError> {
        let page = ListOptions {
            limit: Some(500),
            ..ListOptions::default()
        };
        let live = kube.list_all(&Identity::Privileged, collection, &page)?;
        let mut pairs: BTreeMap<String, Pair<D>> = rows
            .into_iter()
            .map(|d| {
                let key = key_of(&d);
                (
                    key.clone(),
                    Pair {
                        key,
                        desired: Some(d),
                        live: Ok(None),
                    },
                )
            })
            .collect();
        for object in live {
            let key = object_key(&object);
            pairs
                .entry(key.clone())
                .or_insert(Pair {
                    key,
                    desired: None,
                    live: Ok(None),
                })
                .live = Ok(Some(object));
        }
        let _ = pairs.into_values().try_for_each(visit);
        Ok(())
    }

    /// The pairs at `named`: each key's row among `rows`, and its object of `collection` as the
    /// changes carried it, or else read as lethe.
    pub fn at(
        kube: &dyn Kube,
        collection: &Collection,
        named: &[Named],
        mut rows: Vec<D>,
        key_of: impl Fn(&D) -> String,
    ) -> Vec<Pair<D>> {
        named
            .iter()
            .map(|Named { key, seen }| {
                let live = match seen {
                    Seen::Live(object) => Ok(Some(object.as_ref().clone())),
                    Seen::Gone => Ok(None),
                    Seen::Unknown => read_at(kube, collection, key),
                };
                let desired = rows
                    .iter()
                    .position(|d| key_of(d) == *key)
                    .map(|at| rows.swap_remove(at));
                Pair {
                    key: key.clone(),
                    desired,
                    live,
                }
            })
            .collect()
    }
}

/// The object of `collection` at `key` ([`object_key`]), read as lethe; `None` when there is none.
fn read_at(
    kube: &dyn Kube,
    collection: &Collection,
    key: &str,
) -> Result<Option<Object>, KubeError> {
    let (namespace, name) = match key.split_once('/') {
        Some((namespace, name)) => (Some(namespace.to_string()), name),
        None => (None, key),
    };
    let target = ObjectRef {
        api_version: collection.api_version.clone(),
        kind: collection.kind.clone(),
        namespace,
        name: name.to_string(),
    };
    match kube.get(&Identity::Privileged, &target) {
        Err(KubeError::NotFound(_)) => Ok(None),
        read => read.map(Some),
    }
}
