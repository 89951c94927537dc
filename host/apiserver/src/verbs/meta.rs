//! The generic checks every write makes: names, the object's identity against the request's,
//! its namespace, its metadata, its schema, and the warnings about its finalizers.

use crate::kinds::crd::CRD_CLEANUP;
use crate::resources::{CRD_KEY, NS_KEY, NameRule, ResourceDef};
use crate::status::{ApiError, Cause, Warnings};
use crate::store::Inner;
use crate::util::{meta_mut, meta_str, string_list};
use crate::validation;
use serde_json::{Value, json};

/// Name validation errors (empty when valid).
pub fn name_errors(rule: NameRule, name: &str) -> Vec<String> {
    match rule {
        NameRule::Subdomain => validation::dns1123_subdomain(name),
        NameRule::Label => validation::dns1123_label(name),
        NameRule::Dns1035Label => validation::dns1035_label(name),
        NameRule::PathSegment => {
            let mut errs = vec![];
            if name == "." || name == ".." {
                errs.push(format!("may not be '{name}'"));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    errs.push(format!("may not contain '{bad}'"));
                }
            }
            errs
        }
    }
}

/// `maskTrailingDash`: a prefix may end in '-' (the generated suffix follows it). The real
/// one replaces the last two characters with an 'a', which is reproduced.
fn mask_trailing_dash(prefix: &str) -> String {
    match prefix.strip_suffix('-') {
        Some(rest) if prefix.len() > 1 => {
            let mut cut = rest.to_string();
            cut.pop();
            cut.push('a');
            cut
        }
        _ => prefix.to_string(),
    }
}

/// The errors of a `metadata.generateName` checked as a name prefix (reported before the
/// name's own errors, as the real metadata validation does).
pub fn generate_name_causes(rule: NameRule, prefix: &str) -> Vec<Cause> {
    if prefix.is_empty() {
        return vec![];
    }
    let errs = match rule {
        NameRule::PathSegment => ["/", "%"]
            .iter()
            .filter(|bad| prefix.contains(*bad))
            .map(|bad| format!("may not contain '{bad}'"))
            .collect(),
        rule => name_errors(rule, &mask_trailing_dash(prefix)),
    };
    validation::invalid_causes("metadata.generateName", &json!(prefix), errs)
}

/// The errors of `metadata.name` (empty when valid).
pub(crate) fn name_causes(def: &ResourceDef, name: &str) -> Vec<Cause> {
    if name.is_empty() {
        return vec![validation::required(
            "metadata.name",
            "name or generateName is required",
        )];
    }
    validation::invalid_causes(
        "metadata.name",
        &json!(name),
        name_errors(def.name_rule, name),
    )
}

/// Checks `name` against the resource's name rule; a 422 naming `metadata.name` when it breaks
/// it.
pub fn validate_name(def: &ResourceDef, name: &str) -> Result<(), ApiError> {
    ApiError::invalid_if_any(&def.group, &def.kind, name, name_causes(def, name))
}

/// The object's namespace/name coordinates, checked against the request's.
pub(crate) fn check_identity(
    def: &ResourceDef,
    ns: &str,
    url_name: Option<&str>,
    body: &mut Value,
) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    // The serializer reads the type first, into an anonymous struct of two strings; failing
    // that, the handler names the type it wanted and quotes the body's first 30 bytes.
    for field in ["apiVersion", "kind"] {
        if !matches!(body[field], Value::Null | Value::String(_)) {
            let text = body.to_string();
            let mut end = text.len().min(30);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let summary = if end < text.len() {
                format!("{} ...", &text[..end])
            } else {
                text
            };
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go struct field .{field} of type string ({summary})",
                def.kind,
                validation::json_type(&body[field])
            )));
        }
    }
    // Decoding comes first on a real server: a field of the wrong type is 400 before anything
    // looks at kind, names or validity.
    if let Some(error) = crate::openapi::decode_error(&def.group, &def.version, &def.kind, body) {
        return Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {error}",
            kind = def.kind,
            version = def.version,
        )));
    }
    check_meta_types(body)?;
    if let Some(k) = body["kind"].as_str()
        && !k.is_empty()
        && k != def.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            def.kind
        )));
    }
    if let Some(av) = body["apiVersion"].as_str()
        && !av.is_empty()
        && av != def.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    body["kind"] = json!(def.kind);
    body["apiVersion"] = json!(def.api_version());
    let meta = meta_mut(body);
    if def.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    if let Some(u) = url_name {
        let body_name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
        if body_name.is_empty() {
            meta.insert("name".into(), json!(u));
        } else if body_name != u {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({u})"
            )));
        }
    }
    Ok(())
}

/// Checks that a namespace exists and accepts new content.
pub(crate) fn check_namespace(
    inner: &Inner,
    def: &ResourceDef,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    if def.custom
        && inner
            .get(CRD_KEY, "", &format!("{}.{}", def.plural, def.group))
            .is_some_and(|c| c.deleting())
    {
        let message = "create not allowed while custom resource definition is terminating";
        return Err(ApiError::new(405, "MethodNotAllowed", message));
    }
    if !def.namespaced {
        return Ok(());
    }
    match inner.get(NS_KEY, "", ns) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if n.deleting() => {
            let mut e = ApiError::forbidden(
                &def.group,
                &def.plural,
                name,
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            );
            // Controllers look for this cause to tell a terminating namespace from a denial.
            if let Some(d) = e.details.as_mut() {
                d.causes.push(Cause {
                    reason: "NamespaceTerminating",
                    message: format!("namespace {ns} is being terminated"),
                    field: "metadata.namespace".into(),
                });
            }
            Err(e)
        }
        Some(_) => Ok(()),
    }
}

/// The object's metadata as `ValidateObjectMeta` checks it (the name is checked elsewhere).
/// Built-in kinds, but not CRDs, also want standard or domain-qualified finalizers; custom
/// resources only get warnings for those.
pub(crate) fn validate_meta(def: &ResourceDef, v: &Value) -> Result<(), ApiError> {
    let kube_finalizers = !def.custom && !def.is_crd();
    let causes = validation::object_meta_causes(&v["metadata"], kube_finalizers);
    let name = meta_str(v, "name");
    ApiError::invalid_if_any(&def.group, &def.kind, name, causes)
}

/// Rejects metadata that a typed client could not decode (as the real server's decoder does).
pub(crate) fn check_meta_types(v: &Value) -> Result<(), ApiError> {
    let meta = &v["metadata"];
    let bad = |field: &str, go_type: &str, found: &Value| {
        Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go struct field {field} of type {go_type}",
            validation::json_type(found)
        )))
    };
    match meta {
        Value::Null | Value::Object(_) => {}
        other => return bad("metadata", "v1.ObjectMeta", other),
    }
    for f in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
    ] {
        match &meta[f] {
            Value::Null | Value::String(_) => {}
            other => return bad(&format!("ObjectMeta.metadata.{f}"), "string", other),
        }
    }
    for f in ["labels", "annotations"] {
        match &meta[f] {
            Value::Null => {}
            Value::Object(m) if m.values().all(Value::is_string) => {}
            other => {
                return bad(
                    &format!("ObjectMeta.metadata.{f}"),
                    "map[string]string",
                    other,
                );
            }
        }
    }
    match &meta["finalizers"] {
        Value::Null => {}
        Value::Array(a) if a.iter().all(Value::is_string) => {}
        other => return bad("ObjectMeta.metadata.finalizers", "[]string", other),
    }
    match &meta["ownerReferences"] {
        Value::Null => {}
        Value::Array(a)
            if a.iter().all(|r| {
                ["apiVersion", "kind", "name", "uid"]
                    .iter()
                    .all(|k| r[*k].is_string())
            }) => {}
        other => {
            return bad(
                "ObjectMeta.metadata.ownerReferences",
                "[]v1.OwnerReference",
                other,
            );
        }
    }
    Ok(())
}

/// Prunes, defaults and validates a custom resource against its CRD schema; drops the fields a
/// built-in kind does not have, as the real server's decoding does.
pub(crate) fn check_schema(
    def: &ResourceDef,
    v: &mut Value,
    strict: bool,
    warnings: &mut Warnings,
) -> Result<(), ApiError> {
    let (causes, pruned) = match &def.schema {
        Some(schema) => crate::schema::apply(schema, v),
        None => (
            Vec::new(),
            crate::openapi::prune_unknown(&def.group, &def.version, &def.kind, v),
        ),
    };
    if !strict {
        for p in &pruned {
            warnings.push(format!("unknown field {}", json!(p)));
        }
    }
    if strict && !pruned.is_empty() {
        let unknown: Vec<String> = pruned
            .iter()
            .map(|p| format!("unknown field {}", json!(p)))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
            unknown.join(", "),
            kind = def.kind,
            version = def.version,
        )));
    }
    let name = meta_str(v, "name");
    ApiError::invalid_if_any(&def.group, &def.kind, name, causes)
}

/// Warns of each finalizer name that is neither domain-qualified nor one of the standard ones.
pub(crate) fn warn_finalizers(v: &Value, warnings: &mut Warnings) {
    for f in string_list(&v["metadata"]["finalizers"]) {
        let standard = matches!(
            f.as_str(),
            "kubernetes" | "orphan" | "foregroundDeletion" | CRD_CLEANUP
        );
        if !f.contains('/') && !standard {
            warnings.push(format!(
                "metadata.finalizers: {}: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers",
                json!(f)
            ));
        }
    }
}

/// Whether two objects are equal once their top-level fields named in `skip` are ignored (e.g.
/// `metadata` and `status`, to tell a spec change that bumps the generation). Values that are
/// not objects are compared whole.
pub(crate) fn same_except(a: &Value, b: &Value, skip: &[&str]) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(x), Some(y)) => {
            x.iter()
                .filter(|(k, _)| !skip.contains(&k.as_str()))
                .all(|(k, v)| y.get(k) == Some(v))
                && y.iter()
                    .filter(|(k, _)| !skip.contains(&k.as_str()))
                    .all(|(k, _)| x.contains_key(k))
        }
        _ => a == b,
    }
}

/// Where the real server keeps an object in etcd, as its storage errors name it: built-in kinds
/// under their resource (Services under `services/specs`), CRDs and custom resources under their
/// group too.
pub(crate) fn storage_key(def: &ResourceDef, ns: &str, name: &str) -> String {
    let prefix = if def.custom || def.is_crd() {
        format!("{}/{}", def.group, def.plural)
    } else if def.key() == crate::kinds::service::SERVICES_KEY {
        "services/specs".to_string()
    } else {
        def.plural.clone()
    };
    if def.namespaced {
        format!("/registry/{prefix}/{ns}/{name}")
    } else {
        format!("/registry/{prefix}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_like_kubernetes() {
        assert!(name_errors(NameRule::Subdomain, "a.b-c").is_empty());
        assert!(!name_errors(NameRule::Subdomain, "Bad_Name").is_empty());
        assert!(!name_errors(NameRule::Label, "a.b").is_empty());
        assert!(name_errors(NameRule::PathSegment, "system:foo").is_empty());
        assert!(!name_errors(NameRule::PathSegment, "a/b").is_empty());
    }

    #[test]
    fn generate_names_are_checked_as_prefixes() {
        assert!(generate_name_causes(NameRule::Subdomain, "web-").is_empty());
        assert!(generate_name_causes(NameRule::Label, "a-").is_empty());
        assert_eq!(mask_trailing_dash("ab-"), "aa");
        assert_eq!(mask_trailing_dash("-"), "-");
        let c = generate_name_causes(NameRule::Subdomain, "Bad_");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "metadata.generateName");
        assert!(
            c[0].message
                .starts_with("Invalid value: \"Bad_\": a lowercase RFC 1123 subdomain")
        );
        assert_eq!(generate_name_causes(NameRule::PathSegment, "a%").len(), 1);
        assert!(generate_name_causes(NameRule::PathSegment, "..").is_empty());
    }
}
