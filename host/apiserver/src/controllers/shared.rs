//! What the controllers share: the definition behind a storage key, owner references, the
//! objects they act on, and their deletes.

use crate::kinds::crd::CRD_CLEANUP;
use crate::resources::{CRD_KEY, ResourceDef, builtins};
use crate::status::{ApiError, Warnings};
use crate::store::{FullKey, Inner, Obj, Store};
use crate::verbs::{self, DeleteOpts};
use serde_json::Value;
use std::sync::Arc;

/// The definition that stores objects under `key`.
pub fn def_for_key(inner: &Inner, key: &str) -> Option<Arc<ResourceDef>> {
    builtins()
        .iter()
        .chain(inner.custom.iter())
        .find(|d| d.key() == key && !d.virtual_create_only)
        .cloned()
}

pub(super) fn owner_uids(o: &Obj) -> Vec<String> {
    o.value["metadata"]["ownerReferences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `o` has an ownerReference to `owner_uid` with blockOwnerDeletion set.
pub(super) fn blocks(o: &Obj, owner_uid: &str) -> bool {
    o.value["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|a| {
            a.iter().any(|r| {
                r["uid"].as_str() == Some(owner_uid)
                    && r["blockOwnerDeletion"].as_bool() == Some(true)
            })
        })
}

/// An object a controller acts on, with the definition that governs it.
pub(super) struct Item {
    pub(super) def: Arc<ResourceDef>,
    pub(super) ns: String,
    pub(super) name: String,
    pub(super) obj: Arc<Obj>,
}

pub(super) fn item(inner: &Inner, fk: &FullKey) -> Option<Item> {
    let obj = inner.get(&fk.0, &fk.1, &fk.2)?.clone();
    Some(Item {
        def: def_for_key(inner, &fk.0)?,
        ns: fk.1.clone(),
        name: fk.2.clone(),
        obj,
    })
}

pub(super) fn background() -> DeleteOpts {
    DeleteOpts {
        propagation: Some("Background".into()),
        ..Default::default()
    }
}

pub(super) fn delete_all(store: &Store, items: &[Item]) -> bool {
    let mut changed = false;
    for it in items.iter().filter(|i| !i.obj.deleting()) {
        if verbs::delete(store, &it.def, &it.ns, &it.name, &background()).is_ok() {
            changed = true;
        }
    }
    changed
}

/// Where a controller's own writes put their warnings: nowhere, since no client made them and
/// none is waiting for them (a real controller manager drops them too).
pub(super) fn unheard() -> Warnings {
    Warnings::default()
}

/// Creates `body` in `ns` as the server's own write (its defaults and validation, no client to
/// warn).
pub(crate) fn create_own(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    body: Value,
) -> Result<Arc<Obj>, ApiError> {
    verbs::create(
        store,
        def,
        ns,
        body,
        verbs::WriteOpts::default(),
        &mut unheard(),
    )
}

pub(super) fn builtin(plural: &str) -> Option<&'static Arc<ResourceDef>> {
    builtins()
        .iter()
        .find(|d| d.group.is_empty() && d.plural == plural)
}

/// The objects being deleted (in storage-key order) that `wanted` picks.
pub(super) fn deleting(store: &Store, wanted: impl Fn(&Item) -> bool) -> Vec<Item> {
    store.read(|inner| {
        inner
            .deleting
            .iter()
            .filter_map(|fk| item(inner, fk))
            .filter(|it| wanted(it))
            .collect()
    })
}

/// Whether a CRD being deleted still waits for its instances to go (the CRD finalizer's work,
/// which comes before the garbage collector's).
pub(super) fn awaits_crd_cleanup(it: &Item) -> bool {
    it.def.key() == CRD_KEY && it.obj.finalizers().iter().any(|f| f == CRD_CLEANUP)
}
