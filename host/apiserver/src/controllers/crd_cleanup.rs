//! The CRD finalizer: a deleted CustomResourceDefinition's instances go first.

use crate::controllers::controller::Controller;
use crate::controllers::shared::{Item, awaits_crd_cleanup, delete_all, deleting, set_conditions};
use crate::kinds::crd::CRD_CLEANUP;
use crate::resources::{ResourceDef, defs_from_crd};
use crate::store::Store;
use crate::verbs;

/// Marks a CRD whose instances are being deleted as the CRD finalizer does: condition
/// `Terminating` (reason `InstanceDeletionInProgress`). `true` when it changed.
pub(super) fn crd_terminating(store: &Store, def: &ResourceDef, name: &str) -> bool {
    set_conditions(store, def, name, |current| {
        if current
            .iter()
            .any(|c| c["type"] == "Terminating" && c["status"] == "True")
        {
            return None;
        }
        let mut conditions = current.to_vec();
        conditions.retain(|c| c["type"] != "Terminating");
        conditions.push(serde_json::json!({
            "type": "Terminating",
            "status": "True",
            "lastTransitionTime": crate::util::now(),
            "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress",
        }));
        Some(conditions)
    })
}

/// Deletes a deleted CRD's instances, then removes its cleanup finalizer.
pub struct CrdCleanup;

impl Controller for CrdCleanup {
    fn name(&self) -> &'static str {
        "crd-cleanup"
    }

    fn step(&self, store: &Store) -> bool {
        let mut changed = false;
        for it in deleting(store, awaits_crd_cleanup) {
            let Some(cr_def) = defs_from_crd(&it.obj.value).into_iter().next() else {
                changed |= verbs::remove_finalizer(store, &it.def, "", &it.name, CRD_CLEANUP);
                continue;
            };
            let crs: Vec<Item> = store.read(|inner| {
                inner
                    .entries(cr_def.key())
                    .map(|((ns, name), o)| Item {
                        def: cr_def.clone(),
                        ns: ns.clone(),
                        name: name.clone(),
                        obj: o.clone(),
                    })
                    .collect()
            });
            if crs.is_empty() {
                changed |= verbs::remove_finalizer(store, &it.def, "", &it.name, CRD_CLEANUP);
            } else {
                changed |= crd_terminating(store, &it.def, &it.name);
                changed |= delete_all(store, &crs);
            }
        }
        changed
    }
}
