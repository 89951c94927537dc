//! The namespace controller: a terminating namespace's contents are deleted, and it is finalized
//! once empty. It sets none of the real controller's conditions (`NamespaceContentRemaining`,
//! `NamespaceFinalizersRemaining`): nothing lethe does reads them.

use crate::controllers::controller::Controller;
use crate::controllers::shared::{Item, def_for_key, delete_all, deleting};
use crate::resources::NS_KEY;
use crate::store::Store;
use crate::verbs;

/// Deletes a terminating namespace's contents, then finalizes it.
pub struct NamespaceDeletion;

impl Controller for NamespaceDeletion {
    fn name(&self) -> &'static str {
        "namespace"
    }

    fn step(&self, store: &Store) -> bool {
        let mut changed = false;
        for it in deleting(store, |it| it.def.key() == NS_KEY) {
            let ns = it.name.clone();
            let contents: Vec<Item> = store.read(|inner| {
                let mut out = vec![];
                for key in inner.objects.keys() {
                    let Some(def) = def_for_key(inner, key) else {
                        continue;
                    };
                    if !def.namespaced {
                        continue;
                    }
                    for o in inner.in_namespace(key, &ns) {
                        out.push(Item {
                            def: def.clone(),
                            ns: ns.clone(),
                            name: o.meta_str("name").to_string(),
                            obj: o.clone(),
                        });
                    }
                }
                out
            });
            if contents.is_empty() {
                changed |= verbs::finalize_namespace(store, &it.def, &ns);
            } else {
                changed |= delete_all(store, &contents);
            }
        }
        changed
    }
}
