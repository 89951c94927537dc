//! The `scale` subresource of custom resources whose CRD declares `subresources.scale`: an
//! `autoscaling/v1` Scale showing the replica counts found at the CRD's paths, through which
//! `kubectl scale` and autoscalers set the desired count (as the real server's
//! `customresource` registry does).

use serde_json::{Value, json};

use crate::patch;
use crate::resources::{ResourceDef, ScalePaths};
use crate::status::{ApiError, Warnings};
use crate::store::Store;
use crate::validation;
use crate::verbs::{self, PatchType, WriteOpts, WriteTarget};

fn at<'a>(v: &'a Value, path: &[String]) -> &'a Value {
    path.iter().fold(v, |v, segment| &v[segment.as_str()])
}

/// Sets `path` in `v` to `value`, making the maps on the way (never the whole object: a scale
/// path is never empty).
fn set(v: &mut Value, path: &[String], value: Value) {
    if !path.is_empty() {
        crate::util::set_in(
            v,
            &path.iter().map(String::as_str).collect::<Vec<_>>(),
            value,
        );
    }
}

/// The Scale of a custom resource.
pub fn view(paths: &ScalePaths, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let mut metadata = serde_json::Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(f).filter(|v| !v.is_null()) {
            metadata.insert(f.into(), v.clone());
        }
    }
    let count = |path: &[String]| at(obj, path).as_i64().unwrap_or(0);
    let mut spec = json!({});
    // `replicas` is `omitempty` in autoscaling/v1.
    let desired = count(&paths.spec_replicas);
    if desired != 0 {
        spec["replicas"] = json!(desired);
    }
    let mut status = json!({"replicas": count(&paths.status_replicas)});
    if let Some(selector) = paths
        .label_selector
        .as_ref()
        .and_then(|p| at(obj, p).as_str())
        .filter(|s| !s.is_empty())
    {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    })
}

fn paths(def: &ResourceDef) -> Result<&ScalePaths, ApiError> {
    def.scale.as_ref().ok_or_else(ApiError::path_not_found)
}

fn current(store: &Store, t: WriteTarget) -> Result<Value, ApiError> {
    store
        .get(t.def.key(), t.ns, t.name, true)
        .map(|o| o.value.clone())
        .ok_or_else(|| ApiError::not_found(&t.def.group, &t.def.plural, t.name))
}

/// `GET .../scale` of the object `t` (its main resource: a Scale is a view of it).
pub fn get(store: &Store, t: WriteTarget) -> Result<Value, ApiError> {
    Ok(view(paths(t.def)?, &current(store, t)?))
}

/// `PUT .../scale`: the Scale's `spec.replicas` becomes the resource's, under the Scale's
/// resourceVersion when it names one. `t` is the main resource, which the write goes to.
pub fn update(
    store: &Store,
    t: WriteTarget,
    scale: &Value,
    opts: WriteOpts,
    warnings: &mut Warnings,
) -> Result<Value, ApiError> {
    let paths = paths(t.def)?;
    let undecodable = |found: &Value, field: &str, go_type: &str| {
        ApiError::bad_request(format!(
            "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {} into Go struct field {field} of type {go_type}",
            crate::validation::json_type(found)
        ))
    };
    if !scale.is_object() {
        return Err(undecodable(scale, "Scale", "v1.Scale"));
    }
    if !matches!(scale["spec"], Value::Null | Value::Object(_)) {
        return Err(undecodable(&scale["spec"], "Scale.spec", "v1.ScaleSpec"));
    }
    let replicas = match &scale["spec"]["replicas"] {
        Value::Null => 0,
        v => v
            .as_i64()
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| undecodable(v, "ScaleSpec.spec.replicas", "int32"))?,
    };
    if replicas < 0 {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            t.name,
            vec![crate::validation::invalid(
                "spec.replicas",
                replicas,
                "must be greater than or equal to 0",
            )],
        ));
    }
    let mut obj = current(store, t)?;
    if let Some(rv) = scale["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty())
    {
        obj["metadata"]["resourceVersion"] = json!(rv);
    }
    set(&mut obj, &paths.spec_replicas, json!(replicas));
    let (out, _) = verbs::update(store, t, obj, opts, warnings)?;
    Ok(view(paths, &out.obj().value))
}

/// `PATCH .../scale`: the patch applies to the Scale, whose new `spec.replicas` is then set as
/// by [`update`]. A patch that does not pin a resourceVersion is retried on a conflicting write.
pub fn patch(
    store: &Store,
    t: WriteTarget,
    pt: PatchType,
    body: &Value,
    opts: WriteOpts,
    warnings: &mut Warnings,
) -> Result<Value, ApiError> {
    if pt == PatchType::Apply {
        return Err(ApiError::unsupported_media_type());
    }
    let paths = paths(t.def)?;
    for _ in 0..5 {
        let before = view(paths, &current(store, t)?);
        let mut after = before.clone();
        match pt {
            PatchType::Json => patch::json_patch(&mut after, body).map_err(|e| {
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    t.name,
                    vec![validation::invalid(
                        "patch",
                        json!(body.to_string()),
                        &e.to_string(),
                    )],
                )
            })?,
            _ => patch::merge_patch(&mut after, body),
        }
        let pinned = after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"];
        match update(store, t, &after, opts.clone(), warnings) {
            Err(e) if e.code == 409 && !pinned => continue,
            other => return other,
        }
    }
    Err(ApiError::stale(&t.def.group, &t.def.plural, t.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ScalePaths {
        ScalePaths::from_subresource(&json!({
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        }))
        .unwrap()
    }

    #[test]
    fn paths_are_read_from_the_crd() {
        let p = paths();
        assert_eq!(p.spec_replicas, ["spec", "replicas"]);
        assert_eq!(
            p.label_selector.as_deref(),
            Some(&["status".to_string(), "selector".to_string()][..])
        );
        assert!(ScalePaths::from_subresource(&json!({"specReplicasPath": "spec.replicas", "statusReplicasPath": ".status.replicas"})).is_none());
        assert!(
            ScalePaths::from_subresource(&json!({"statusReplicasPath": ".status.replicas"}))
                .is_none()
        );
    }

    #[test]
    fn the_scale_shows_the_counts_and_selector() {
        let obj = json!({
            "metadata": {"name": "w", "namespace": "n", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"}},
            "spec": {"replicas": 3},
            "status": {"replicas": 2, "selector": "app=w"},
        });
        let s = view(&paths(), &obj);
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=w"}));
        assert_eq!(
            s["metadata"],
            json!({"name": "w", "namespace": "n", "uid": "u", "resourceVersion": "7"})
        );
        let empty = view(&paths(), &json!({"metadata": {"name": "w"}}));
        assert_eq!(empty["spec"], json!({}));
        assert_eq!(empty["status"], json!({"replicas": 0}));
    }

    #[test]
    fn setting_a_count_makes_the_maps_on_its_path() {
        let mut v = json!({"metadata": {}});
        set(&mut v, &paths().spec_replicas, json!(4));
        assert_eq!(v["spec"]["replicas"], 4);
    }

    #[test]
    fn a_body_that_is_not_a_scale_is_refused_before_any_write() {
        let store = crate::store::Store::open(None).unwrap();
        let def = crate::resources::ResourceDef {
            scale: Some(paths()),
            ..(*crate::resources::builtins()[0]).clone()
        };
        for body in [json!([1, 2]), json!("x"), json!(null), json!({"spec": []})] {
            let e = update(
                &store,
                WriteTarget::main(&def, "", "absent"),
                &body,
                WriteOpts::default(),
                &mut Warnings::default(),
            )
            .unwrap_err();
            assert_eq!(e.code, 400, "{body}: {}", e.message);
        }
    }
}
