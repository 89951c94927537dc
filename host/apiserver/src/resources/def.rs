//! What a resource is: its definition (group, version, kind, scope, verbs, shape) and name rules.

use serde_json::Value;
use std::sync::Arc;

/// How object names are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// An RFC 1123 subdomain, the rule of most kinds and of every custom resource.
    Subdomain,
    /// An RFC 1123 label, at most 63 characters (Namespaces).
    Label,
    /// Services' names become DNS names that must not look like numbers.
    Dns1035Label,
    /// Anything usable as one URL path segment: not `.` or `..`, without `/` or `%` (RBAC objects
    /// and the review kinds).
    PathSegment,
}

/// One REST resource (a plural under a group/version).
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version served, e.g. `v1`.
    pub version: String,
    /// The resource name in URLs and RBAC rules, e.g. `deployments`.
    pub plural: String,
    /// The singular name discovery lists, e.g. `deployment`.
    pub singular: String,
    /// The Kind of the objects, e.g. `Deployment`.
    pub kind: String,
    /// Whether objects live in a namespace (else the resource is cluster-scoped).
    pub namespaced: bool,
    /// The short names discovery offers kubectl, e.g. `deploy`.
    pub short_names: Vec<String>,
    /// The categories discovery lists (`kubectl get all` uses `all`); from the CRD for custom
    /// resources.
    pub categories: Vec<String>,
    /// Writes to the main resource ignore status; `/status` writes only status.
    pub status_subresource: bool,
    /// Whether `metadata.generation` is kept: 1 on create, bumped when the spec changes and when
    /// deletion starts.
    pub has_generation: bool,
    /// The rule object names must follow.
    pub name_rule: NameRule,
    /// Not stored (e.g. SelfSubjectAccessReview): only `create`.
    pub virtual_create_only: bool,
    /// A custom resource (from a CRD).
    pub custom: bool,
    /// PUT of a missing object creates it (Leases, RBAC objects, Events).
    pub create_on_update: bool,
    /// The CRD version's `openAPIV3Schema` (custom resources only).
    pub schema: Option<Arc<Value>>,
    /// The key the store files the objects under (`group/plural`), shared by every version; see
    /// [`ResourceDef::key`].
    pub storage_key: String,
    /// How objects look on the wire compared with how they are stored.
    pub shape: Shape,
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

/// Every verb a stored resource may serve, in the order discovery lists them.
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

/// The storage key of CustomResourceDefinitions.
pub const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// The storage key of Namespaces (core group, so nothing before the `/`).
pub const NS_KEY: &str = "/namespaces";

impl ResourceDef {
    /// The `apiVersion` of the resource's objects: `group/version`, or just `version` for the core
    /// group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The key the store files the objects under, `group/plural`; every version of a resource
    /// shares it, and `events.k8s.io` Events share core Events'.
    pub fn key(&self) -> &str {
        &self.storage_key
    }

    /// The verbs the resource serves, as discovery lists them (see [`ResourceDef::allows`]).
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

    /// Whether this is core `namespaces`, which have the `finalize` subresource and no
    /// collection delete.
    pub fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.plural == "namespaces"
    }

    /// Whether this is `customresourcedefinitions`, whose writes change the resources served.
    pub fn is_crd(&self) -> bool {
        self.storage_key == CRD_KEY
    }

    /// The namespace under which the store keeps an object of this resource addressed in `ns`:
    /// none for a cluster-scoped one.
    pub fn ns_key<'a>(&self, ns: &'a str) -> &'a str {
        if self.namespaced { ns } else { "" }
    }
}
