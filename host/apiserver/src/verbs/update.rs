//! Update (PUT), and the update path every write of an existing object takes.

use crate::kinds::strategy;
use crate::kinds::strategy::Ctx;
use crate::resources::ResourceDef;
use crate::schema::UNOWNED_META_FIELDS;
use crate::status::{ApiError, Warnings};
use crate::store::{Change, Inner, Obj, Store};
use crate::util::{ensure_obj, meta_mut, set_in, string_list};
use crate::validation;
use crate::verbs::create::prepare_create;
use crate::verbs::meta::{
    check_identity, check_meta_types, check_schema, same_except, storage_key, validate_meta,
    warn_finalizers,
};
use crate::verbs::{Outcome, Sub, WriteOpts, WriteTarget, validate_name};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Sets `to[key]` to `from[key]`, or removes it where `from` has none.
fn keep_from(to: &mut Map<String, Value>, from: &Value, key: &str) {
    match from.get(key) {
        Some(v) => to.insert(key.into(), v.clone()),
        None => to.remove(key),
    };
}

/// Computes the stored form of an update of `cur` to `new`.
pub(crate) fn prepare_update(
    def: &ResourceDef,
    cur: &Obj,
    mut new: Value,
    sub: Sub,
    strict: bool,
    warnings: &mut Warnings,
) -> Result<Change, ApiError> {
    let name = cur.meta_str("name").to_string();
    if let Some(rv) = new["metadata"]["resourceVersion"].as_str()
        && !rv.is_empty()
        && rv != cur.meta_str("resourceVersion")
    {
        return Err(ApiError::stale(&def.group, &def.plural, &name));
    }
    if !new.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    check_meta_types(&new)?;
    if sub == Sub::Main
        && let Some(uid) = new["metadata"]["uid"].as_str()
        && !uid.is_empty()
        && uid != cur.uid()
    {
        return Err(ApiError::invalid(
            &def.group,
            &def.kind,
            &name,
            validation::invalid_causes(
                "metadata.uid",
                &json!(uid),
                vec!["field is immutable".into()],
            ),
        ));
    }
    let mut result = match sub {
        Sub::Status => {
            let mut r = cur.value.clone();
            keep_from(ensure_obj(&mut r), &new, "status");
            // The entries a server-side apply of the status computed.
            if let Some(Value::Array(a)) = new["metadata"].get("managedFields")
                && !a.is_empty()
                && crate::managed::valid_entries(a)
            {
                r["metadata"]["managedFields"] = Value::Array(a.clone());
            }
            r
        }
        Sub::Finalize => {
            let mut r = cur.value.clone();
            let f = match &new["spec"]["finalizers"] {
                Value::Null => json!([]),
                other => other.clone(),
            };
            set_in(&mut r, &["spec", "finalizers"], f);
            r
        }
        Sub::Main => {
            if def.status_subresource {
                keep_from(ensure_obj(&mut new), &cur.value, "status");
            }
            new
        }
    };
    result["kind"] = cur.value["kind"].clone();
    result["apiVersion"] = cur.value["apiVersion"].clone();
    // Server-owned metadata comes from the stored object (managedFields below; selfLink goes).
    let old_meta = &cur.value["metadata"];
    let meta = meta_mut(&mut result);
    for f in UNOWNED_META_FIELDS
        .iter()
        .filter(|f| **f != "managedFields")
    {
        keep_from(meta, old_meta, f);
    }
    // A write that leaves managedFields out keeps the stored ones; one that sends them
    // sets them. (An empty list keeps them too; entries that cannot be decoded, such as
    // `[{}]`, clear them.)
    match meta.get("managedFields") {
        Some(Value::Array(a)) if !a.is_empty() => {
            if !crate::managed::valid_entries(a) {
                meta.remove("managedFields");
            }
        }
        _ => keep_from(meta, old_meta, "managedFields"),
    }
    meta.remove("selfLink");
    // An empty finalizer list, label map or annotation map is stored as absent (their types
    // were checked by `check_meta_types`).
    for key in ["finalizers", "labels", "annotations"] {
        if meta
            .get(key)
            .is_some_and(|v| *v == json!([]) || *v == json!({}))
        {
            meta.remove(key);
        }
    }
    let kind = strategy(def);
    let ctx = Ctx { name: &name };
    kind.prepare_update(&ctx, cur, &mut result, sub)?;
    if sub == Sub::Main {
        kind.defaults(&mut result);
        crate::kinds::validate(def, &result)?;
        let causes = kind.validate_update(&cur.value, &result);
        ApiError::invalid_if_any(&def.group, &def.kind, &name, causes)?;
        validate_meta(def, &result)?;
    }
    check_schema(def, &mut result, strict, warnings)?;
    if string_list(&result["metadata"]["finalizers"]) != cur.finalizers() {
        warn_finalizers(&result, warnings);
    }
    if sub == Sub::Main {
        kind.complete_update(cur, &mut result)?;
    }
    if def.has_generation {
        let skip: &[&str] = if def.status_subresource {
            &["metadata", "status"]
        } else {
            &["metadata"]
        };
        if !same_except(&result, &cur.value, skip) {
            let g = cur.value["metadata"]["generation"].as_i64().unwrap_or(0);
            result["metadata"]["generation"] = json!(g + 1);
        }
    }
    if cur.deleting() {
        let old: Vec<String> = cur.finalizers();
        let added: Vec<String> = string_list(&result["metadata"]["finalizers"])
            .into_iter()
            .filter(|f| !old.contains(f))
            .collect();
        if !added.is_empty() {
            let list = added
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                &name,
                vec![validation::forbidden(
                    "metadata.finalizers",
                    &format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                    ),
                )],
            ));
        }
    }
    if result == cur.value {
        return Ok(Change::Keep);
    }
    if cur.deleting()
        && string_list(&result["metadata"]["finalizers"]).is_empty()
        && !kind.held_by_spec(&result)
    {
        // The final state (without finalizers) goes into the DELETED event.
        return Ok(Change::RemoveWith(result));
    }
    Ok(Change::Put(result))
}

/// The write shared by PUT and PATCH, done atomically in one store mutation. `compute` turns the
/// stored object (None when missing) into the candidate and says whether it is a create; an
/// update then goes through the update checks and managedFields, and removes the object when
/// its last finalizer goes while it is being deleted. 404 when the object is missing and
/// `compute` does not create it. Returns the outcome and whether the object was created; under
/// dry run nothing is stored and the outcome holds the object as it would have been.
pub(crate) fn run_update(
    store: &Store,
    target: WriteTarget,
    w: WriteOpts,
    compute: impl FnOnce(Option<&Arc<Obj>>, &Inner, &mut Warnings) -> Result<(Value, bool), ApiError>,
    warnings: &mut Warnings,
) -> Result<(Outcome, bool), ApiError> {
    let WriteTarget { def, name, sub, .. } = target;
    let dry_run = w.dry_run;
    let ns_key = target.ns_key();
    let mut created = false;
    let mut final_value: Option<Value> = None;
    let (obj, removed) = store.mutate(def.key(), ns_key, name, |cur, inner| {
        let (candidate, is_create) = compute(cur, inner, warnings)?;
        if is_create {
            created = true;
            if dry_run {
                final_value = Some(candidate);
                return Ok((Change::Keep, false));
            }
            return Ok((Change::Put(candidate), false));
        }
        let Some(cur) = cur else {
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        let change = prepare_update(def, cur, candidate, sub, w.strict, warnings)?;
        let removed = matches!(change, Change::RemoveWith(_));
        if dry_run {
            final_value = Some(match change {
                Change::Put(v) | Change::RemoveWith(v) => v,
                _ => cur.value.clone(),
            });
            return Ok((Change::Keep, removed));
        }
        Ok((change, removed))
    })?;
    let obj = match (dry_run, obj, final_value) {
        (true, _, Some(v)) => Obj::new(v, 0),
        (_, Some(o), _) => o,
        _ => return Err(ApiError::internal("update stored nothing")),
    };
    Ok((
        if removed {
            Outcome::Removed(obj)
        } else {
            Outcome::Stored(obj)
        },
        created,
    ))
}

/// PUT. Returns the outcome and whether the object was created.
pub fn update(
    store: &Store,
    target: WriteTarget,
    mut body: Value,
    w: WriteOpts,
    warnings: &mut Warnings,
) -> Result<(Outcome, bool), ApiError> {
    let WriteTarget { def, ns, name, sub } = target;
    check_identity(def, ns, Some(name), &mut body)?;
    if sub == Sub::Main {
        validate_name(def, name)?;
    }
    run_update(
        store,
        target,
        w.clone(),
        |cur, inner, warnings| {
            if cur.is_none() && def.create_on_update && sub == Sub::Main {
                let v = prepare_create(def, ns, body, inner, w.strict, warnings)?;
                return Ok((v, true));
            }
            // The uid of a replacement is a precondition, checked by storage before anything
            // else (a patch's uid is only validated, in `prepare_update`).
            if let (Some(cur), Some(uid)) = (cur, body["metadata"]["uid"].as_str())
                && !uid.is_empty()
                && uid != cur.uid()
            {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.plural,
                    name,
                    &format!(
                        "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        storage_key(def, ns, name),
                        cur.uid()
                    ),
                ));
            }
            // Custom resources and Leases have no unconditional update: a PUT must say which
            // version it replaces.
            let conditional = !strategy(def).allows_unconditional_update();
            let version = body["metadata"]["resourceVersion"]
                .as_str()
                .filter(|v| !v.is_empty())
                .unwrap_or("0");
            if conditional && cur.is_some() && version.parse::<u64>().ok() == Some(0) {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.plural,
                    name,
                    vec![validation::invalid(
                        "metadata.resourceVersion",
                        "0x0",
                        "must be specified for an update",
                    )],
                ));
            }
            Ok((body, false))
        },
        warnings,
    )
}
