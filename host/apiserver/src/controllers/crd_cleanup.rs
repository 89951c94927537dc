//! The CRD finalizer: a deleted CustomResourceDefinition's instances go first. (It sets no
//! `Terminating` condition: nothing lethe does reads it.)

use crate::controllers::controller::Controller;
use crate::controllers::shared::{Item, awaits_crd_cleanup, delete_all, deleting};
use crate::kinds::crd::CRD_CLEANUP;
use crate::resources::defs_from_crd;
use crate::store::Store;
use crate::verbs;

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
                changed |= delete_all(store, &crs);
            }
        }
        changed
    }
}
