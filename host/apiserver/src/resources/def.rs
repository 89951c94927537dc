//! What a resource is: its definition (group, version, kind, scope, verbs, shape), name rules and
//! scale paths.

use serde_json::Value;
use std::sync::Arc;

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
pub(super) fn def(
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
