//! Patch: JSON, merge, strategic merge and server-side apply.

use crate::managed::{KindSchema, Writer};
use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause, Warnings};
use crate::store::{Inner, Store};
use crate::util::{meta_str, now};
use crate::verbs::create::prepare_create;
use crate::verbs::meta::check_identity;
use crate::verbs::options::scope;
use crate::verbs::update::run_update;
use crate::verbs::{Outcome, PatchType, Sub, WriteOpts, WriteTarget, validate_name};
use crate::{patch, validation};
use serde_json::Value;

/// PATCH. Returns the outcome and whether the object was created (server-side apply).
pub fn patch(
    store: &Store,
    target: WriteTarget,
    pt: PatchType,
    body: &Value,
    w: WriteOpts,
    admit: &dyn Fn(&Inner, &Value) -> Result<(), ApiError>,
    warnings: &mut Warnings,
) -> Result<(Outcome, bool), ApiError> {
    let WriteTarget { def, ns, name, sub } = target;
    if pt != PatchType::Json && !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    if pt == PatchType::Json && !body.is_array() {
        return Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            validation::json_type(body)
        )));
    }
    // The options were checked with the request (an apply has its field manager).
    let manager = w.field_manager.clone().unwrap_or_default();
    let api_version = def.api_version();
    let applier = Writer {
        manager: &manager,
        api_version: &api_version,
        subresource: sub.name(),
    };
    // Views of another shape (events.k8s.io) have no schema here.
    let decodable = |value: &Value| {
        if w.shape != crate::resources::Shape::Stored {
            return Ok(());
        }
        match crate::openapi::decode_error(&def.group, &def.version, &def.kind, value) {
            Some(error) => Err(undecodable_patch(def, ns, name, pt, body, value, &error)),
            None => Ok(()),
        }
    };
    run_update(
        store,
        target,
        w.clone(),
        |cur, inner, warnings| {
            let Some(cur) = cur else {
                if pt == PatchType::Apply && sub == Sub::Main {
                    let mut b = body.clone();
                    decodable(&b)?;
                    check_identity(def, ns, Some(name), &mut b)?;
                    validate_name(def, name)?;
                    let mut created = prepare_create(def, ns, b, inner, w.strict, warnings)?;
                    admit(inner, &created)?;
                    let applied = crate::managed::Apply {
                        body,
                        writer: &applier,
                        scope: scope(def, sub),
                        schema: &KindSchema::of(def),
                        now: &now(),
                    };
                    crate::managed::apply(None, &mut created, &applied);
                    return Ok((created, true));
                }
                return Err(ApiError::not_found(&def.group, &def.plural, name));
            };
            let shown = w.shape.view(&cur.value);
            let mut v = shown.clone();
            match pt {
                PatchType::Merge => patch::merge_patch(&mut v, body),
                PatchType::Strategic => patch::strategic_merge(&mut v, body, def.key()),
                PatchType::Apply => {
                    let mut b = body.clone();
                    // A version in the configuration is a precondition of the update, checked
                    // once the configuration is merged.
                    let wanted = b["metadata"]
                        .as_object_mut()
                        .and_then(|m| m.remove("resourceVersion"))
                        .and_then(|v| v.as_str().map(str::to_string))
                        .filter(|v| !v.is_empty());
                    decodable(&b)?;
                    let schema = KindSchema::of(def);
                    crate::managed::merge(&mut v, &b, &schema);
                    if sub != Sub::Finalize {
                        let applied = crate::managed::Apply {
                            body: &b,
                            writer: &applier,
                            scope: scope(def, sub),
                            schema: &schema,
                            now: &now(),
                        };
                        crate::managed::apply(Some(&shown), &mut v, &applied);
                    }
                    if wanted.is_some_and(|rv| rv != cur.meta_str("resourceVersion")) {
                        return Err(ApiError::stale(&def.group, &def.plural, name));
                    }
                }
                PatchType::Json => patch::json_patch(&mut v, body).map_err(failed_json_patch)?,
            }
            // The patched object is decoded into the kind's Go type next, and a field the patch
            // gave the wrong type fails there.
            decodable(&v)?;
            let v = w.shape.stored(v);
            if v["metadata"]["name"].as_str() != Some(name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    meta_str(&v, "name")
                )));
            }
            admit(inner, &v)?;
            Ok((v, false))
        },
        warnings,
    )
}

/// The answer to a patch whose result cannot be decoded (`error`, from
/// [`crate::openapi::decode_error`]), as the real server's patch handler gives it: 422 on the
/// `patch` field naming the patched object (JSON and merge patches, whose result is re-encoded
/// with sorted keys as here) or the patch as Go prints a map (strategic merge); a server-side
/// apply's configuration fails as the typed patch object it could not make.
fn undecodable_patch(
    def: &ResourceDef,
    ns: &str,
    name: &str,
    pt: PatchType,
    body: &Value,
    patched: &Value,
    error: &str,
) -> ApiError {
    let shown = match pt {
        PatchType::Apply => {
            return ApiError::bad_request(format!(
                "failed to create typed patch object ({ns}/{name}; {}, Kind={}): {error}",
                def.api_version(),
                def.kind
            ));
        }
        PatchType::Strategic => validation::go_print(body),
        PatchType::Merge | PatchType::Json => patched.to_string(),
    };
    ApiError::invalid(
        "",
        "",
        "",
        vec![Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {}: {error}", validation::go_quote(&shown)),
            field: "patch".into(),
        }],
    )
}

/// A JSON patch that does not apply: the patch handler hands the library's error on as an
/// unexpected server response (422, with the error as the only cause).
fn failed_json_patch(error: String) -> ApiError {
    let message = "the server rejected our request due to an error in our request";
    ApiError::new(422, "Invalid", message).with_details(crate::status::Details {
        causes: vec![Cause {
            reason: "UnexpectedServerResponse",
            message: error,
            field: String::new(),
        }],
        ..Default::default()
    })
}
