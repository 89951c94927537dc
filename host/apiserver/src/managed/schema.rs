//! Which lists of a kind are associative (items keyed by fields), sets, or atomic, and how an
//! item of each is named in a field path.

use serde_json::{Map, Value, json};

/// A path of fieldsV1 elements (`f:spec`, `k:{"name":"a"}`, `v:"x"`).
pub type FieldPath = Vec<String>;

/// How a list merges and is owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced and owned as a whole.
    Atomic,
    /// A set of scalars, each owned on its own (`v:`).
    Set,
    /// Objects identified by these fields, each owned on its own (`k:`).
    Map(Vec<String>),
}

/// What field ownership needs to know of a kind's schema: which lists are associative (from the
/// CRD's schema, or a table of the built-in kinds' list types), and which fields a new object
/// already has before a write sets anything.
#[derive(Debug, Clone, Copy)]
pub struct KindSchema<'a> {
    /// The kind's storage key (e.g. `/services`), for the built-in table.
    pub(super) key: &'a str,
    /// The custom resource's `openAPIV3Schema`.
    pub(super) schema: Option<&'a Value>,
    /// Whether the kind is a custom resource (its lists are atomic unless its schema says
    /// otherwise).
    pub(super) custom: bool,
}

pub(super) const CONTAINER_LISTS: &[&str] =
    &["containers", "initContainers", "ephemeralContainers"];

impl<'a> KindSchema<'a> {
    /// The schema of the objects of `def`.
    pub fn of(def: &'a crate::resources::ResourceDef) -> KindSchema<'a> {
        KindSchema {
            key: def.key(),
            schema: def.schema.as_deref(),
            custom: def.custom,
        }
    }

    /// Every list atomic.
    #[cfg(test)]
    pub fn atomic() -> KindSchema<'static> {
        KindSchema {
            key: "",
            schema: None,
            custom: true,
        }
    }

    /// The kind of the list at `path`.
    pub fn kind(&self, path: &[String]) -> ListKind {
        let names: Vec<&str> = path.iter().filter_map(|s| s.strip_prefix("f:")).collect();
        if self.custom {
            return self.schema_kind(&names);
        }
        let keys = |k: &[&str]| ListKind::Map(k.iter().map(|s| s.to_string()).collect());
        match names.as_slice() {
            ["metadata", "finalizers"] => ListKind::Set,
            ["metadata", "ownerReferences"] => keys(&["uid"]),
            [.., c, "env"] if CONTAINER_LISTS.contains(c) => keys(&["name"]),
            [.., c, "ports"] if CONTAINER_LISTS.contains(c) => keys(&["containerPort", "protocol"]),
            [.., c, "volumeMounts"] if CONTAINER_LISTS.contains(c) => keys(&["mountPath"]),
            [.., c, "volumeDevices"] if CONTAINER_LISTS.contains(c) => keys(&["devicePath"]),
            [.., "spec", c] if CONTAINER_LISTS.contains(c) => keys(&["name"]),
            [.., "spec", "volumes" | "imagePullSecrets"] => keys(&["name"]),
            [.., "spec", "hostAliases"] => keys(&["ip"]),
            ["spec", "ports"] if self.key == crate::kinds::service::SERVICES_KEY => {
                keys(&["port", "protocol"])
            }
            ["spec", "versions"] if self.key == crate::resources::CRD_KEY => keys(&["name"]),
            _ => ListKind::Atomic,
        }
    }

    /// The struct-typed fields of the kind's Go zero value, which every object has before a
    /// write sets anything (so a create does not make its writer own them as members, as
    /// structured-merge-diff compares a create with the zero value). Maps, lists and pointers
    /// are absent from a zero value, and custom resources start empty.
    pub(super) fn zero(&self) -> Value {
        if self.custom {
            return json!({});
        }
        // `containers` has no `omitempty`: a zero PodSpec has it, as null.
        let pod_spec = json!({"containers": null});
        let template = json!({"metadata": {}, "spec": pod_spec});
        match self.key {
            "/namespaces" => json!({"spec": {}, "status": {}}),
            crate::kinds::service::SERVICES_KEY => {
                json!({"spec": {}, "status": {"loadBalancer": {}}})
            }
            "batch/cronjobs" => json!({
                "spec": {"jobTemplate": {"metadata": {}, "spec": {"template": template}}},
                "status": {},
            }),
            "coordination.k8s.io/leases" => json!({"spec": {}}),
            "rbac.authorization.k8s.io/rolebindings"
            | "rbac.authorization.k8s.io/clusterrolebindings" => json!({"roleRef": {}}),
            crate::shape::EVENTS_KEY => json!({"involvedObject": {}, "source": {}}),
            crate::resources::CRD_KEY => json!({
                "spec": {"names": {}},
                "status": {"acceptedNames": {}},
            }),
            _ => json!({}),
        }
    }

    fn schema_kind(&self, names: &[&str]) -> ListKind {
        let mut s = match self.schema {
            Some(s) => s,
            None => return ListKind::Atomic,
        };
        for (i, name) in names.iter().enumerate() {
            s = &s["properties"][*name];
            // A list's items are the next level down.
            if i + 1 < names.len() && s["type"] == "array" {
                s = &s["items"];
            }
        }
        match s["x-kubernetes-list-type"].as_str() {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys = crate::util::string_list(&s["x-kubernetes-list-map-keys"]);
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }
}

/// The `k:` element of an associative list's item, or None when it lacks a key (then the list
/// is treated as atomic). `protocol` defaults to TCP, as the schemas default it.
pub(super) fn key_element(item: &Value, keys: &[String]) -> Option<String> {
    let mut fields = Map::new();
    for k in keys {
        match item.get(k) {
            Some(v) if !v.is_null() => {
                fields.insert(k.clone(), v.clone());
            }
            _ if k == "protocol" => {
                fields.insert(k.clone(), json!("TCP"));
            }
            _ => return None,
        }
    }
    Some(format!("k:{}", Value::Object(fields)))
}

pub(super) fn value_element(v: &Value) -> String {
    format!("v:{v}")
}

/// The elements of a list's items, when the list is associative and every item can be named.
pub(super) fn list_elements(items: &[Value], kind: &ListKind) -> Option<Vec<String>> {
    match kind {
        ListKind::Atomic => None,
        ListKind::Set => Some(items.iter().map(value_element).collect()),
        ListKind::Map(keys) => items.iter().map(|i| key_element(i, keys)).collect(),
    }
}
