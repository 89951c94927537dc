//! CustomResourceDefinitions: their validation and defaults, as the apiextensions server has
//! them.

use crate::kinds::strategy::{Ctx, Strategy};
use crate::resources::crd_preferred_version;
use crate::status::{ApiError, Cause};
use crate::store::Obj;
use crate::util::{now, string_list};
use crate::validation;
use serde_json::{Value, json};

/// `ValidateCustomResourceDefinition`, the part served: the group (a dotted subdomain), the
/// names, `metadata.name` as `<plural>.<group>`, the scope, and the versions (unique DNS-1035
/// names, exactly one storage version, a schema each). A 422 listing every cause found. CEL rules
/// (`x-kubernetes-validations`) are refused: this server does not evaluate them, and a CRD that
/// relies on them must not be stored as if its objects were checked.
pub(crate) fn validate_crd(crd: &Value, name: &str) -> Result<(), ApiError> {
    let group = "apiextensions.k8s.io";
    let kind = "CustomResourceDefinition";
    let spec = &crd["spec"];
    let mut causes = vec![];
    let req = |field: &str| validation::required(field, "");
    let g = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    let k = spec["names"]["kind"].as_str().unwrap_or_default();
    let invalid =
        |field: &str, value: &str, why: String| validation::invalid(field, json!(value), &why);
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
        let why = "must be spec.names.plural+\".\"+spec.group";
        causes.push(validation::invalid("metadata.name", json!(name), why));
    }
    match spec["scope"].as_str() {
        Some("Namespaced") | Some("Cluster") => {}
        other => causes.push(validation::not_supported(
            "spec.scope",
            &json!(other.unwrap_or_default()),
            &["Cluster", "Namespaced"],
        )),
    }
    match spec["versions"].as_array() {
        Some(v) if !v.is_empty() => {
            let storage = v
                .iter()
                .filter(|x| x["storage"].as_bool() == Some(true))
                .count();
            if storage != 1 {
                causes.push(validation::invalid(
                    "spec.versions",
                    json!(spec["versions"]),
                    "must have exactly one version marked as storage version",
                ));
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
                    causes.push(validation::invalid(
                        "spec.versions",
                        json!(spec["versions"]),
                        "must contain unique version names",
                    ));
                }
                let schema = &ver["schema"]["openAPIV3Schema"];
                if !schema.is_object() {
                    causes.push(validation::required(
                        format!("spec.versions[{i}].schema.openAPIV3Schema"),
                        "schemas are required",
                    ));
                } else if schema["type"].as_str().is_none_or(str::is_empty) {
                    causes.push(validation::required(
                        format!("spec.versions[{i}].schema.openAPIV3Schema.type"),
                        "must not be empty at the root",
                    ));
                }
                let mut rules = vec![];
                rule_paths(schema, "", &mut rules);
                for at in rules {
                    causes.push(validation::forbidden(
                        format!("spec.versions[{i}].schema.openAPIV3Schema{at}"),
                        "CEL validation rules are not supported by this server",
                    ));
                }
            }
        }
        _ => causes.push(validation::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        )),
    }
    causes.extend(crd_names_causes(&spec["names"]));
    ApiError::invalid_if_any(group, kind, name, causes)
}

/// The schema paths (`.properties[spec].x-kubernetes-validations`) of every CEL rule list in
/// `schema`, wherever a nested schema may hold one.
fn rule_paths(schema: &Value, path: &str, out: &mut Vec<String>) {
    if schema["x-kubernetes-validations"]
        .as_array()
        .is_some_and(|rules| !rules.is_empty())
    {
        out.push(format!("{path}.x-kubernetes-validations"));
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, s) in props {
            rule_paths(s, &format!("{path}.properties[{k}]"), out);
        }
    }
    for nested in ["additionalProperties", "items"] {
        if schema[nested].is_object() {
            rule_paths(&schema[nested], &format!("{path}.{nested}"), out);
        }
    }
}

/// `ValidateCustomResourceDefinitionNames`: the names are DNS-1035 labels (kinds in mixed case),
/// and a kind is not its own list kind.
fn crd_names_causes(names: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    let text = |k: &str| names[k].as_str().unwrap_or_default();
    let mut check = |field: String, value: &str, lower: bool, prefix: &str| {
        let checked = if lower {
            value.to_lowercase()
        } else {
            value.to_string()
        };
        let errs = validation::dns1035_label(&checked);
        if !value.is_empty() && !errs.is_empty() {
            let why = format!("{prefix}{}", errs.join(","));
            causes.push(validation::invalid(field, json!(value), &why));
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
        let why = "kind and listKind may not be the same";
        let list_kind = json!(text("listKind"));
        causes.insert(
            at,
            validation::invalid("spec.names.listKind", list_kind, why),
        );
    }
    causes
}

/// Defaults and status the CRD controllers would fill in.
pub(crate) fn crd_defaults(v: &mut Value, old_status: Option<&Value>) {
    let names = &mut v["spec"]["names"];
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    if names["singular"].as_str().is_none_or(str::is_empty) {
        names["singular"] = json!(kind.to_lowercase());
    }
    if names["listKind"].as_str().is_none_or(str::is_empty) {
        names["listKind"] = json!(format!("{kind}List"));
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

/// The finalizer by which a deleted CRD's instances go first.
pub const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// CustomResourceDefinitions: the whole definition checked, the cleanup finalizer, the names
/// that never change, and the stored versions kept.
pub(crate) struct CrdStrategy;

impl Strategy for CrdStrategy {
    fn check_create(&self, obj: &Value, name: &str) -> Result<(), ApiError> {
        validate_crd(obj, name)
    }

    fn prepare_create(&self, _ctx: &Ctx, obj: &mut Value) -> Result<(), ApiError> {
        let mut fins = string_list(&obj["metadata"]["finalizers"]);
        if !fins.iter().any(|f| f == CRD_CLEANUP) {
            fins.push(CRD_CLEANUP.into());
        }
        obj["metadata"]["finalizers"] = json!(fins);
        crd_defaults(obj, None);
        Ok(())
    }

    fn complete_update(&self, old: &Obj, new: &mut Value) -> Result<(), ApiError> {
        let group = "apiextensions.k8s.io";
        let kind = "CustomResourceDefinition";
        let name = old.meta_str("name");
        for (field, path) in [
            ("spec.scope", &["spec", "scope"][..]),
            ("spec.names.kind", &["spec", "names", "kind"][..]),
            ("spec.group", &["spec", "group"][..]),
            ("spec.names.plural", &["spec", "names", "plural"][..]),
        ] {
            let get = |v: &Value| path.iter().fold(v.clone(), |acc, k| acc[*k].clone());
            if get(new) != get(&old.value) {
                return Err(ApiError::invalid(
                    group,
                    kind,
                    name,
                    vec![validation::invalid(field, get(new), "field is immutable")],
                ));
            }
        }
        // A version objects are stored in cannot leave the spec until they are migrated.
        let versions: Vec<&str> = new["spec"]["versions"]
            .as_array()
            .map(|v| v.iter().filter_map(|x| x["name"].as_str()).collect())
            .unwrap_or_default();
        let causes: Vec<Cause> = string_list(&old.value["status"]["storedVersions"])
            .iter()
            .enumerate()
            .filter(|(_, v)| !versions.contains(&v.as_str()))
            .map(|(i, v)| {
                let field = format!("status.storedVersions[{i}]");
                validation::invalid(field, json!(v), "must appear in spec.versions")
            })
            .collect();
        ApiError::invalid_if_any(group, kind, name, causes)?;
        validate_crd(new, name)?;
        crd_defaults(new, old.value.get("status"));
        Ok(())
    }
}
