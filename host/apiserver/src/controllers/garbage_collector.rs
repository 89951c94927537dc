//! The garbage collector for ownerReferences: `orphan` and `foregroundDeletion` finalizers,
//! and dependents whose owners are all gone (Background propagation).

use crate::controllers::controller::Controller;
use crate::controllers::shared::{
    Item, awaits_crd_cleanup, blocks, delete_all, deleting, item, owner_uids,
};
use crate::resources::NS_KEY;
use crate::store::{Change, Store};
use crate::verbs::{self, DeleteOpts};
use serde_json::Value;

/// Removes the ownerReference to `owner_uid` from a dependent.
pub(super) fn strip_owner(store: &Store, d: &Item, owner_uid: &str) -> bool {
    let ns_key = if d.def.namespaced { d.ns.as_str() } else { "" };
    let res = store.mutate(d.def.key(), ns_key, &d.name, |cur, _| {
        let Some(cur) = cur else {
            return Ok((Change::Keep, false));
        };
        let mut v = cur.value.clone();
        let refs: Vec<Value> = v["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["uid"].as_str() != Some(owner_uid))
            .collect();
        if let Some(m) = v["metadata"].as_object_mut() {
            crate::util::set_list(m, "ownerReferences", refs);
        }
        if v == cur.value {
            return Ok((Change::Keep, false));
        }
        Ok((Change::Put(v), true))
    });
    matches!(res, Ok((_, true)))
}

/// Acts on the `orphan` and `foregroundDeletion` finalizers and deletes dependents whose owners
/// are all gone.
pub struct GarbageCollector;

impl Controller for GarbageCollector {
    fn name(&self) -> &'static str {
        "garbage-collector"
    }

    fn step(&self, store: &Store) -> bool {
        let mut changed = false;
        // Namespaces have a controller of their own, and a CRD's instances go before its owner
        // finalizers are looked at.
        let owners = deleting(store, |it| {
            it.def.key() != NS_KEY && !awaits_crd_cleanup(it)
        });
        let owned: Vec<Item> = store.read(|inner| {
            inner
                .owned
                .iter()
                .filter_map(|fk| item(inner, fk))
                .collect()
        });
        for it in &owners {
            let fins = it.obj.finalizers();
            let uid = it.obj.uid().to_string();
            let dependents: Vec<&Item> = owned
                .iter()
                .filter(|d| owner_uids(&d.obj).contains(&uid))
                .collect();
            if fins.iter().any(|f| f == "orphan") {
                for d in &dependents {
                    changed |= strip_owner(store, d, &uid);
                }
                changed |= verbs::remove_finalizer(store, &it.def, &it.ns, &it.name, "orphan");
            } else if fins.iter().any(|f| f == "foregroundDeletion") {
                for d in dependents.iter().filter(|d| !d.obj.deleting()) {
                    let opts = DeleteOpts {
                        propagation: Some("Foreground".into()),
                        ..Default::default()
                    };
                    if verbs::delete(store, &d.def, &d.ns, &d.name, &opts).is_ok() {
                        changed = true;
                    }
                }
                // Only dependents with blockOwnerDeletion hold the owner back.
                if !dependents.iter().any(|d| blocks(&d.obj, &uid)) {
                    changed |= verbs::remove_finalizer(
                        store,
                        &it.def,
                        &it.ns,
                        &it.name,
                        "foregroundDeletion",
                    );
                }
            }
        }
        // Dependents whose owners are all gone, read afresh: the steps above may have orphaned
        // some.
        drop(owned);
        let orphans: Vec<Item> = store.read(|inner| {
            inner
                .owned
                .iter()
                .filter_map(|fk| item(inner, fk))
                .filter(|d| {
                    let owners = owner_uids(&d.obj);
                    !owners.is_empty() && owners.iter().all(|u| !inner.uids.contains_key(u))
                })
                .collect()
        });
        changed |= delete_all(store, &orphans);
        changed
    }
}
