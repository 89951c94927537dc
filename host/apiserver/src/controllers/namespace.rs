//! The namespace controller: a terminating namespace's contents are deleted, its conditions
//! say what holds it, and it is finalized once empty.

use crate::controllers::controller::Controller;
use crate::controllers::shared::{Item, def_for_key, delete_all, deleting, set_conditions};
use crate::resources::{NS_KEY, ResourceDef};
use crate::store::Store;
use crate::verbs;
use serde_json::Value;

/// Sets the terminating namespace's conditions as the namespace controller does, so that
/// `kubectl describe namespace` tells what is holding it.
pub(super) fn namespace_conditions(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    contents: &[Item],
) -> bool {
    use std::collections::BTreeMap;
    let mut per_resource: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_finalizer: BTreeMap<String, usize> = BTreeMap::new();
    for it in contents {
        let r = if it.def.group.is_empty() {
            format!("{}.", it.def.plural)
        } else {
            format!("{}.{}", it.def.plural, it.def.group)
        };
        *per_resource.entry(r).or_default() += 1;
        for f in it.obj.finalizers() {
            *per_finalizer.entry(f).or_default() += 1;
        }
    }
    let cond = |t: &str,
                remaining: bool,
                reason_true: &str,
                msg_true: String,
                reason_false: &str,
                msg_false: &str| {
        if remaining {
            serde_json::json!({"type": t, "status": "True", "reason": reason_true, "message": msg_true})
        } else {
            serde_json::json!({"type": t, "status": "False", "reason": reason_false, "message": msg_false})
        }
    };
    let resources = per_resource
        .iter()
        .map(|(r, n)| format!("{r} has {n} resource instances"))
        .collect::<Vec<_>>()
        .join(", ");
    let finalizers = per_finalizer
        .iter()
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect::<Vec<_>>()
        .join(", ");
    let ok = |t: &str, reason: &str, msg: &str| serde_json::json!({"type": t, "status": "False", "reason": reason, "message": msg});
    let wanted = [
        ok(
            "NamespaceDeletionDiscoveryFailure",
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        ok(
            "NamespaceDeletionGroupVersionParsingFailure",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        ok(
            "NamespaceDeletionContentFailure",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        cond(
            "NamespaceContentRemaining",
            !per_resource.is_empty(),
            "SomeResourcesRemain",
            format!("Some resources are remaining: {resources}"),
            "ContentRemoved",
            "All content successfully removed",
        ),
        cond(
            "NamespaceFinalizersRemaining",
            !per_finalizer.is_empty(),
            "SomeFinalizersRemain",
            format!("Some content in the namespace has finalizers remaining: {finalizers}"),
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished",
        ),
    ];
    set_conditions(store, def, ns, |current| {
        let strip = |c: &Value| {
            let mut c = c.clone();
            if let Some(m) = c.as_object_mut() {
                m.remove("lastTransitionTime");
            }
            c
        };
        if current.iter().map(strip).eq(wanted.iter().cloned()) {
            return None;
        }
        let now = crate::util::now();
        let conditions: Vec<Value> = wanted
            .iter()
            .map(|w| {
                let mut c = w.clone();
                c["lastTransitionTime"] = Value::String(now.clone());
                c
            })
            .collect();
        Some(conditions)
    })
}

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
            changed |= namespace_conditions(store, &it.def, &ns, &contents);
            if contents.is_empty() {
                changed |= verbs::finalize_namespace(store, &it.def, &ns);
            } else {
                changed |= delete_all(store, &contents);
            }
        }
        changed
    }
}
