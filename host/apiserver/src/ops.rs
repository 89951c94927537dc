//! Object operations (create, update, patch, delete) with the real API server's semantics,
//! independent of HTTP so the controllers can use them too.

use crate::managed::{KindSchema, Scope, Writer};
use crate::patch;
use crate::resources::{CRD_KEY, NS_KEY, NameRule, ResourceDef, crd_preferred_version};
use crate::status::{ApiError, Cause, Warnings};
use crate::store::{Change, Inner, Obj, Store};
use crate::util::{meta_mut, string_list, strip_nulls};
use crate::util::{now, random_suffix, set_in};
use crate::validation;
use serde_json::{Value, json};
use std::sync::Arc;

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
fn name_causes(def: &ResourceDef, name: &str) -> Vec<Cause> {
    if name.is_empty() {
        return vec![Cause {
            reason: "FieldValueRequired",
            message: "Required value: name or generateName is required".into(),
            field: "metadata.name".into(),
        }];
    }
    validation::invalid_causes(
        "metadata.name",
        &json!(name),
        name_errors(def.name_rule, name),
    )
}

pub fn validate_name(def: &ResourceDef, name: &str) -> Result<(), ApiError> {
    let causes = name_causes(def, name);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(&def.group, &def.kind, name, causes))
}

/// The object's namespace/name coordinates, checked against the request's.
fn check_identity(
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
fn check_namespace(inner: &Inner, def: &ResourceDef, ns: &str, name: &str) -> Result<(), ApiError> {
    if def.custom
        && inner
            .get(CRD_KEY, "", &format!("{}.{}", def.plural, def.group))
            .is_some_and(|c| c.deleting())
    {
        return Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "create not allowed while custom resource definition is terminating".into(),
            details: None,
            retry_after: None,
            continue_token: None,
        });
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

fn validate_crd(crd: &Value, name: &str) -> Result<(), ApiError> {
    let group = "apiextensions.k8s.io";
    let kind = "CustomResourceDefinition";
    let spec = &crd["spec"];
    let mut causes = vec![];
    let req = |field: &str| Cause {
        reason: "FieldValueRequired",
        message: "Required value".into(),
        field: field.into(),
    };
    let g = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    let k = spec["names"]["kind"].as_str().unwrap_or_default();
    let invalid = |field: &str, value: &str, why: String| Cause {
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {}: {why}", json!(value)),
        field: field.into(),
    };
    if g.is_empty() {
        causes.push(req("spec.group"));
    } else if let errs = validation::dns1123_subdomain(g)
        && !errs.is_empty()
    {
        causes.push(invalid("spec.group", g, errs.join(",")));
    } else if !g.contains('.') {
        causes.push(invalid(
            "spec.group",
            g,
            "should be a domain with at least one dot".into(),
        ));
    }
    if plural.is_empty() {
        causes.push(req("spec.names.plural"));
    }
    if k.is_empty() {
        causes.push(req("spec.names.kind"));
    }
    if !g.is_empty() && !plural.is_empty() && name != format!("{plural}.{g}") {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: {}: must be spec.names.plural+\".\"+spec.group",
                json!(name)
            ),
            field: "metadata.name".into(),
        });
    }
    match spec["scope"].as_str() {
        Some("Namespaced") | Some("Cluster") => {}
        other => causes.push(Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {}: supported values: \"Cluster\", \"Namespaced\"",
                json!(other.unwrap_or_default())
            ),
            field: "spec.scope".into(),
        }),
    }
    match spec["versions"].as_array() {
        Some(v) if !v.is_empty() => {
            let storage = v
                .iter()
                .filter(|x| x["storage"].as_bool() == Some(true))
                .count();
            if storage != 1 {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: {}: must have exactly one version marked as storage version",
                        json!(spec["versions"])
                    ),
                    field: "spec.versions".into(),
                });
            }
            let mut names = std::collections::BTreeSet::new();
            for (i, ver) in v.iter().enumerate() {
                let version = ver["name"].as_str().unwrap_or_default();
                let errs = validation::dns1035_label(version);
                if !errs.is_empty() {
                    causes.push(invalid(
                        &format!("spec.versions[{i}].name"),
                        version,
                        errs.join(","),
                    ));
                }
                if !names.insert(version) {
                    causes.push(Cause {
                        reason: "FieldValueInvalid",
                        message: format!(
                            "Invalid value: {}: must contain unique version names",
                            json!(spec["versions"])
                        ),
                        field: "spec.versions".into(),
                    });
                }
                let schema = &ver["schema"]["openAPIV3Schema"];
                if !schema.is_object() {
                    causes.push(Cause {
                        reason: "FieldValueRequired",
                        message: "Required value: schemas are required".into(),
                        field: format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    });
                } else if schema["type"].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause {
                        reason: "FieldValueRequired",
                        message: "Required value: must not be empty at the root".into(),
                        field: format!("spec.versions[{i}].schema.openAPIV3Schema.type"),
                    });
                }
                for (at, rule, why) in crate::validation_rules::schema_compile_errors(schema) {
                    causes.push(invalid(
                        &format!("spec.versions[{i}].schema.openAPIV3Schema{at}"),
                        &rule,
                        format!("compilation failed: {why}"),
                    ));
                }
            }
        }
        _ => causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value: must have exactly one version marked as storage version"
                .into(),
            field: "spec.versions".into(),
        }),
    }
    causes.extend(crd_names_causes(&spec["names"]));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(group, kind, name, causes))
    }
}

/// `ValidateCustomResourceDefinitionNames`: the names are DNS-1035 labels (kinds in mixed case),
/// and a kind is not its own list kind.
fn crd_names_causes(names: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    let text = |k: &str| names[k].as_str().unwrap_or_default();
    let mut check = |field: String, value: &str, lower: bool, prefix: &str| {
        if value.is_empty() {
            return;
        }
        let checked = if lower {
            value.to_lowercase()
        } else {
            value.to_string()
        };
        let errs = validation::dns1035_label(&checked);
        if !errs.is_empty() {
            causes.extend(validation::invalid_causes(
                &field,
                &json!(value),
                vec![format!("{prefix}{}", errs.join(","))],
            ));
        }
    };
    check("spec.names.plural".into(), text("plural"), false, "");
    check("spec.names.singular".into(), text("singular"), false, "");
    let mixed = "may have mixed case, but should otherwise match: ";
    check("spec.names.kind".into(), text("kind"), true, mixed);
    check("spec.names.listKind".into(), text("listKind"), true, mixed);
    for (i, short) in string_list(&names["shortNames"]).iter().enumerate() {
        check(format!("spec.names.shortNames[{i}]"), short, false, "");
    }
    let same_kinds = !text("kind").is_empty() && text("kind") == text("listKind");
    let categories = string_list(&names["categories"]);
    for (i, category) in categories.iter().enumerate() {
        check(format!("spec.names.categories[{i}]"), category, false, "");
    }
    if same_kinds {
        // Reported before the categories, as the server does.
        let at = causes
            .iter()
            .position(|c| c.field.starts_with("spec.names.categories"))
            .unwrap_or(causes.len());
        causes.splice(
            at..at,
            validation::invalid_causes(
                "spec.names.listKind",
                &json!(text("listKind")),
                vec!["kind and listKind may not be the same".into()],
            ),
        );
    }
    causes
}

/// Defaults and status the CRD controllers would fill in.
fn crd_defaults(v: &mut Value, old_status: Option<&Value>) {
    let kind = v["spec"]["names"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if v["spec"]["names"]["singular"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        v["spec"]["names"]["singular"] = json!(kind.to_lowercase());
    }
    if v["spec"]["names"]["listKind"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        v["spec"]["names"]["listKind"] = json!(format!("{kind}List"));
    }
    if !v["spec"]["conversion"].is_object() {
        v["spec"]["conversion"] = json!({"strategy": "None"});
    }
    let t = now();
    let mut stored: Vec<String> = old_status
        .map(|s| string_list(&s["storedVersions"]))
        .unwrap_or_default();
    if let Some(sv) = crd_preferred_version(v)
        && !stored.contains(&sv)
    {
        stored.push(sv);
    }
    let conditions = old_status
        .and_then(|s| s["conditions"].as_array().cloned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| {
            vec![
                json!({"type": "NamesAccepted", "status": "True", "lastTransitionTime": t, "reason": "NoConflicts", "message": "no conflicts found"}),
                json!({"type": "Established", "status": "True", "lastTransitionTime": t, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}),
            ]
        });
    v["status"] = json!({
        "acceptedNames": v["spec"]["names"].clone(),
        "conditions": conditions,
        "storedVersions": stored,
    });
}

/// Folds `stringData` into `data`, defaults `type`, and rejects `data` that is not base64 (as
/// the real server's decoder does).
fn secret_defaults(v: &mut Value) -> Result<(), ApiError> {
    use base64::Engine;
    if let Some(data) = v.get("data").filter(|d| !d.is_null()) {
        let Some(m) = data.as_object() else {
            return Err(ApiError::bad_request(
                "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal data into Go struct field Secret.data of type map[string][]uint8",
            ));
        };
        for (k, val) in m {
            let ok = val
                .as_str()
                .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
            if !ok {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data in data.{k}"
                )));
            }
        }
    }
    if let Some(sd) = v.get("stringData").and_then(Value::as_object).cloned() {
        if !v["data"].is_object() {
            v["data"] = json!({});
        }
        for (k, val) in sd {
            let s = val.as_str().unwrap_or_default();
            v["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
        }
        if let Some(m) = v.as_object_mut() {
            m.remove("stringData");
        }
    }
    if v["type"].as_str().is_none_or(str::is_empty) {
        v["type"] = json!("Opaque");
    }
    Ok(())
}

/// Label keys and values, as the real server validates them.
/// `validateFinalizerName` for each of a namespace's spec finalizers, reported at `field(i)`.
fn namespace_finalizer_causes(
    finalizers: &[String],
    field: impl Fn(usize) -> String,
) -> Vec<Cause> {
    let mut causes = vec![];
    for (i, f) in finalizers.iter().enumerate() {
        let mut msgs = validation::qualified_name(f);
        if !f.contains('/') && !matches!(f.as_str(), "kubernetes" | "orphan" | "foregroundDeletion")
        {
            msgs.push("name is neither a standard finalizer name nor is it fully qualified".into());
        }
        causes.extend(validation::invalid_causes(&field(i), &json!(f), msgs));
    }
    causes
}

/// What the namespace strategy enforces on every update: the name label is the name, a status
/// phase matches whether deletion has begun, and finalize sets only valid finalizer names.
fn namespace_update(cur: &Obj, result: &mut Value, sub: Sub) -> Result<(), ApiError> {
    let name = cur.meta_str("name").to_string();
    let meta = meta_mut(result);
    if !meta.get("labels").is_some_and(Value::is_object) {
        meta.insert("labels".into(), json!({}));
    }
    if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        l.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    let causes = match sub {
        Sub::Status => {
            let phase = result["status"]["phase"].as_str().unwrap_or("Active");
            let (wanted, why) = if cur.deleting() {
                (
                    "Terminating",
                    "may only be 'Terminating' if `deletionTimestamp` is not empty",
                )
            } else {
                (
                    "Active",
                    "may only be 'Active' if `deletionTimestamp` is empty",
                )
            };
            if phase == wanted {
                vec![]
            } else {
                validation::invalid_causes("status.Phase", &json!(phase), vec![why.into()])
            }
        }
        Sub::Finalize => {
            namespace_finalizer_causes(&string_list(&result["spec"]["finalizers"]), |i| {
                format!("spec.finalizers[{i}]")
            })
        }
        Sub::Main => vec![],
    };
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("", "Namespace", &name, causes))
    }
}

/// The object's metadata as `ValidateObjectMeta` checks it (the name is checked elsewhere).
/// Built-in kinds, but not CRDs, also want standard or domain-qualified finalizers; custom
/// resources only get warnings for those.
fn validate_meta(def: &ResourceDef, v: &Value) -> Result<(), ApiError> {
    let kube_finalizers = !def.custom && !def.is_crd();
    let causes = validation::object_meta_causes(&v["metadata"], kube_finalizers);
    if causes.is_empty() {
        return Ok(());
    }
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid(&def.group, &def.kind, name, causes))
}

/// Rejects metadata that a typed client could not decode (as the real server's decoder does).
fn check_meta_types(v: &Value) -> Result<(), ApiError> {
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

/// Builds the object to store for a create.
fn prepare_create(
    def: &ResourceDef,
    ns: &str,
    mut body: Value,
    inner: &Inner,
    strict: bool,
    warnings: &mut Warnings,
) -> Result<Value, ApiError> {
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    check_namespace(inner, def, ns, &name)?;
    if def.is_crd() {
        validate_crd(&body, &name)?;
    }
    let sent_qos = body["status"]["qosClass"].as_str().map(str::to_string);
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
    if def.is_namespace() {
        if !meta.get("labels").is_some_and(Value::is_object) {
            meta.insert("labels".into(), json!({}));
        }
        if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
        // The client's own spec finalizers stay, with `kubernetes` added after them.
        let mut finalizers = string_list(&body["spec"]["finalizers"]);
        let causes = namespace_finalizer_causes(&finalizers, |_| "spec.finalizers".into());
        if !causes.is_empty() {
            return Err(ApiError::invalid("", "Namespace", &name, causes));
        }
        if !finalizers.iter().any(|f| f == "kubernetes") {
            finalizers.push("kubernetes".into());
        }
        body["spec"] = json!({"finalizers": finalizers});
        body["status"] = json!({"phase": "Active"});
    }
    if def.is_crd() {
        let mut fins = string_list(&body["metadata"]["finalizers"]);
        if !fins.iter().any(|f| f == CRD_CLEANUP) {
            fins.push(CRD_CLEANUP.into());
        }
        body["metadata"]["finalizers"] = json!(fins);
        crd_defaults(&mut body, None);
    }
    if def.group.is_empty() && def.plural == "secrets" {
        secret_defaults(&mut body)?;
    }
    if def.key() == crate::service::SERVICES_KEY {
        crate::service::prepare(&mut body, None, inner)?;
    }
    crate::defaults::apply(def, &mut body);
    if def.key() == crate::pod::PODS_KEY {
        // The ServiceAccount admission plugin refuses a Pod whose account does not exist.
        let account_name = crate::pod::service_account(&body);
        let Some(account) = inner.get("/serviceaccounts", ns, &account_name) else {
            return Err(ApiError::forbidden(
                "",
                "pods",
                &name,
                &format!(
                    "error looking up service account {ns}/{account_name}: serviceaccount \"{account_name}\" not found"
                ),
            ));
        };
        crate::pod::admit(&mut body, Some(&account.value));
        crate::pod::create_status(&mut body, sent_qos.as_deref());
    }
    crate::defaults::validate(def, &body)?;
    validate_meta(def, &body)?;
    check_schema(def, &mut body, None, strict, warnings)?;
    warn_finalizers(&body, warnings);
    Ok(body)
}

/// Prunes, defaults and validates a custom resource against its CRD schema; drops the fields a
/// built-in kind does not have, as the real server's decoding does.
/// Prunes, defaults and validates `v` against its kind's schema; for custom resources that
/// includes the CRD's CEL rules, `old` being the object an update replaces.
fn check_schema(
    def: &ResourceDef,
    v: &mut Value,
    old: Option<&Value>,
    strict: bool,
    warnings: &mut Warnings,
) -> Result<(), ApiError> {
    let (causes, pruned) = match &def.schema {
        Some(schema) => {
            let (mut causes, pruned) = crate::schema::apply(schema, v);
            // The rules are not evaluated on an object of the wrong shape, and the server says
            // so only when there are rules.
            let blocked = causes
                .iter()
                .any(|c| matches!(c.reason, "FieldValueNotSupported" | "FieldValueTypeInvalid"));
            if blocked && crate::validation_rules::has_rules(schema) {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
                    field: "<nil>".into(),
                });
            } else if !blocked {
                causes.extend(crate::validation_rules::causes(schema, v, old, ""));
            }
            (causes, pruned)
        }
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
    if causes.is_empty() {
        return Ok(());
    }
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Err(ApiError::invalid(&def.group, &def.kind, &name, causes))
}

pub const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Warns of each finalizer name that is neither domain-qualified nor one of the standard ones.
fn warn_finalizers(v: &Value, warnings: &mut Warnings) {
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

/// How a write is carried out.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    /// `dryRun=All`: validate and compute, store nothing.
    pub dry_run: bool,
    /// `fieldValidation=Strict`: unknown fields of custom resources are an error, not pruned.
    pub strict: bool,
    /// `fieldManager` (required for server-side apply).
    pub field_manager: Option<String>,
    /// `force`: a server-side apply takes conflicting fields from their managers.
    pub force: bool,
    /// The manager that other writes record in managedFields (`fieldManager`, else from the
    /// User-Agent); None for the server's own writes, which are not tracked.
    pub manager: Option<String>,
    /// The shape a patch is written against (`events.k8s.io/v1` for an Event patched through
    /// that API): the stored object is shown in it, patched, and stored back.
    pub shape: crate::resources::Shape,
}

impl WriteOpts {
    fn writer<'a>(&'a self, api_version: &'a str, sub: Sub) -> Option<Writer<'a>> {
        Some(Writer {
            manager: self.manager.as_deref()?,
            api_version,
            subresource: sub.name(),
        })
    }
}

/// Records a create in managedFields, at the object's creation time.
fn record_create(v: &mut Value, writer: &Writer, def: &ResourceDef, sub: Sub) {
    let time = match v["metadata"]["creationTimestamp"].as_str() {
        Some(t) => t.to_string(),
        None => now(),
    };
    crate::managed::record_create(v, writer, scope(def, sub), &KindSchema::of(def), &time);
}

/// What a write of `sub` may own.
fn scope(def: &ResourceDef, sub: Sub) -> Scope {
    match sub {
        Sub::Status => Scope::StatusOnly,
        _ if def.status_subresource => Scope::NoStatus,
        _ => Scope::All,
    }
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
    let mut name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let generate = body["metadata"]["generateName"]
        .as_str()
        .unwrap_or_default()
        .to_string();
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
    if !causes.is_empty() {
        return Err(ApiError::invalid(&def.group, &def.kind, &name, causes));
    }
    let ns_key = if def.namespaced { ns } else { "" };
    // Storage refuses a version on a new object, after validation and admission. A value that
    // is not a number slips through, as it does on the real server.
    let versioned = body["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|v| v != 0);
    let (obj, computed) = store.mutate(def.key(), ns_key, &name, |cur, inner| {
        let mut v = prepare_create(def, ns, body, inner, w.strict, warnings)?;
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
        let api_version = def.api_version();
        if let Some(writer) = w.writer(&api_version, Sub::Main) {
            record_create(&mut v, &writer, def, Sub::Main);
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

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    Main,
    Status,
    Finalize,
}

impl Sub {
    /// The name recorded in managedFields.
    fn name(self) -> Option<&'static str> {
        match self {
            Sub::Main => None,
            Sub::Status => Some("status"),
            Sub::Finalize => Some("finalize"),
        }
    }
}

fn same_except(a: &Value, b: &Value, skip: &[&str]) -> bool {
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

/// What an update turns into.
pub enum Outcome {
    Stored(Arc<Obj>),
    /// The last finalizer went away: the object is gone (final state).
    Removed(Arc<Obj>),
}

impl Outcome {
    pub fn obj(&self) -> &Arc<Obj> {
        match self {
            Outcome::Stored(o) | Outcome::Removed(o) => o,
        }
    }
}

/// Computes the stored form of an update of `cur` to `new`.
fn prepare_update(
    def: &ResourceDef,
    cur: &Obj,
    mut new: Value,
    sub: Sub,
    strict: bool,
    inner: &Inner,
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
            match new.get("status") {
                Some(s) => r["status"] = s.clone(),
                None => {
                    if let Some(m) = r.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
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
            if def.status_subresource
                && let Some(m) = new.as_object_mut()
            {
                match cur.value.get("status") {
                    Some(s) => {
                        m.insert("status".into(), s.clone());
                    }
                    None => {
                        m.remove("status");
                    }
                }
            }
            if def.is_namespace() {
                new["spec"] = cur.value["spec"].clone();
            }
            if def.group.is_empty() && def.plural == "secrets" {
                secret_defaults(&mut new)?;
            }
            new
        }
    };
    result["kind"] = cur.value["kind"].clone();
    result["apiVersion"] = cur.value["apiVersion"].clone();
    if def.is_namespace() {
        namespace_update(cur, &mut result, sub)?;
    }
    // Server-owned metadata comes from the stored object.
    {
        let old_meta = cur.value["metadata"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let meta = meta_mut(&mut result);
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "name",
            "generation",
            "resourceVersion",
        ] {
            match old_meta.get(f) {
                Some(v) => {
                    meta.insert(f.into(), v.clone());
                }
                None => {
                    meta.remove(f);
                }
            }
        }
        // A write that leaves managedFields out keeps the stored ones; one that sends them
        // sets them (an empty list clears them).
        // (An empty list keeps them too; entries that cannot be decoded, such as `[{}]`,
        // clear them.)
        match meta.get("managedFields") {
            Some(Value::Array(a)) if !a.is_empty() => {
                if !crate::managed::valid_entries(a) {
                    meta.remove("managedFields");
                }
            }
            _ => match old_meta.get("managedFields") {
                Some(m) => {
                    meta.insert("managedFields".into(), m.clone());
                }
                None => {
                    meta.remove("managedFields");
                }
            },
        }
        meta.remove("selfLink");
        if let Some(Value::Array(a)) = meta.get("finalizers")
            && a.is_empty()
        {
            meta.remove("finalizers");
        }
        if let Some(Value::Object(l)) = meta.get("labels")
            && l.is_empty()
        {
            meta.remove("labels");
        }
        if let Some(Value::Object(l)) = meta.get("annotations")
            && l.is_empty()
        {
            meta.remove("annotations");
        }
    }
    if sub == Sub::Main {
        if def.key() == crate::service::SERVICES_KEY {
            crate::service::prepare(&mut result, Some(&cur.value), inner)?;
        }
        crate::defaults::apply(def, &mut result);
        crate::defaults::validate(def, &result)?;
        let causes = immutable_causes(def, &cur.value, &result);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&def.group, &def.kind, &name, causes));
        }
        validate_meta(def, &result)?;
    }
    check_schema(def, &mut result, Some(&cur.value), strict, warnings)?;
    if string_list(&result["metadata"]["finalizers"]) != cur.finalizers() {
        warn_finalizers(&result, warnings);
    }
    if def.is_crd() && sub == Sub::Main {
        for (field, path) in [
            ("spec.scope", &["spec", "scope"][..]),
            ("spec.names.kind", &["spec", "names", "kind"][..]),
            ("spec.group", &["spec", "group"][..]),
            ("spec.names.plural", &["spec", "names", "plural"][..]),
        ] {
            let get = |v: &Value| path.iter().fold(v.clone(), |acc, k| acc[*k].clone());
            if get(&result) != get(&cur.value) {
                return Err(ApiError::invalid(
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                    &name,
                    vec![Cause {
                        reason: "FieldValueInvalid",
                        message: format!("Invalid value: {}: field is immutable", get(&result)),
                        field: field.into(),
                    }],
                ));
            }
        }
    }
    if def.is_crd() && sub == Sub::Main {
        // A version objects are stored in cannot leave the spec until they are migrated.
        let versions: Vec<&str> = result["spec"]["versions"]
            .as_array()
            .map(|v| v.iter().filter_map(|x| x["name"].as_str()).collect())
            .unwrap_or_default();
        let causes: Vec<Cause> = string_list(&cur.value["status"]["storedVersions"])
            .iter()
            .enumerate()
            .filter(|(_, v)| !versions.contains(&v.as_str()))
            .flat_map(|(i, v)| {
                validation::invalid_causes(
                    &format!("status.storedVersions[{i}]"),
                    &json!(v),
                    vec!["must appear in spec.versions".into()],
                )
            })
            .collect();
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                &name,
                causes,
            ));
        }
        validate_crd(&result, &name)?;
        let old_status = cur.value.get("status").cloned();
        crd_defaults(&mut result, old_status.as_ref());
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
                vec![Cause {
                    reason: "FieldValueForbidden",
                    message: format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                    ),
                    field: "metadata.finalizers".into(),
                }],
            ));
        }
    }
    if result == cur.value {
        return Ok(Change::Keep);
    }
    if cur.deleting() && string_list(&result["metadata"]["finalizers"]).is_empty() {
        let ns_pending =
            def.is_namespace() && !string_list(&result["spec"]["finalizers"]).is_empty();
        if !ns_pending {
            // The final state (without finalizers) goes into the DELETED event.
            return Ok(Change::RemoveWith(result));
        }
    }
    Ok(Change::Put(result))
}

/// Where the real server keeps an object in etcd, as its storage errors name it: built-in kinds
/// under their resource (Services under `services/specs`), CRDs and custom resources under their
/// group too.
fn storage_key(def: &ResourceDef, ns: &str, name: &str) -> String {
    let prefix = if def.custom || def.is_crd() {
        format!("{}/{}", def.group, def.plural)
    } else if def.key() == crate::service::SERVICES_KEY {
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

/// `ValidateConfigMapUpdate`, `ValidateSecretUpdate` and `ValidateRoleBindingUpdate`: a binding
/// keeps its role, a Secret keeps its type, and a
/// ConfigMap or Secret marked `immutable` keeps its contents and the mark. Contents are compared
/// as the server compares them, the stored side without empty maps (storage drops them) and the
/// new side as sent, so `data: {}` on an immutable object without data is a change.
/// What a Job's update may not change, as ValidateJobSpecUpdate checks it, in its order: the
/// completions (but in tandem with the parallelism of an Indexed Job), the selector, the pod
/// template (whose scheduling directives, labels and annotations a suspended Job that never
/// started may change), the completion mode and the other policies.
fn job_update_causes(old: &Value, new: &Value) -> Vec<Cause> {
    let (old_spec, spec) = (&old["spec"], &new["spec"]);
    let invalid = |field: &str, value: &Value, why: &str| {
        validation::invalid_causes(&format!("spec.{field}"), value, vec![why.to_string()])
    };
    let immutable = |field: &str, value: &Value| invalid(field, value, "field is immutable");
    let mut causes = vec![];
    if spec["completions"] != old_spec["completions"] {
        if spec["completionMode"] != "Indexed" {
            causes.extend(immutable("completions", &spec["completions"]));
        } else if spec["completions"] != spec["parallelism"] {
            causes.extend(invalid(
                "completions",
                &spec["completions"],
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    }
    if spec["selector"] != old_spec["selector"] {
        causes.extend(immutable("selector", &spec["selector"]));
    }
    let mut old_template = old_spec["template"].clone();
    let never_started = old["status"]["startTime"].is_null();
    if old_spec["suspend"] == true && never_started {
        let template = &spec["template"];
        for path in [
            &["metadata", "labels"][..],
            &["metadata", "annotations"],
            &["spec", "nodeSelector"],
            &["spec", "tolerations"],
            &["spec", "schedulingGates"],
            &["spec", "affinity"],
        ] {
            let wanted = path.iter().fold(template, |v, k| &v[*k]).clone();
            set_in(&mut old_template, path, wanted);
        }
    }
    strip_nulls(&mut old_template);
    let mut template = spec["template"].clone();
    strip_nulls(&mut template);
    if template != old_template {
        causes.extend(immutable("template", &spec["template"]));
    }
    for field in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        if spec[field] != old_spec[field] {
            causes.extend(immutable(field, &spec[field]));
        }
    }
    causes
}

/// ValidatePodUpdate: a Pod's spec may change only in its containers' images, its active
/// deadline, added tolerations, removed scheduling gates and a negative grace period set to 1.
fn pod_update_causes(old: &Value, new: &Value) -> Vec<Cause> {
    let mut allowed = old["spec"].clone();
    let spec = &new["spec"];
    for list in ["containers", "initContainers"] {
        if let (Some(was), Some(now)) = (allowed[list].as_array_mut(), spec[list].as_array())
            && was.len() == now.len()
        {
            for (w, n) in was.iter_mut().zip(now) {
                w["image"] = n["image"].clone();
            }
        }
    }
    allowed["activeDeadlineSeconds"] = spec["activeDeadlineSeconds"].clone();
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let (old_tolerations, new_tolerations) =
        (list(&allowed["tolerations"]), list(&spec["tolerations"]));
    if old_tolerations.iter().all(|t| new_tolerations.contains(t)) {
        allowed["tolerations"] = spec["tolerations"].clone();
    }
    let (old_gates, new_gates) = (
        list(&allowed["schedulingGates"]),
        list(&spec["schedulingGates"]),
    );
    if new_gates.iter().all(|g| old_gates.contains(g)) {
        allowed["schedulingGates"] = spec["schedulingGates"].clone();
    }
    if allowed["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0)
        && spec["terminationGracePeriodSeconds"] == 1
    {
        allowed["terminationGracePeriodSeconds"] = json!(1);
    }
    let mut now = spec.clone();
    strip_nulls(&mut allowed);
    strip_nulls(&mut now);
    if allowed == now {
        return vec![];
    }
    vec![Cause {
        reason: "FieldValueForbidden",
        message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".into(),
        field: "spec".into(),
    }]
}

fn immutable_causes(def: &ResourceDef, old: &Value, new: &Value) -> Vec<Cause> {
    if def.group == "batch" && def.plural == "jobs" {
        return job_update_causes(old, new);
    }
    if def.group.is_empty() && def.plural == "pods" {
        return pod_update_causes(old, new);
    }
    // A binding's role is fixed: changing it means a new binding.
    if def.group == "rbac.authorization.k8s.io"
        && def.plural.ends_with("bindings")
        && old["roleRef"] != new["roleRef"]
    {
        let text = |k: &str| validation::go_quote(new["roleRef"][k].as_str().unwrap_or_default());
        return vec![Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}: cannot change roleRef",
                text("apiGroup"),
                text("kind"),
                text("name")
            ),
            field: "roleRef".into(),
        }];
    }
    let secret = match (def.group.as_str(), def.plural.as_str()) {
        ("", "secrets") => true,
        ("", "configmaps") => false,
        _ => return vec![],
    };
    let mut causes = vec![];
    if secret && old["type"] != new["type"] {
        causes.extend(validation::invalid_causes(
            "type",
            &new["type"],
            vec!["field is immutable".into()],
        ));
    }
    if old["immutable"] != json!(true) {
        return causes;
    }
    let forbidden = |field: &str| Cause {
        reason: "FieldValueForbidden",
        message: "Forbidden: field is immutable when `immutable` is set".into(),
        field: field.into(),
    };
    if new["immutable"] != json!(true) {
        causes.push(forbidden("immutable"));
    }
    let stored = |v: &Value| match v {
        Value::Object(m) if m.is_empty() => Value::Null,
        other => other.clone(),
    };
    let contents: &[&str] = if secret {
        &["data"]
    } else {
        &["data", "binaryData"]
    };
    for field in contents {
        if stored(&old[*field]) != new[*field] {
            causes.push(forbidden(field));
        }
    }
    causes
}

fn run_update(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    w: WriteOpts,
    compute: impl FnOnce(Option<&Arc<Obj>>, &Inner, &mut Warnings) -> Result<(Value, bool), ApiError>,
    sub: Sub,
    warnings: &mut Warnings,
) -> Result<(Outcome, bool), ApiError> {
    let dry_run = w.dry_run;
    let api_version = def.api_version();
    let ns_key = if def.namespaced { ns } else { "" };
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
        let mut change = prepare_update(def, cur, candidate, sub, w.strict, inner, warnings)?;
        if let Change::Put(v) = &mut change
            && let Some(writer) = w.writer(&api_version, sub)
        {
            crate::managed::record_update(
                &cur.value,
                v,
                &writer,
                scope(def, sub),
                &KindSchema::of(def),
                &now(),
            );
        }
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
    def: &ResourceDef,
    ns: &str,
    name: &str,
    mut body: Value,
    sub: Sub,
    w: WriteOpts,
    warnings: &mut Warnings,
) -> Result<(Outcome, bool), ApiError> {
    check_identity(def, ns, Some(name), &mut body)?;
    if sub == Sub::Main {
        validate_name(def, name)?;
    }
    run_update(
        store,
        def,
        ns,
        name,
        w.clone(),
        |cur, inner, warnings| {
            if cur.is_none() && def.create_on_update && sub == Sub::Main {
                let mut v = prepare_create(def, ns, body, inner, w.strict, warnings)?;
                let api_version = def.api_version();
                if let Some(writer) = w.writer(&api_version, Sub::Main) {
                    record_create(&mut v, &writer, def, sub);
                }
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
            let conditional = def.custom || def.key() == "coordination.k8s.io/leases";
            let version = body["metadata"]["resourceVersion"]
                .as_str()
                .filter(|v| !v.is_empty())
                .unwrap_or("0");
            if conditional && cur.is_some() && version.parse::<u64>().ok() == Some(0) {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.plural,
                    name,
                    vec![Cause {
                        reason: "FieldValueInvalid",
                        message: "Invalid value: 0x0: must be specified for an update".into(),
                        field: "metadata.resourceVersion".into(),
                    }],
                ));
            }
            Ok((body, false))
        },
        sub,
        warnings,
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// PATCH. Returns the outcome and whether the object was created (server-side apply).
#[allow(clippy::too_many_arguments)]
pub fn patch(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    pt: PatchType,
    body: &Value,
    sub: Sub,
    w: WriteOpts,
    admit: &dyn Fn(&Inner, &Value) -> Result<(), ApiError>,
    warnings: &mut Warnings,
) -> Result<(Outcome, bool), ApiError> {
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
    let force = w.force;
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
    // An applied configuration is typed against the schema before anything else; the server
    // fails this with a plain error (500, no reason).
    let typed = |applied: &Value| {
        if w.shape != crate::resources::Shape::Stored {
            return Ok(());
        }
        match crate::typed::apply_error(def, applied) {
            Some(error) => Err(ApiError::new(500, "", error)),
            None => Ok(()),
        }
    };
    let mut run_opts = w.clone();
    if pt == PatchType::Apply {
        // The apply records its own entry.
        run_opts.manager = None;
    }
    run_update(
        store,
        def,
        ns,
        name,
        run_opts,
        |cur, inner, warnings| {
            let Some(cur) = cur else {
                if pt == PatchType::Apply && sub == Sub::Main {
                    let mut b = body.clone();
                    // Typed as an applied configuration first, as for an existing object.
                    typed(&b)?;
                    decodable(&b)?;
                    check_identity(def, ns, Some(name), &mut b)?;
                    validate_name(def, name)?;
                    let mut created = prepare_create(def, ns, b, inner, w.strict, warnings)?;
                    admit(inner, &created)?;
                    crate::managed::apply(
                        None,
                        &mut created,
                        body,
                        &applier,
                        force,
                        scope(def, sub),
                        &KindSchema::of(def),
                        &now(),
                    )?;
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
                    // The applied configuration is typed before anything is merged or owned.
                    typed(&b)?;
                    decodable(&b)?;
                    let schema = KindSchema::of(def);
                    crate::managed::merge(&mut v, &b, &schema);
                    if sub != Sub::Finalize {
                        crate::managed::apply(
                            Some(&shown),
                            &mut v,
                            &b,
                            &applier,
                            force,
                            scope(def, sub),
                            &schema,
                            &now(),
                        )?;
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
                    v["metadata"]["name"].as_str().unwrap_or_default()
                )));
            }
            admit(inner, &v)?;
            Ok((v, false))
        },
        sub,
        warnings,
    )
}

/// The answer to a patch whose result cannot be decoded (`error`, from
/// [`crate::openapi::decode_error`]), as the real server's patch handler gives it: 422 on the
/// `patch` field naming the patched object (JSON and merge patches, whose result is re-encoded
/// with sorted keys as here) or the patch as Go prints a map (strategic merge). Server-side apply
/// has typed its configuration already ([`crate::typed`]); what fails here is only what that
/// typing lets through (a fraction or an out-of-range number for an integer field).
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
    let mut e = ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    );
    e.details = Some(Box::new(crate::status::Details {
        causes: vec![Cause {
            reason: "UnexpectedServerResponse",
            message: error,
            field: String::new(),
        }],
        ..Default::default()
    }));
    e
}

/// Options of a DELETE.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    pub propagation: Option<String>,
    pub orphan_dependents: Option<bool>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

pub enum Deleted {
    /// Removed at once (final state).
    Gone(Arc<Obj>),
    /// Marked for deletion, waiting on finalizers.
    Pending(Arc<Obj>),
}

pub fn delete(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    opts: &DeleteOpts,
    warnings: &mut Warnings,
) -> Result<Deleted, ApiError> {
    if def.is_namespace() && matches!(name, "default" | "kube-system" | "kube-public") {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            name,
            "this namespace may not be deleted",
        ));
    }
    let ns_key = if def.namespaced { ns } else { "" };
    let mut dry: Option<(Value, bool)> = None;
    let (obj, pending) = store.mutate(def.key(), ns_key, name, |cur, _inner| {
        let Some(cur) = cur else {
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        // A namespace's own storage checks its preconditions, in its own words.
        if def.is_namespace() {
            let differs = |field: &str, wanted: &Option<String>, have: &str| {
                wanted.as_deref().filter(|w| *w != have).map(|w| {
                    ApiError::conflict(
                        "",
                        "namespaces",
                        name,
                        &format!(
                            "Precondition failed: {field} in precondition: {w}, {field} in object meta: {have}"
                        ),
                    )
                })
            };
            if let Some(e) = differs("UID", &opts.uid, cur.uid())
                .or_else(|| differs("ResourceVersion", &opts.resource_version, cur.meta_str("resourceVersion")))
            {
                return Err(e);
            }
            if cur.deleting() && !string_list(&cur.value["spec"]["finalizers"]).is_empty() {
                return Err(ApiError::conflict(
                    "",
                    "namespaces",
                    name,
                    "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.",
                ));
            }
        }
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
        // Lazily: the Job default's warning is only for deletes that name no policy.
        let policy = opts.propagation.as_deref().or_else(|| match opts.orphan_dependents {
            Some(true) => Some("Orphan"),
            Some(false) => Some("Background"),
            // batch/v1 Jobs orphan their pods unless told otherwise, for compatibility.
            None if def.key() == "batch/jobs" => {
                if !opts.dry_run {
                    warnings.push(
                        "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning",
                    );
                }
                Some("Orphan")
            }
            None => None,
        });
        match policy {
            Some("Orphan") if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
            Some("Foreground") if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            _ => {}
        }
        if fins.is_empty() && !def.is_namespace() {
            if opts.dry_run {
                dry = Some((cur.value.clone(), false));
                return Ok((Change::Keep, false));
            }
            return Ok((Change::Remove, false));
        }
        let mut v = cur.value.clone();
        {
            let meta = meta_mut(&mut v);
            meta.insert("deletionTimestamp".into(), json!(now()));
            // A namespace's storage sets only the timestamp (and the phase).
            if !def.is_namespace() {
                meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            }
            if fins.is_empty() {
                meta.remove("finalizers");
            } else {
                meta.insert("finalizers".into(), json!(fins));
            }
            if def.has_generation {
                let g = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
                meta.insert("generation".into(), json!(g + 1));
            }
        }
        if def.is_namespace() {
            set_in(&mut v, &["status", "phase"], json!("Terminating"));
        }
        if opts.dry_run {
            dry = Some((v, true));
            return Ok((Change::Keep, true));
        }
        Ok((Change::Put(v), true))
    })?;
    if let Some((v, pending)) = dry {
        let o = Obj::new(v, 0);
        return Ok(if pending {
            Deleted::Pending(o)
        } else {
            Deleted::Gone(o)
        });
    }
    let obj = obj.ok_or_else(|| ApiError::internal("delete found nothing"))?;
    Ok(if pending {
        Deleted::Pending(obj)
    } else {
        Deleted::Gone(obj)
    })
}

/// Removes one finalizer (used by the controllers). Returns true when something changed.
pub fn remove_finalizer(store: &Store, def: &ResourceDef, ns: &str, name: &str, fin: &str) -> bool {
    let ns_key = if def.namespaced { ns } else { "" };
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
        if left.is_empty() {
            if let Some(m) = v["metadata"].as_object_mut() {
                m.remove("finalizers");
            }
        } else {
            v["metadata"]["finalizers"] = json!(left);
        }
        let ns_pending = def.is_namespace() && !string_list(&v["spec"]["finalizers"]).is_empty();
        if left.is_empty() && cur.deleting() && !ns_pending {
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
