//! Plain-Rust mirror of `lethe:platform/kube`, so that component logic written against the
//! [`Kube`] trait runs natively in unit tests (with a fake) and as wasm (with the host).
//!
//! Identities, addresses, list options, collections and metadata are `lethe-kube-model`'s, the
//! model the host and the wasi-adapter use too. The guest's own [`Object`] parses its JSON only
//! when something reads it.

pub use lethe_kube_model::{ChangeType, Collection, Identity, ListOptions, Metadata, ObjectRef};
use serde_json::Value as Json;
use std::ops::ControlFlow;

/// One object: the metadata decisions are made on, parsed, and the whole object, kept in the form
/// it came in and turned into the other only when something asks for it. An object the host
/// served arrives as JSON text and is parsed on the first [`Object::json`]; a LIST of many objects
/// that are only compared by their metadata is never parsed whole. An object built from a JSON
/// value ([`object_from_json`]) is serialized only on the first [`Object::text`].
#[derive(Debug, Clone, Default)]
pub struct Object {
    /// Where it lives.
    pub target: ObjectRef,
    /// Its metadata, parsed.
    pub metadata: Metadata,
    /// The whole object as JSON text, once it came as text or something read it as text.
    pub(crate) text: std::cell::OnceCell<String>,
    /// The whole object parsed, once it came parsed or something read it parsed.
    pub(crate) parsed: std::cell::OnceCell<Json>,
}

/// Objects are equal when they say the same, whichever form either holds yet.
impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        self.target == other.target
            && self.metadata == other.metadata
            && self.json() == other.json()
    }
}

impl Object {
    /// The whole object, parsed on first use; text that is not JSON reads as `null`.
    pub fn json(&self) -> &Json {
        self.parsed.get_or_init(|| {
            self.text
                .get()
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or(Json::Null)
        })
    }

    /// The whole object as JSON text: exactly as served when the host served it.
    pub fn text(&self) -> &str {
        self.text
            .get_or_init(|| self.parsed.get().map(Json::to_string).unwrap_or_default())
    }

    /// The string at JSON pointer `pointer`, e.g. `/spec/displayName`.
    pub fn str_at(&self, pointer: &str) -> Option<&str> {
        at(self.json(), pointer).and_then(Json::as_str)
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata
            .labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of annotation `key`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// One page of a list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectList {
    /// The objects.
    pub items: Vec<Object>,
    /// The next page's token.
    pub continue_token: Option<String>,
}

/// One change to one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What happened.
    pub change_type: ChangeType,
    /// The object right after it.
    pub object: Object,
}

/// The changes since a bookmark, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeBatch {
    /// The changes.
    pub changes: Vec<Change>,
    /// Where the next call starts.
    pub bookmark: String,
    /// More changes wait: call again with `bookmark` now.
    pub more: bool,
}

/// A patch, by how its body is read.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// JSON merge patch (RFC 7386).
    Merge(Json),
    /// JSON patch (RFC 6902).
    Json(Json),
}

impl Patch {
    /// The JSON patch that sets each of `fields` at the top level of an object, whole.
    pub fn set_fields(fields: &serde_json::Map<String, Json>) -> Patch {
        let escape = |field: &str| field.replace('~', "~0").replace('/', "~1");
        let ops = fields.iter().map(|(field, value)| {
            serde_json::json!({"op": "add", "path": format!("/{}", escape(field)), "value": value})
        });
        Patch::Json(Json::Array(ops.collect()))
    }
}

/// Dependents' fate on delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Garbage-collect dependents afterwards.
    Background,
    /// Delete dependents first.
    Foreground,
    /// Keep dependents.
    Orphan,
}

/// Options of a delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Propagation policy.
    pub propagation: Option<Propagation>,
    /// Delete only this uid.
    pub precondition_uid: Option<String>,
}

/// Where a [`Kube::changes`] call starts, and how many changes it takes at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Since<'a> {
    /// The bookmark an earlier call returned; `None` starts following.
    pub bookmark: Option<&'a str>,
    /// The most changes one answer carries.
    pub max: u32,
}

impl Since<'static> {
    /// Start following: no changes, only the bookmark to start from.
    pub const START: Since<'static> = Since {
        bookmark: None,
        max: 1,
    };
}

/// What a delete achieved.
#[derive(Debug, Clone, PartialEq)]
pub enum Deletion {
    /// The object is gone.
    Done,
    /// Waiting for finalizers; the object as served.
    Pending(Box<Object>),
}

/// What a component is told when the cluster refuses a call of lethe's own privileged identity:
/// its operators must grant a right, which the log names; the caller did nothing wrong and is
/// told nothing of lethe's internals (the CF API answers it `503 CF-ServiceUnavailable`).
pub const OWN_RIGHT_MISSING: &str =
    "lethe is missing a permission it needs for this; its operators' log names it";

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeError {
    /// 404.
    NotFound(String),
    /// 409.
    Conflict(String),
    /// 403.
    Forbidden(String),
    /// 401.
    Unauthorized(String),
    /// 400/422.
    Invalid(String),
    /// 410.
    Gone(String),
    /// Unreachable or failing after retries.
    Unavailable(String),
    /// Timed out.
    Timeout(String),
}

impl std::fmt::Display for KubeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubeError::NotFound(m) => write!(f, "not found: {m}"),
            KubeError::Conflict(m) => write!(f, "conflict: {m}"),
            KubeError::Forbidden(m) => write!(f, "forbidden: {m}"),
            KubeError::Unauthorized(m) => write!(f, "unauthorized: {m}"),
            KubeError::Invalid(m) => write!(f, "invalid: {m}"),
            KubeError::Gone(m) => write!(f, "gone: {m}"),
            KubeError::Unavailable(m) => write!(f, "unavailable: {m}"),
            KubeError::Timeout(m) => write!(f, "timeout: {m}"),
        }
    }
}

/// What a [`Kube`] call answers (a [`KubeError`] unless another error is named).
pub type Result<T, E = KubeError> = std::result::Result<T, E>;

/// The Kubernetes calls component logic makes.
pub trait Kube {
    /// Checks that the cluster accepts `id`'s credentials (`Unauthorized` if not); the host may
    /// answer from a short-lived cache.
    fn authenticate(&self, id: &Identity) -> Result<()>;
    /// Reads one object.
    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object>;
    /// Lists one page of `of`, narrowed by `page`'s selectors (when both `of` and `page` carry a
    /// label selector, an object must match both).
    fn list(&self, id: &Identity, of: &Collection, page: &ListOptions) -> Result<ObjectList>;
    /// Creates an object from JSON.
    fn create(&self, id: &Identity, object: &Json) -> Result<Object>;
    /// Patches an object.
    fn patch(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object>;
    /// Patches an object's `status` subresource (WIT `patch` with `subresource` `status`): only
    /// what the patch says of `status` is written; the server ignores the rest.
    fn patch_status(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object>;
    /// Replaces an object; the body's resourceVersion, when it has one, guards the write.
    fn replace(&self, id: &Identity, target: &ObjectRef, object: &Json) -> Result<Object>;
    /// Deletes an object.
    fn delete(&self, id: &Identity, target: &ObjectRef, how: &DeleteOptions) -> Result<Deletion>;
    /// What changed in `of` since a bookmark (WIT `client.changes`): [`Since::START`] starts
    /// following (no changes, the bookmark to start from; read the collection after); `Gone`
    /// means read it all again and start over.
    fn changes(&self, id: &Identity, of: &Collection, since: Since<'_>) -> Result<ChangeBatch>;

    /// Lists page by page, handing each page to `each` before the next is asked for, so that a
    /// large collection is never held whole (`options.limit` sets the page size; without one
    /// the server may answer everything at once). `each` stops the listing with `Break`.
    fn list_pages(
        &self,
        id: &Identity,
        of: &Collection,
        options: &ListOptions,
        each: &mut dyn FnMut(Vec<Object>) -> ControlFlow<()>,
    ) -> Result<()> {
        let mut options = options.clone();
        loop {
            let page = self.list(id, of, &options)?;
            if each(page.items).is_break() {
                return Ok(());
            }
            match page.continue_token {
                Some(token) if !token.is_empty() => options.continue_token = Some(token),
                _ => return Ok(()),
            }
        }
    }

    /// Lists every page.
    fn list_all(
        &self,
        id: &Identity,
        of: &Collection,
        options: &ListOptions,
    ) -> Result<Vec<Object>> {
        let mut items = Vec::new();
        self.list_pages(id, of, options, &mut |page| {
            items.extend(page);
            ControlFlow::Continue(())
        })?;
        Ok(items)
    }
}

/// What a SelfSubjectAccessReview asks: may the asker do `verb` on `resource` (the plural, as
/// RBAC rules name it: `deployments`) of API `group` (`""` for the core group, `apps`) in
/// `namespace` (`None`: cluster-wide)? As `kubectl auth can-i` asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access<'a> {
    /// `get`, `list`, `create`, `update`, `delete`...
    pub verb: &'a str,
    /// The API group.
    pub group: &'a str,
    /// The resource, plural.
    pub resource: &'a str,
    /// The namespace.
    pub namespace: Option<&'a str>,
}

/// Whether `who` may do what `access` names, answered by the cluster's own authorizer (RBAC)
/// through a SelfSubjectAccessReview made as `who`. For a component that acts later, with its
/// own identity, on what a caller asked for: the caller's right is checked now. An answer that
/// says nothing of `allowed` is a refusal (fail closed).
///
/// ```
/// # use lethe_guest::kube::{Access, Identity, Kube, may};
/// # fn check(kube: &dyn Kube, token: String) -> lethe_guest::kube::Result<()> {
/// let deploy = Access { verb: "create", group: "apps", resource: "deployments", namespace: Some("team") };
/// if !may(kube, &Identity::Caller(token), &deploy)? {
///     // answer 403
/// }
/// # Ok(()) }
/// ```
pub fn may(kube: &dyn Kube, who: &Identity, access: &Access<'_>) -> Result<bool> {
    let mut attributes = serde_json::json!({
        "verb": access.verb,
        "group": access.group,
        "resource": access.resource,
    });
    if let Some(namespace) = access.namespace {
        attributes["namespace"] = namespace.into();
    }
    let review = kube.create(
        who,
        &serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": { "resourceAttributes": attributes },
        }),
    )?;
    Ok(review.json().pointer("/status/allowed") == Some(&Json::Bool(true)))
}

/// `page` with `of`'s label selector added to its own: what a [`Kube::list`] of `of` asks for.
pub fn narrowed(of: &Collection, page: &ListOptions) -> ListOptions {
    let label_selector = match (&of.label_selector, &page.label_selector) {
        (Some(a), Some(b)) => Some(format!("{a},{b}")),
        (a, b) => a.clone().or_else(|| b.clone()),
    };
    ListOptions {
        label_selector,
        ..page.clone()
    }
}

/// A [`Kube`] whose calls all go to another one: a wrapper that counts or watches the calls, or a
/// test host that bundles a cluster. It names where each call goes ([`KubeVia::via`] runs once
/// per call) and gets every [`Kube`] method from that.
pub trait KubeVia {
    /// Where this call goes.
    fn via(&self) -> &dyn Kube;
}

impl<T: KubeVia> Kube for T {
    fn authenticate(&self, id: &Identity) -> Result<()> {
        self.via().authenticate(id)
    }
    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object> {
        self.via().get(id, target)
    }
    fn list(&self, id: &Identity, of: &Collection, page: &ListOptions) -> Result<ObjectList> {
        self.via().list(id, of, page)
    }
    fn create(&self, id: &Identity, object: &Json) -> Result<Object> {
        self.via().create(id, object)
    }
    fn patch(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object> {
        self.via().patch(id, target, patch)
    }
    fn patch_status(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object> {
        self.via().patch_status(id, target, patch)
    }
    fn replace(&self, id: &Identity, target: &ObjectRef, object: &Json) -> Result<Object> {
        self.via().replace(id, target, object)
    }
    fn delete(&self, id: &Identity, target: &ObjectRef, how: &DeleteOptions) -> Result<Deletion> {
        self.via().delete(id, target, how)
    }
    fn changes(&self, id: &Identity, of: &Collection, since: Since<'_>) -> Result<ChangeBatch> {
        self.via().changes(id, of, since)
    }
}

/// The value at JSON pointer `pointer` (RFC 6901), as [`Json::pointer`] finds it, without the
/// string it allocates for every step of the path: metadata is read this way on every object a
/// fake cluster serves and every object the simulator checks.
pub fn at<'a>(json: &'a Json, pointer: &str) -> Option<&'a Json> {
    let Some(path) = pointer.strip_prefix('/') else {
        return pointer.is_empty().then_some(json);
    };
    path.split('/').try_fold(json, |node, token| {
        let escaped;
        let token = if token.contains('~') {
            escaped = token.replace("~1", "/").replace("~0", "~");
            escaped.as_str()
        } else {
            token
        };
        match node {
            Json::Object(map) => map.get(token),
            Json::Array(items) => {
                // RFC 6901: an index is digits only, with no leading zero.
                let digits = token.bytes().all(|b| b.is_ascii_digit());
                let leading_zero = token.len() > 1 && token.starts_with('0');
                if !digits || leading_zero {
                    return None;
                }
                items.get(token.parse::<usize>().ok()?)
            }
            _ => None,
        }
    })
}

/// Whether `live` holds everything `desired` sets: objects field by field (a field the API
/// server or another writer added is left out of the comparison), anything else equal. What a
/// reconciler judges drift by, on the object's content rather than on a mark it wrote.
///
/// ```
/// use lethe_guest::kube::holds;
/// use serde_json::json;
///
/// let live = json!({"data": {"a": "1", "added": "by someone"}, "immutable": false});
/// assert!(holds(&live, &json!({"data": {"a": "1"}})));
/// assert!(!holds(&live, &json!({"data": {"a": "2"}})));
/// assert!(!holds(&live, &json!({"missing": true})));
/// ```
pub fn holds(live: &Json, desired: &Json) -> bool {
    match (live, desired) {
        (Json::Object(live), Json::Object(desired)) => desired
            .iter()
            .all(|(k, v)| live.get(k).is_some_and(|l| holds(l, v))),
        _ => live == desired,
    }
}

/// Whether `s` is a name the API server takes for a namespace (a DNS-1123 label), checked by
/// the rules the embedded API server applies.
pub fn is_dns_label(s: &str) -> bool {
    lethe_kube_rules::validation::dns1123_label(s).is_empty()
}

/// Whether `s` is a name the API server takes for most kinds (a DNS-1123 subdomain).
pub fn is_dns_subdomain(s: &str) -> bool {
    lethe_kube_rules::validation::dns1123_subdomain(s).is_empty()
}

/// Builds an [`Object`] from its JSON, reading the metadata it carries.
pub fn object_from_json(json: Json) -> Object {
    let s = |p: &str| at(&json, p).and_then(Json::as_str).map(str::to_string);
    let target = ObjectRef {
        api_version: s("/apiVersion").unwrap_or_default(),
        kind: s("/kind").unwrap_or_default(),
        namespace: s("/metadata/namespace"),
        name: s("/metadata/name").unwrap_or_default(),
    };
    Object {
        target,
        metadata: lethe_kube_model::parse::metadata(&json),
        text: std::cell::OnceCell::new(),
        parsed: std::cell::OnceCell::from(json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(label_selector: Option<&str>) -> ListOptions {
        ListOptions {
            label_selector: label_selector.map(str::to_string),
            limit: Some(7),
            ..ListOptions::default()
        }
    }

    #[test]
    fn a_pointer_finds_what_serde_json_finds() {
        let doc = serde_json::json!({
            "metadata": {"name": "n", "annotations": {"lethe.dev/holder": "h", "a~b": 1}},
            "items": [{"x": 1}, {"x": 2}],
            "": {"": "empty keys"},
        });
        for pointer in [
            "",
            "/",
            "//",
            "/metadata/name",
            "/metadata/annotations/lethe.dev~1holder",
            "/metadata/annotations/a~0b",
            "/items/1/x",
            "/items/01/x",
            "/items/+1/x",
            "/items/2",
            "/metadata/name/deeper",
            "/missing",
            "metadata",
        ] {
            assert_eq!(at(&doc, pointer), doc.pointer(pointer), "{pointer}");
        }
    }

    #[test]
    fn a_list_of_a_selected_collection_asks_for_both_selectors() {
        let mut of = Collection::new("v1", "ConfigMap", Some("a"));
        assert_eq!(narrowed(&of, &page(None)), page(None));
        assert_eq!(narrowed(&of, &page(Some("x=1"))), page(Some("x=1")));
        of.label_selector = Some("app=web".into());
        assert_eq!(narrowed(&of, &page(None)), page(Some("app=web")));
        assert_eq!(
            narrowed(&of, &page(Some("x in (1,2)"))),
            page(Some("app=web,x in (1,2)"))
        );
    }
}

#[cfg(test)]
#[cfg(feature = "fake")]
mod access_tests {
    use super::*;
    use crate::fake::FakeCluster;

    #[test]
    fn the_cluster_answers_what_a_caller_may_do_per_verb_and_namespace() {
        let cluster = FakeCluster::new();
        cluster.grant("alice", "create", "ConfigMap", "team");
        let access = |verb, namespace| Access {
            verb,
            group: "",
            resource: "configmaps",
            namespace: Some(namespace),
        };
        let alice = Identity::Caller("alice".into());
        assert_eq!(may(&cluster, &alice, &access("create", "team")), Ok(true));
        assert_eq!(may(&cluster, &alice, &access("delete", "team")), Ok(false));
        assert_eq!(may(&cluster, &alice, &access("create", "other")), Ok(false));
        assert_eq!(
            may(
                &cluster,
                &Identity::Caller("bad".into()),
                &access("create", "team")
            )
            .map_err(|e| matches!(e, KubeError::Unauthorized(_))),
            Err(true),
            "a token the cluster rejects is not a refusal but an error"
        );
    }
}
