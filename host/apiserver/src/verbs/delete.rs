//! Delete: preconditions, finalizers, propagation, and the finalizers' removal.

use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::store::{Change, Obj, Store};
use crate::util::{meta_mut, now, set_in, set_list, string_list};
use crate::verbs::{DeleteOpts, Deleted};
use serde_json::{Value, json};

/// Deletes object `name` as a DELETE does: checks the preconditions of `opts`, then removes
/// the object at once, or sets its deletionTimestamp (and the `orphan` or `foregroundDeletion`
/// finalizer the propagation asks for) when finalizers must run first. Deleting an object
/// already being deleted changes nothing. 404 when there is no such object.
pub fn delete(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    opts: &DeleteOpts,
) -> Result<Deleted, ApiError> {
    let kind = crate::kinds::strategy(def);
    kind.check_delete(name)?;
    let ns_key = def.ns_key(ns);
    let mut dry: Option<Value> = None;
    let (obj, pending) = store.mutate(def.key(), ns_key, name, |cur, _inner| {
        let Some(cur) = cur else {
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        kind.check_delete_stored(cur, opts)?;
        if let Some(uid) = &opts.uid
            && uid != cur.uid()
        {
            // The real server checks preconditions early, in `rest.BeforeDelete`, and names the
            // Kind (not the resource) in the Conflict.
            return Err(ApiError::conflict(
                &def.group,
                &def.kind,
                name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                    cur.uid()
                ),
            ));
        }
        if let Some(rv) = &opts.resource_version
            && rv != cur.meta_str("resourceVersion")
        {
            return Err(ApiError::conflict(
                &def.group,
                &def.kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                    cur.meta_str("resourceVersion")
                ),
            ));
        }
        if cur.deleting() {
            return Ok((Change::Keep, true));
        }
        let mut fins = cur.finalizers();
        let policy = opts.propagation.as_deref().or(match opts.orphan_dependents {
            Some(true) => Some("Orphan"),
            Some(false) => Some("Background"),
            None => None,
        });
        match policy {
            Some("Orphan") if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
            Some("Foreground") if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            _ => {}
        }
        if fins.is_empty() && !kind.finalized_by_a_controller() {
            if opts.dry_run {
                dry = Some(cur.value.clone());
                return Ok((Change::Keep, false));
            }
            return Ok((Change::Remove, false));
        }
        let mut v = cur.value.clone();
        meta_mut(&mut v).insert("deletionTimestamp".into(), json!(now()));
        kind.mark_deleting(&mut v);
        let meta = meta_mut(&mut v);
        set_list(meta, "finalizers", fins);
        if def.has_generation {
            let g = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
            meta.insert("generation".into(), json!(g + 1));
        }
        if opts.dry_run {
            dry = Some(v);
            return Ok((Change::Keep, true));
        }
        Ok((Change::Put(v), true))
    })?;
    let obj = match dry {
        Some(v) => Obj::new(v, 0),
        None => obj.ok_or_else(|| ApiError::internal("delete found nothing"))?,
    };
    Ok(if pending {
        Deleted::Pending(obj)
    } else {
        Deleted::Gone(obj)
    })
}

/// Removes one finalizer (used by the controllers). Returns true when something changed.
pub fn remove_finalizer(store: &Store, def: &ResourceDef, ns: &str, name: &str, fin: &str) -> bool {
    let ns_key = def.ns_key(ns);
    let res = store.mutate(def.key(), ns_key, name, |cur, _| {
        let Some(cur) = cur else {
            return Ok((Change::Keep, false));
        };
        let fins = cur.finalizers();
        if !fins.iter().any(|f| f == fin) {
            return Ok((Change::Keep, false));
        }
        let mut v = cur.value.clone();
        let left: Vec<String> = fins.into_iter().filter(|f| f != fin).collect();
        let none_left = left.is_empty();
        set_list(meta_mut(&mut v), "finalizers", left);
        if none_left && cur.deleting() && !crate::kinds::strategy(def).held_by_spec(&v) {
            return Ok((Change::RemoveWith(v), true));
        }
        Ok((Change::Put(v), true))
    });
    matches!(res, Ok((_, true)))
}

/// Removes the namespace's spec finalizer (the namespace controller's `finalize`).
pub fn finalize_namespace(store: &Store, def: &ResourceDef, name: &str) -> bool {
    let res = store.mutate(def.key(), "", name, |cur, _| {
        let Some(cur) = cur else {
            return Ok((Change::Keep, false));
        };
        let spec_fins = string_list(&cur.value["spec"]["finalizers"]);
        if !spec_fins.iter().any(|f| f == "kubernetes") {
            if cur.deleting() && spec_fins.is_empty() && cur.finalizers().is_empty() {
                return Ok((Change::Remove, true));
            }
            return Ok((Change::Keep, false));
        }
        let mut v = cur.value.clone();
        let left: Vec<String> = spec_fins
            .into_iter()
            .filter(|f| f != "kubernetes")
            .collect();
        set_in(&mut v, &["spec", "finalizers"], json!(left));
        if left.is_empty() && cur.finalizers().is_empty() {
            return Ok((Change::RemoveWith(v), true));
        }
        Ok((Change::Put(v), true))
    });
    matches!(res, Ok((_, true)))
}
