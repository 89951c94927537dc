//! The resource registry: built-in kinds, custom resources from CRDs, discovery and OpenAPI documents.

use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};

/// How object names are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    Subdomain,
    Label,
    /// Services' names become DNS names that must not look like numbers.
    Dns1035Label,
    PathSegment,
}

/// One REST resource (a plural under a group/version).
#[derive(Debug, Clone)]
pub struct ResourceDef {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Writes to the main resource ignore status; `/status` writes only status.
    pub status_subresource: bool,
    pub has_generation: bool,
    pub name_rule: NameRule,
    /// Not stored (e.g. SelfSubjectAccessReview): only `create`.
    pub virtual_create_only: bool,
    /// A custom resource (from a CRD).
    pub custom: bool,
    /// PUT of a missing object creates it (Leases, RBAC objects, Events).
    pub create_on_update: bool,
    /// The CRD version's `openAPIV3Schema` (custom resources only).
    pub schema: Option<Arc<Value>>,
    /// Every served version (for CRs), used to accept requests for any of them.
    pub storage_key: String,
    /// How objects look on the wire compared with how they are stored.
    pub shape: Shape,
    /// The `scale` subresource's paths (custom resources whose CRD declares one).
    pub scale: Option<ScalePaths>,
}

/// The wire shape of a resource whose objects are stored as another kind's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shape {
    /// As stored.
    #[default]
    Stored,
    /// `events.k8s.io/v1` Events, stored as core `v1` Events.
    EventsV1,
}

impl Shape {
    /// An object as stored, in this shape.
    pub fn view(self, stored: &Value) -> Value {
        match self {
            Shape::Stored => stored.clone(),
            Shape::EventsV1 => crate::shape::from_core(stored),
        }
    }

    /// An object in this shape, as stored.
    pub fn stored(self, view: Value) -> Value {
        match self {
            Shape::Stored => view,
            Shape::EventsV1 => crate::shape::to_core(&view),
        }
    }
}

pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
pub const NS_KEY: &str = "/namespaces";

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn key(&self) -> &str {
        &self.storage_key
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        ALL_VERBS
            .iter()
            .copied()
            .filter(|v| self.allows(v))
            .collect()
    }

    /// Whether the resource serves `verb` (discovery lists exactly these).
    pub fn allows(&self, verb: &str) -> bool {
        if self.virtual_create_only {
            verb == "create"
        } else {
            // Namespaces are removed one by one, through their finalizers: the real server
            // registers no collection delete for them.
            !(self.is_namespace() && verb == "deletecollection")
        }
    }

    pub fn is_pods(&self) -> bool {
        self.group.is_empty() && self.plural == "pods"
    }

    pub fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.plural == "namespaces"
    }

    pub fn is_crd(&self) -> bool {
        self.storage_key == CRD_KEY
    }
}

#[allow(clippy::too_many_arguments)]
fn def(
    group: &str,
    version: &str,
    plural: &str,
    singular: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
    generation: bool,
    rule: NameRule,
) -> ResourceDef {
    ResourceDef {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: singular.into(),
        kind: kind.into(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: vec![],
        status_subresource: status,
        has_generation: generation,
        name_rule: rule,
        virtual_create_only: false,
        custom: false,
        create_on_update: matches!(
            plural,
            "leases"
                | "events"
                | "services"
                | "roles"
                | "clusterroles"
                | "rolebindings"
                | "clusterrolebindings"
        ),
        schema: None,
        storage_key: format!("{group}/{plural}"),
        shape: Shape::Stored,
        scale: None,
    }
}

/// The definition whose rules (validation, defaults) govern the stored objects of `def`: the core
/// Event's for `events.k8s.io/v1`, else `def` itself.
pub fn stored_def(def: &Arc<ResourceDef>) -> Arc<ResourceDef> {
    match def.shape {
        Shape::Stored => def.clone(),
        Shape::EventsV1 => builtins()
            .iter()
            .find(|d| d.shape == Shape::Stored && d.key() == def.key())
            .cloned()
            .unwrap_or_else(|| def.clone()),
    }
}

/// The built-in resources.
pub fn builtins() -> &'static [Arc<ResourceDef>] {
    static B: OnceLock<Vec<Arc<ResourceDef>>> = OnceLock::new();
    B.get_or_init(|| {
        use NameRule::*;
        let mut v = vec![
            def(
                "",
                "v1",
                "namespaces",
                "namespace",
                "Namespace",
                false,
                &["ns"],
                true,
                false,
                Label,
            ),
            def(
                "",
                "v1",
                "configmaps",
                "configmap",
                "ConfigMap",
                true,
                &["cm"],
                false,
                false,
                Subdomain,
            ),
            def(
                "",
                "v1",
                "secrets",
                "secret",
                "Secret",
                true,
                &[],
                false,
                false,
                Subdomain,
            ),
            def(
                "",
                "v1",
                "serviceaccounts",
                "serviceaccount",
                "ServiceAccount",
                true,
                &["sa"],
                false,
                false,
                Subdomain,
            ),
            def(
                "",
                "v1",
                "events",
                "event",
                "Event",
                true,
                &["ev"],
                false,
                false,
                Subdomain,
            ),
            // Inert storage (nothing schedules or runs them), so that `kubectl get pods`,
            // `kubectl cluster-info` and the like answer as on a cluster without nodes.
            def(
                "",
                "v1",
                "pods",
                "pod",
                "Pod",
                true,
                &["po"],
                true,
                false,
                Subdomain,
            ),
            def(
                "",
                "v1",
                "services",
                "service",
                "Service",
                true,
                &["svc"],
                true,
                false,
                Dns1035Label,
            ),
            def(
                "",
                "v1",
                "nodes",
                "node",
                "Node",
                false,
                &["no"],
                true,
                false,
                Subdomain,
            ),
            def(
                "batch",
                "v1",
                "cronjobs",
                "cronjob",
                "CronJob",
                true,
                &["cj"],
                true,
                true,
                Subdomain,
            ),
            def(
                "batch",
                "v1",
                "jobs",
                "job",
                "Job",
                true,
                &[],
                true,
                true,
                Subdomain,
            ),
            // Stored and validated, never run (no Deployment controller, no eviction API): what
            // `kubectl apply --dry-run=server -k deploy/` checks of lethe's own deployment.
            def(
                "apps",
                "v1",
                "deployments",
                "deployment",
                "Deployment",
                true,
                &["deploy"],
                true,
                true,
                Subdomain,
            ),
            def(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "poddisruptionbudget",
                "PodDisruptionBudget",
                true,
                &["pdb"],
                true,
                true,
                Subdomain,
            ),
            def(
                "coordination.k8s.io",
                "v1",
                "leases",
                "lease",
                "Lease",
                true,
                &[],
                false,
                false,
                Subdomain,
            ),
            def(
                "rbac.authorization.k8s.io",
                "v1",
                "roles",
                "role",
                "Role",
                true,
                &[],
                false,
                false,
                PathSegment,
            ),
            def(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterroles",
                "clusterrole",
                "ClusterRole",
                false,
                &[],
                false,
                false,
                PathSegment,
            ),
            def(
                "rbac.authorization.k8s.io",
                "v1",
                "rolebindings",
                "rolebinding",
                "RoleBinding",
                true,
                &[],
                false,
                false,
                PathSegment,
            ),
            def(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterrolebindings",
                "clusterrolebinding",
                "ClusterRoleBinding",
                false,
                &[],
                false,
                false,
                PathSegment,
            ),
            def(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "customresourcedefinition",
                "CustomResourceDefinition",
                false,
                &["crd", "crds"],
                true,
                true,
                Subdomain,
            ),
        ];
        let mut ssar = def(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            "SelfSubjectAccessReview",
            false,
            &[],
            false,
            false,
            PathSegment,
        );
        ssar.virtual_create_only = true;
        let mut sar = def(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "subjectaccessreview",
            "SubjectAccessReview",
            false,
            &[],
            false,
            false,
            PathSegment,
        );
        sar.virtual_create_only = true;
        let mut lsar = def(
            "authorization.k8s.io",
            "v1",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            "LocalSubjectAccessReview",
            true,
            &[],
            false,
            false,
            PathSegment,
        );
        lsar.virtual_create_only = true;
        let mut ssrr = def(
            "authorization.k8s.io",
            "v1",
            "selfsubjectrulesreviews",
            "selfsubjectrulesreview",
            "SelfSubjectRulesReview",
            false,
            &[],
            false,
            false,
            PathSegment,
        );
        ssrr.virtual_create_only = true;
        let mut ssr = def(
            "authentication.k8s.io",
            "v1",
            "selfsubjectreviews",
            "selfsubjectreview",
            "SelfSubjectReview",
            false,
            &[],
            false,
            false,
            PathSegment,
        );
        ssr.virtual_create_only = true;
        // The same stored Events as core `v1`, in the `events.k8s.io/v1` shape (kube-rs's
        // event `Recorder` and client-go's new events library write through this API).
        let mut events_v1 = def(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            false,
            false,
            Subdomain,
        );
        events_v1.storage_key = crate::shape::EVENTS_KEY.into();
        events_v1.shape = Shape::EventsV1;
        v.push(events_v1);
        v.push(ssar);
        v.push(sar);
        v.push(lsar);
        v.push(ssrr);
        v.push(ssr);
        for d in v.iter_mut() {
            // The members of the `all` category that this server serves, as kubectl's
            // `get all` finds them on a real server.
            if matches!(d.plural.as_str(), "cronjobs" | "jobs" | "pods" | "services")
                && matches!(d.group.as_str(), "" | "batch")
            {
                d.categories = vec!["all".into()];
            }
        }
        v.into_iter().map(Arc::new).collect()
    })
}

/// Definitions derived from one CRD object (one per served version).
pub fn defs_from_crd(crd: &Value) -> Vec<Arc<ResourceDef>> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return vec![];
    }
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let short = crate::util::string_list(&names["shortNames"]);
    let categories = crate::util::string_list(&names["categories"]);
    let mut out = vec![];
    if let Some(versions) = spec["versions"].as_array() {
        for v in versions {
            if v["served"].as_bool() == Some(false) {
                continue;
            }
            let Some(vname) = v["name"].as_str() else {
                continue;
            };
            let status = v["subresources"]["status"].is_object()
                || spec["subresources"]["status"].is_object();
            let scale = ScalePaths::from_subresource(&v["subresources"]["scale"])
                .or_else(|| ScalePaths::from_subresource(&spec["subresources"]["scale"]));
            out.push(Arc::new(ResourceDef {
                group: group.into(),
                version: vname.into(),
                plural: plural.into(),
                singular: singular.clone(),
                kind: kind.into(),
                namespaced,
                short_names: short.clone(),
                categories: categories.clone(),
                status_subresource: status,
                has_generation: true,
                name_rule: NameRule::Subdomain,
                virtual_create_only: false,
                custom: true,
                create_on_update: false,
                schema: v["schema"]["openAPIV3Schema"]
                    .is_object()
                    .then(|| Arc::new(v["schema"]["openAPIV3Schema"].clone())),
                storage_key: format!("{group}/{plural}"),
                shape: Shape::Stored,
                scale,
            }));
        }
    }
    out
}

/// The preferred (storage, else first served) version of a CRD.
pub fn crd_preferred_version(crd: &Value) -> Option<String> {
    let versions = crd["spec"]["versions"].as_array()?;
    versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true) && v["served"].as_bool() != Some(false))
        .or_else(|| {
            versions
                .iter()
                .find(|v| v["served"].as_bool() != Some(false))
        })
        .and_then(|v| v["name"].as_str().map(str::to_string))
}

/// A group with its versions, for `/apis`.
pub struct GroupInfo {
    pub name: String,
    pub versions: Vec<String>,
    pub preferred: String,
}

/// All groups (built-in then custom), in discovery order.
pub fn groups(custom: &[Arc<ResourceDef>], crds: &[Value]) -> Vec<GroupInfo> {
    let mut out: Vec<GroupInfo> = vec![];
    for d in builtins().iter().chain(custom.iter()) {
        if d.group.is_empty() {
            continue;
        }
        match out.iter_mut().find(|g| g.name == d.group) {
            Some(g) => {
                if !g.versions.contains(&d.version) {
                    g.versions.push(d.version.clone());
                }
            }
            None => out.push(GroupInfo {
                name: d.group.clone(),
                versions: vec![d.version.clone()],
                preferred: d.version.clone(),
            }),
        }
    }
    // A group of custom resources lists its versions by Kubernetes version priority (GA before
    // beta before alpha, higher numbers first), and prefers the first, as the real server does.
    for g in out.iter_mut() {
        if crds
            .iter()
            .any(|c| c["spec"]["group"].as_str() == Some(&g.name))
        {
            g.versions
                .sort_by(|a, b| compare_kube_versions(b, a).then_with(|| a.cmp(b)));
            if let Some(first) = g.versions.first() {
                g.preferred = first.clone();
            }
        }
    }
    out
}

/// The warning every request to a deprecated version of a CRD gets: its own
/// `deprecationWarning`, or "group/version Kind is deprecated", pointing at the highest served
/// version that is not deprecated and ranks above it, as the real server words it.
pub fn crd_deprecation_warning(crd: &Value, version: &str) -> Option<String> {
    let spec = &crd["spec"];
    let versions = spec["versions"].as_array()?;
    let this = versions.iter().find(|v| v["name"] == version)?;
    if this["deprecated"] != json!(true) {
        return None;
    }
    if let Some(custom) = this["deprecationWarning"].as_str() {
        return Some(custom.to_string());
    }
    let group = spec["group"].as_str().unwrap_or_default();
    let kind = spec["names"]["kind"].as_str().unwrap_or_default();
    let mut warning = format!("{group}/{version} {kind} is deprecated");
    let better = versions
        .iter()
        .filter(|v| v["served"] == json!(true) && v["deprecated"] != json!(true))
        .filter_map(|v| v["name"].as_str())
        .filter(|v| compare_kube_versions(version, v).is_lt())
        .max_by(|a, b| compare_kube_versions(a, b));
    if let Some(better) = better {
        warning.push_str(&format!("; use {group}/{better} {kind}"));
    }
    Some(warning)
}

/// `version.CompareKubeAwareVersionStrings`: versions of the form `v1`, `v2beta3`, `v1alpha1`
/// rank by stability, then major, then minor number, above every other name; other names rank
/// in reverse alphabetical order (so sorting by descending rank lists them alphabetically).
pub fn compare_kube_versions(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    /// (stability: alpha 0, beta 1, GA 2; major; minor)
    fn parse(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (major, tail) = rest.split_at(digits);
        if major.is_empty() {
            return None;
        }
        let major = major.parse().ok()?;
        if tail.is_empty() {
            return Some((2, major, 0));
        }
        let (stability, minor) = if let Some(m) = tail.strip_prefix("beta") {
            (1, m)
        } else if let Some(m) = tail.strip_prefix("alpha") {
            (0, m)
        } else {
            return None;
        };
        if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((stability, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (None, None) => b.cmp(a),
    }
}

pub fn group_json(g: &GroupInfo) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{}/{}", g.name, v), "version": v}))
        .collect();
    json!({
        "name": g.name,
        "versions": versions,
        "preferredVersion": {"groupVersion": format!("{}/{}", g.name, g.preferred), "version": g.preferred},
    })
}

/// The `APIResourceList` for one group/version.
pub fn resource_list(group: &str, version: &str, defs: &[Arc<ResourceDef>]) -> Value {
    let mut resources = vec![];
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if d.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if d.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if d.is_pods() {
            resources.push(json!({
                "name": "pods/log",
                "singularName": "",
                "namespaced": true,
                "kind": "Pod",
                "verbs": ["get"],
            }));
        }
        if d.is_namespace() {
            resources.push(json!({
                "name": "namespaces/finalize",
                "singularName": "",
                "namespaced": false,
                "kind": "Namespace",
                "verbs": ["update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    })
}

/// The `/openapi/v3` index: one entry per group/version.
pub fn openapi_v3_index(defs: &[Arc<ResourceDef>], hash: u64) -> Value {
    let mut paths = serde_json::Map::new();
    for d in defs {
        let p = if d.group.is_empty() {
            format!("api/{}", d.version)
        } else {
            format!("apis/{}/{}", d.group, d.version)
        };
        let url = format!("/openapi/v3/{p}?hash={hash:016X}");
        paths.insert(p, json!({"serverRelativeURL": url}));
    }
    json!({ "paths": Value::Object(paths) })
}

/// A minimal OpenAPI v3 document for one group/version: enough for kubectl to see that the
/// server validates fields itself (`fieldValidation`) and which kinds each path serves.
/// The schema name of ObjectMeta in the OpenAPI documents.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

pub fn openapi_v3_doc(group: &str, version: &str, defs: &[Arc<ResourceDef>]) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let mut any = false;
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        any = true;
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let base = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        let gvk = json!({"group": group, "version": version, "kind": d.kind});
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let responses = json!({"200": {"description": "OK"}});
        if d.virtual_create_only {
            paths.insert(
                base.clone(),
                json!({"post": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "post", "parameters": params, "responses": responses}}),
            );
            continue;
        }
        paths.insert(
            base.clone(),
            json!({
                "get": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "list", "responses": responses},
                "post": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "post", "parameters": params, "responses": responses},
            }),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "get", "responses": responses},
                "put": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "put", "parameters": params, "responses": responses},
                "patch": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "patch", "parameters": params, "responses": responses},
                "delete": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "delete", "responses": responses},
            }),
        );
    }
    if !any {
        return None;
    }
    // Built-in kinds carry the Kubernetes API's schemas and custom resources their CRD schema, so
    // that `kubectl explain` works for both.
    let mut schemas = crate::openapi::schemas(group, version);
    let mut customs = false;
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        if let Some(schema) = &d.schema {
            customs = true;
            let mut sch = (**schema).clone();
            if let Some(m) = sch.as_object_mut() {
                m.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": d.group, "version": d.version, "kind": d.kind}]),
                );
                let props = m.entry("properties").or_insert_with(|| json!({}));
                if let Some(p) = props.as_object_mut() {
                    p.entry("apiVersion").or_insert_with(|| json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
                    p.entry("kind").or_insert_with(|| json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
                    // As the real server publishes it: the standard ObjectMeta, whatever the
                    // CRD's schema says of metadata.
                    p.insert(
                        "metadata".into(),
                        json!({
                            "allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}],
                            "default": {},
                            "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                        }),
                    );
                }
            }
            let reversed: Vec<&str> = d.group.split('.').rev().collect();
            schemas.insert(
                format!("{}.{}.{}", reversed.join("."), d.version, d.kind),
                sch,
            );
        }
    }
    if customs {
        // ObjectMeta and what it refers to, which a custom resource's metadata refers to.
        for (name, schema) in crate::openapi::core_schemas() {
            if name.starts_with("io.k8s.apimachinery.pkg.apis.meta.v1.") {
                schemas
                    .entry(name.clone())
                    .or_insert_with(|| schema.clone());
            }
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": Value::Object(paths),
        "components": {"schemas": Value::Object(schemas)},
    }))
}

fn aggregated_resource(d: &ResourceDef) -> Value {
    let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
    let mut r = json!({
        "resource": d.plural,
        "responseKind": gvk,
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": d.verbs(),
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
    let mut subs = vec![];
    if d.status_subresource {
        subs.push(json!({"subresource": "status", "responseKind": gvk, "verbs": ["get", "patch", "update"]}));
    }
    if d.scale.is_some() {
        subs.push(json!({
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"],
        }));
    }
    if d.is_namespace() {
        subs.push(json!({"subresource": "finalize", "responseKind": gvk, "verbs": ["update"]}));
    }
    if d.is_pods() {
        subs.push(json!({"subresource": "log", "responseKind": gvk, "verbs": ["get"]}));
    }
    if !subs.is_empty() {
        r["subresources"] = Value::Array(subs);
    }
    r
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) for `/api`
/// (`core`) or `/apis` (every named group, preferred version first).
pub fn aggregated_discovery(
    core: bool,
    defs: &[Arc<ResourceDef>],
    groups: &[GroupInfo],
    api_version: &str,
) -> Value {
    let version_entry = |group: &str, version: &str| {
        let resources: Vec<Value> = defs
            .iter()
            .filter(|d| d.group == group && d.version == version)
            .map(|d| aggregated_resource(d))
            .collect();
        json!({"version": version, "resources": resources, "freshness": "Current"})
    };
    let items: Vec<Value> = if core {
        vec![
            json!({"metadata": {"creationTimestamp": null}, "versions": [version_entry("", "v1")]}),
        ]
    } else {
        groups
            .iter()
            .map(|g| {
                let versions: Vec<Value> =
                    g.versions.iter().map(|v| version_entry(&g.name, v)).collect();
                json!({"metadata": {"name": g.name, "creationTimestamp": null}, "versions": versions})
            })
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    })
}

/// Where a custom resource keeps its replica counts (`.spec.replicas` → `["spec", "replicas"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: Vec<String>,
    pub status_replicas: Vec<String>,
    pub label_selector: Option<Vec<String>>,
}

impl ScalePaths {
    /// The paths of a CRD's `subresources.scale`, if it has one.
    pub fn from_subresource(scale: &Value) -> Option<ScalePaths> {
        let path = |field: &str| {
            let text = scale[field].as_str()?;
            let segments: Vec<String> = text
                .strip_prefix('.')?
                .split('.')
                .map(str::to_string)
                .collect();
            (!segments.iter().any(String::is_empty)).then_some(segments)
        };
        Some(ScalePaths {
            spec_replicas: path("specReplicasPath")?,
            status_replicas: path("statusReplicasPath")?,
            label_selector: path("labelSelectorPath"),
        })
    }
}

#[cfg(test)]
mod version_order_tests {
    use super::{compare_kube_versions, crd_deprecation_warning};
    use serde_json::json;

    #[test]
    fn deprecated_versions_point_at_the_best_version_that_is_not() {
        let crd = json!({"spec": {"group": "x.dev", "names": {"kind": "Gadget"}, "versions": [
            {"name": "v1alpha1", "served": true, "deprecated": true},
            {"name": "v1beta1", "served": true, "deprecated": true,
             "deprecationWarning": "v1beta1 goes away in May"},
            {"name": "v1", "served": true},
            {"name": "v2", "served": false},
        ]}});
        assert_eq!(
            crd_deprecation_warning(&crd, "v1alpha1").as_deref(),
            Some("x.dev/v1alpha1 Gadget is deprecated; use x.dev/v1 Gadget")
        );
        assert_eq!(
            crd_deprecation_warning(&crd, "v1beta1").as_deref(),
            Some("v1beta1 goes away in May")
        );
        assert_eq!(crd_deprecation_warning(&crd, "v1"), None);
    }

    #[test]
    fn versions_sort_by_stability_then_number_then_name() {
        let mut versions = vec![
            "v1alpha1",
            "foo",
            "v2beta1",
            "v1",
            "v10",
            "v11alpha2",
            "v12alpha1",
            "v2",
            "bar",
            "v1beta2",
            "v3beta1",
        ];
        versions.sort_by(|a, b| compare_kube_versions(b, a));
        assert_eq!(
            versions,
            [
                "v10",
                "v2",
                "v1",
                "v3beta1",
                "v2beta1",
                "v1beta2",
                "v12alpha1",
                "v11alpha2",
                "v1alpha1",
                "bar",
                "foo"
            ]
        );
    }
}
