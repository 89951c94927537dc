//! Create (POST), with the real server's order of checks.

use crate::kinds::strategy;
use crate::kinds::strategy::Ctx;
use crate::resources::ResourceDef;
use crate::status::{ApiError, Warnings};
use crate::store::{Change, Inner, Obj, Store};
use crate::util::{meta_mut, meta_str, now, random_suffix};
use crate::verbs::WriteOpts;
use crate::verbs::meta::{
    check_identity, check_namespace, check_schema, generate_name_causes, name_causes,
    validate_meta, warn_finalizers,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// Builds the object to store for a create.
pub(crate) fn prepare_create(
    def: &ResourceDef,
    ns: &str,
    mut body: Value,
    inner: &Inner,
    strict: bool,
    warnings: &mut Warnings,
) -> Result<Value, ApiError> {
    let name = meta_str(&body, "name").to_string();
    check_namespace(inner, def, ns, &name)?;
    let kind = strategy(def);
    kind.check_create(&body, &name)?;
    if def.status_subresource
        && let Some(m) = body.as_object_mut()
    {
        m.remove("status");
    }
    let meta = meta_mut(&mut body);
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now()));
    for f in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
        "resourceVersion",
    ] {
        meta.remove(f);
    }
    if def.has_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    let ctx = Ctx { name: &name };
    kind.prepare_create(&ctx, &mut body)?;
    kind.defaults(&mut body);
    crate::kinds::validate(def, &body)?;
    validate_meta(def, &body)?;
    check_schema(def, &mut body, strict, warnings)?;
    warn_finalizers(&body, warnings);
    Ok(body)
}

/// Creates an object. Returns it as stored.
pub fn create(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    mut body: Value,
    w: WriteOpts,
    warnings: &mut Warnings,
) -> Result<Arc<Obj>, ApiError> {
    check_identity(def, ns, None, &mut body)?;
    let mut name = meta_str(&body, "name").to_string();
    let generate = meta_str(&body, "generateName").to_string();
    if name.is_empty() && !generate.is_empty() {
        // The real generator keeps at most 58 bytes of the prefix (63 with the suffix).
        let mut end = generate.len().min(58);
        while !generate.is_char_boundary(end) {
            end -= 1;
        }
        name = format!("{}{}", &generate[..end], random_suffix());
        body["metadata"]["name"] = json!(name);
    }
    let mut causes = generate_name_causes(def.name_rule, &generate);
    causes.extend(name_causes(def, &name));
    ApiError::invalid_if_any(&def.group, &def.kind, &name, causes)?;
    let ns_key = def.ns_key(ns);
    // Storage refuses a version on a new object, after validation and admission. A value that
    // is not a number slips through, as it does on the real server.
    let versioned = body["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|v| v != 0);
    let (obj, computed) = store.mutate(def.key(), ns_key, &name, |cur, inner| {
        let v = prepare_create(def, ns, body, inner, w.strict, warnings)?;
        if versioned && !w.dry_run {
            return Err(ApiError::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        if let Some(cur) = cur {
            let mut e = ApiError::already_exists(&def.group, &def.plural, &name);
            if cur.deleting() {
                e.message = format!("object is being deleted: {}", e.message);
            }
            return Err(e);
        }
        if w.dry_run {
            Ok((Change::Keep, Some(v)))
        } else {
            Ok((Change::Put(v.clone()), None))
        }
    })?;
    match (computed, obj) {
        (Some(v), _) => Ok(Obj::new(v, 0)),
        (None, Some(o)) => Ok(o),
        (None, None) => Err(ApiError::internal("create stored nothing")),
    }
}
