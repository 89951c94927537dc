//! A strategic-merge-patch approximation; JSON merge patch (RFC 7386) and JSON patch (RFC 6902)
//! are `lethe-kube-model`'s, shared with the guest SDK's fake cluster.

pub use lethe_kube_rules::patch::{json_patch, merge_patch};
use serde_json::Value;

const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

/// The patch merge key (`patchMergeKey` with `patchStrategy: merge` in the Go types) of the list
/// at `path` (dotted field names, list items not counted) in objects stored under `kind_key`,
/// for the kinds this server serves. Every other list is atomic: a patch replaces it, as the
/// real server replaces lists without a patch strategy (RBAC subjects and rules among them).
fn merge_key(kind_key: &str, path: &str) -> Option<&'static str> {
    let segments: Vec<&str> = path.split('.').collect();
    match segments.as_slice() {
        ["metadata", "ownerReferences"] => Some("uid"),
        [.., c, "env"] if CONTAINER_LISTS.contains(c) => Some("name"),
        [.., c, "ports"] if CONTAINER_LISTS.contains(c) => Some("containerPort"),
        [.., c, "volumeMounts"] if CONTAINER_LISTS.contains(c) => Some("mountPath"),
        [.., c, "volumeDevices"] if CONTAINER_LISTS.contains(c) => Some("devicePath"),
        [.., "spec", c] if CONTAINER_LISTS.contains(c) => Some("name"),
        [.., "spec", "volumes" | "imagePullSecrets"] => Some("name"),
        [.., "spec", "hostAliases"] => Some("ip"),
        ["spec", "ports"] if kind_key == crate::kinds::service::SERVICES_KEY => Some("port"),
        ["status", "conditions"] if kind_key == "/namespaces" => Some("type"),
        _ => None,
    }
}

/// Strategic merge patch of an object stored under `kind_key`: maps merge like a merge patch,
/// lists with a patch merge key in the kind's Go types merge by that key, and the directives
/// `$patch`, `$setElementOrder/…`, `$deleteFromPrimitiveList/…` and `$retainKeys` are honoured;
/// other lists are replaced.
pub fn strategic_merge(target: &mut Value, patch: &Value, kind_key: &str) {
    smp(target, patch, "", kind_key);
}

fn smp(target: &mut Value, patch: &Value, path: &str, kind_key: &str) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = stripped(patch);
        return;
    }
    if p.get("$patch").and_then(Value::as_str) == Some("delete") {
        *target = Value::Null;
        return;
    }
    let t = crate::util::ensure_obj(target);
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()) || p.contains_key(k));
    }
    for (k, v) in p {
        if k.starts_with('$') {
            if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/")
                && let (Some(Value::Array(cur)), Value::Array(del)) = (t.get_mut(field), v)
            {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let child = crate::validation::field_path(path, k);
        match (t.get_mut(k), v) {
            // metadata.finalizers has patchStrategy "merge": a union of primitives.
            (Some(Value::Array(cur)), Value::Array(items)) if child == "metadata.finalizers" => {
                for item in items {
                    if !cur.contains(item) {
                        cur.push(item.clone());
                    }
                }
            }
            (Some(Value::Array(cur)), Value::Array(items)) => {
                let key = merge_key(kind_key, &child)
                    .filter(|mk| cur.iter().all(|c| c.get(*mk).is_some()));
                match key {
                    Some(mk) => {
                        for item in items {
                            let id = item[mk].clone();
                            let delete =
                                item.get("$patch").and_then(Value::as_str) == Some("delete");
                            let pos = cur.iter().position(|c| c[mk] == id);
                            match (pos, delete) {
                                (Some(i), true) => {
                                    cur.remove(i);
                                }
                                (None, true) => {}
                                (Some(i), false) => smp(&mut cur[i], item, &child, kind_key),
                                (None, false) => cur.push(stripped(item)),
                            }
                        }
                        if let Some(Value::Array(order)) = p.get(&format!("$setElementOrder/{k}")) {
                            let mut sorted = vec![];
                            for o in order {
                                if let Some(i) = cur.iter().position(|c| c[mk] == o[mk]) {
                                    sorted.push(cur.remove(i));
                                }
                            }
                            sorted.append(cur);
                            *cur = sorted;
                        }
                    }
                    None => *cur = items.iter().map(stripped).collect(),
                }
            }
            (Some(existing @ Value::Object(_)), Value::Object(_)) => {
                smp(existing, v, &child, kind_key);
                if existing.is_null() {
                    t.remove(k);
                }
            }
            _ => {
                t.insert(k.clone(), stripped(v));
            }
        }
    }
}

/// `v` without the patch directives (`$`-keys) anywhere in it.
fn stripped(v: &Value) -> Value {
    let mut v = v.clone();
    strip_directives(&mut v);
    v
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            for x in m.values_mut() {
                strip_directives(x);
            }
        }
        Value::Array(a) => {
            for x in a {
                strip_directives(x);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_unions_finalizers_but_replaces_other_primitive_lists() {
        let mut d = json!({"metadata": {"finalizers": ["a"]}, "spec": {"finalizers": ["x"], "args": ["1"]}});
        strategic_merge(
            &mut d,
            &json!({"metadata": {"finalizers": ["b"]}, "spec": {"finalizers": ["y"], "args": ["2"]}}),
            "/namespaces",
        );
        assert_eq!(
            d,
            json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"finalizers": ["y"], "args": ["2"]}})
        );
        strategic_merge(
            &mut d,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
            "/namespaces",
        );
        assert_eq!(d["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn strategic_merges_named_lists() {
        let mut d = json!({"spec": {"containers": [{"name": "a", "image": "1", "args": ["x"]}, {"name": "b", "image": "2"}]}});
        strategic_merge(
            &mut d,
            &json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                     "containers": [{"name": "a", "image": "3"}]}}),
            "apps/deployments",
        );
        assert_eq!(
            d,
            json!({"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "a", "image": "3", "args": ["x"]}]}})
        );
    }

    #[test]
    fn service_ports_merge_on_port_and_binding_subjects_are_replaced() {
        // kubectl apply after the https port was removed from the manifest.
        let mut svc = json!({"spec": {"ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80},
            {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443},
        ]}});
        strategic_merge(
            &mut svc,
            &json!({"spec": {"$setElementOrder/ports": [{"port": 80}],
                             "ports": [{"$patch": "delete", "port": 443}]}}),
            crate::kinds::service::SERVICES_KEY,
        );
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}])
        );
        // Subjects have no patch strategy: the patch's list is the new list.
        let mut binding = json!({"subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"}]});
        strategic_merge(
            &mut binding,
            &json!({"subjects": [{"kind": "User", "name": "alice"}]}),
            "rbac.authorization.k8s.io/rolebindings",
        );
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "User", "name": "alice"}])
        );
    }
}
