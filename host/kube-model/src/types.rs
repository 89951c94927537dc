//! The data model of the WIT `kube` interface.

use std::fmt;

/// Who a call runs as.
///
/// `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Identity {
    /// The caller of the current request, by their bearer token (without the `Bearer ` prefix).
    Caller(String),
    /// The host's own identity (the credentials of the cluster configuration).
    Privileged,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Caller(_) => f.write_str("Caller(<redacted>)"),
            Identity::Privileged => f.write_str("Privileged"),
        }
    }
}

/// The address of one object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// For example `v1`, `batch/v1` or `lethe.dev/v1alpha1`.
    pub api_version: String,
    /// For example `Namespace`, `CronJob`.
    pub kind: String,
    /// The namespace; `None` for cluster-scoped kinds (ignored for them if given).
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl ObjectRef {
    /// An address of `kind` `name` in `namespace` (`None` for cluster-scoped kinds).
    pub fn new(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_string),
            name: name.into(),
        }
    }

    /// An address of a namespaced object.
    pub fn namespaced(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// An address of a cluster-scoped object.
    pub fn cluster(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: None,
            name: name.into(),
        }
    }
}

/// The parts of `metadata` that deletion and reconciliation decide on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// The object's uid (empty if the server sent none).
    pub uid: String,
    /// The opaque resourceVersion, for optimistic concurrency (empty if none).
    pub resource_version: String,
    /// metadata.generation, when the kind has one.
    pub generation: Option<i64>,
    /// RFC 3339 creation time.
    pub creation_timestamp: Option<String>,
    /// RFC 3339 time the deletion was requested; present while the object is being deleted.
    pub deletion_timestamp: Option<String>,
    /// The finalizers still pending, in order.
    pub finalizers: Vec<String>,
    /// Labels as key/value pairs, sorted by key.
    pub labels: Vec<(String, String)>,
    /// Annotations as key/value pairs, sorted by key.
    pub annotations: Vec<(String, String)>,
}

/// Builds a `$to` from the fields of a [`Metadata`]-shaped `$from`, moving each one. The WIT
/// `metadata` record has the same fields, and the host, the wasi-adapter and the guest SDK each
/// generate their own binding of it: this is the one list of those fields, for converting either
/// way.
#[macro_export]
macro_rules! convert_metadata {
    ($from:expr => $to:path) => {{
        let m = $from;
        $to {
            uid: m.uid,
            resource_version: m.resource_version,
            generation: m.generation,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            labels: m.labels,
            annotations: m.annotations,
        }
    }};
}

/// Builds a `$to` from the fields of a [`ListOptions`]-shaped `$from`, moving each one: the one
/// list of the fields of WIT `list-options`, whose binding each side of the boundary generates
/// (see [`convert_metadata!`]).
#[macro_export]
macro_rules! convert_list_options {
    ($from:expr => $to:path) => {{
        let o = $from;
        $to {
            label_selector: o.label_selector,
            field_selector: o.field_selector,
            limit: o.limit,
            continue_token: o.continue_token,
        }
    }};
}

/// Builds a `$to` from the fields of a [`Collection`]-shaped `$from`, moving each one: the one
/// list of the fields of WIT `collection` (see [`convert_metadata!`]).
#[macro_export]
macro_rules! convert_collection {
    ($from:expr => $to:path) => {{
        let c = $from;
        $to {
            api_version: c.api_version,
            kind: c.kind,
            namespace: c.namespace,
            label_selector: c.label_selector,
        }
    }};
}

/// One object as the API server returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Where the object lives.
    pub target: ObjectRef,
    /// Parsed metadata.
    pub metadata: Metadata,
    /// The whole object as JSON text: exactly as served for single-object calls; for list
    /// items, the item's text as served, with `apiVersion` and `kind` added when the server left
    /// them out (as list items usually do).
    pub json: String,
}

/// Options of a list call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// A label selector in Kubernetes syntax, for example `app=web,tier notin (db)`.
    pub label_selector: Option<String>,
    /// A field selector, for example `metadata.name=foo`.
    pub field_selector: Option<String>,
    /// Page size; `None` lists everything in one page.
    pub limit: Option<u32>,
    /// The `continue` token of the previous page.
    pub continue_token: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectList {
    /// The objects of this page.
    pub items: Vec<Object>,
    /// The token for the next page; `None` on the last page.
    pub continue_token: Option<String>,
    /// The list's resourceVersion.
    pub resource_version: String,
}

/// A collection whose changes a component follows (WIT `collection`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Collection {
    /// For example `v1`, `batch/v1`.
    pub api_version: String,
    /// For example `Namespace`, `CronJob`.
    pub kind: String,
    /// One namespace; `None` for every namespace, and for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// Only objects this label selector matches.
    pub label_selector: Option<String>,
}

impl Collection {
    /// Every `kind` object in `namespace` (`None`: in all), with no selector.
    pub fn new(api_version: &str, kind: &str, namespace: Option<&str>) -> Self {
        Collection {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_string),
            label_selector: None,
        }
    }
}

/// What happened to an object (WIT `change-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeType {
    /// Created, or started to match the selector.
    Added,
    /// Changed.
    Modified,
    /// Gone, or stopped matching the selector; the object is its last state.
    Deleted,
}

/// One change to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What happened.
    pub change_type: ChangeType,
    /// The object right after the change.
    pub object: Object,
}

/// Changes since a bookmark, oldest first (WIT `change-batch`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeBatch {
    /// The changes.
    pub changes: Vec<Change>,
    /// Where the next call starts.
    pub bookmark: String,
    /// More changes wait beyond the batch's limit.
    pub more: bool,
}

/// How a patch body is interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchKind {
    /// RFC 7386 JSON merge patch.
    Merge,
    /// RFC 6902 JSON patch; a `test` operation makes it a guarded (retryable) write.
    Json,
    /// Kubernetes strategic merge patch (built-in kinds only).
    StrategicMerge,
}

impl PatchKind {
    /// The request `Content-Type` of this patch kind.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchKind::Merge => "application/merge-patch+json",
            PatchKind::Json => "application/json-patch+json",
            PatchKind::StrategicMerge => "application/strategic-merge-patch+json",
        }
    }
}

/// What happens to dependents (objects whose ownerReferences point at the deleted one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PropagationPolicy {
    /// Delete the owner now; the garbage collector deletes dependents afterwards.
    Background,
    /// Dependents are deleted before the owner disappears.
    Foreground,
    /// Dependents are kept and their ownerReferences removed.
    Orphan,
}

impl PropagationPolicy {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
            PropagationPolicy::Orphan => "Orphan",
        }
    }
}

/// Options of a delete call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Propagation policy; the server's default when `None`.
    pub propagation_policy: Option<PropagationPolicy>,
    /// Delete only if the object's uid is still this one.
    pub precondition_uid: Option<String>,
    /// Delete only if the object's resourceVersion is still this one.
    pub precondition_resource_version: Option<String>,
}

/// What a delete call achieved.
#[allow(clippy::large_enum_variant)] // mirrors the WIT variant; the common case is `Pending`
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The object is gone.
    Deleted,
    /// The object now carries a deletionTimestamp and waits for its finalizers (or dependents);
    /// this is the object as the server returned it.
    Pending(Object),
}

/// The API server's `Status` for a failure it reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// HTTP status code.
    pub code: u16,
    /// The Status `reason`, for example `NotFound`, `AlreadyExists`, `Invalid`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}
