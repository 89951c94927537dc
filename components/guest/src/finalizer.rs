//! A reconciler's finalizer, as kube-runtime's `finalizer()` and controller-runtime's
//! `AddFinalizer` / `RemoveFinalizer` keep one: an object the reconciler owns carries its
//! finalizer, so that its deletion waits until the reconciler has cleaned up after it.
//!
//! | being deleted | finalizer present | [`Case`]       | what the reconciler does |
//! |---------------|-------------------|----------------|--------------------------|
//! | no            | no                | `Add`          | add it ([`add_patch`]), and reconcile on the change that makes |
//! | no            | yes               | `Apply`        | make the world match the object |
//! | yes           | yes               | `Cleanup`      | clean up, then remove it ([`remove_patch`]) |
//! | yes           | no                | `Done`         | nothing: others' finalizers hold it, and they are not ours |
//!
//! Both patches are JSON patches that `test` before they write, so a finalizer list changed
//! meanwhile makes them fail (and the next visit decides again) rather than drop another
//! controller's entry.

use serde_json::{Value as Json, json};

use crate::kube::{Object, Patch};

/// Which of the four cases an object is in, for the finalizer `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// Not being deleted and without the finalizer: add it.
    Add,
    /// Not being deleted, with the finalizer: apply.
    Apply,
    /// Being deleted, with the finalizer at this index: clean up, then remove it.
    Cleanup(usize),
    /// Being deleted without the finalizer: nothing is ours to do.
    Done,
}

/// The case `object` is in for the finalizer `name`.
pub fn case(object: &Object, name: &str) -> Case {
    let deleting = object.metadata.deletion_timestamp.is_some();
    let at = object.metadata.finalizers.iter().position(|f| f == name);
    match (deleting, at) {
        (false, None) => Case::Add,
        (false, Some(_)) => Case::Apply,
        (true, Some(index)) => Case::Cleanup(index),
        (true, None) => Case::Done,
    }
}

/// The patch that adds `name` to `object`'s finalizers, guarded by the resourceVersion read: if
/// the object changed meanwhile, the patch fails and the next visit decides again.
pub fn add_patch(object: &Object, name: &str) -> Patch {
    let guard = json!({
        "op": "test", "path": "/metadata/resourceVersion",
        "value": object.metadata.resource_version,
    });
    Patch::Json(Json::Array(vec![guard, add_op(object, name)]))
}

/// The JSON patch operation that adds `name` to `object`'s finalizers, unguarded: for a writer
/// that adds its own guard (`controller::Context::patch`).
pub fn add_op(object: &Object, name: &str) -> Json {
    let listed = object.json().pointer("/metadata/finalizers");
    if listed.is_some_and(Json::is_array) {
        json!({ "op": "add", "path": "/metadata/finalizers/-", "value": name })
    } else {
        json!({ "op": "add", "path": "/metadata/finalizers", "value": [name] })
    }
}

/// The patch that removes `name`, found at `index`: it `test`s that the entry at `index` is still
/// `name`, so another finalizer is never removed.
pub fn remove_patch(index: usize, name: &str) -> Patch {
    let path = format!("/metadata/finalizers/{index}");
    Patch::Json(json!([
        { "op": "test", "path": path, "value": name },
        { "op": "remove", "path": path },
    ]))
}

/// Whether `object`'s finalizers are `name` alone: removing it lets the object go.
pub fn is_last(object: &Object, name: &str) -> bool {
    object.metadata.finalizers.iter().all(|f| f == name)
}

#[cfg(test)]
#[cfg(feature = "fake")]
mod tests {
    use super::*;
    use crate::fake::{FakeCluster, FakeHost};
    use crate::kube::{Identity, Kube, KubeError};

    const MINE: &str = "example.com/mine";

    fn put(host: &FakeHost<'_>, finalizers: Json) -> Object {
        host.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "finalizers": finalizers}}))
    }

    #[test]
    fn the_four_cases() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        let bare = put(&host, json!([]));
        assert_eq!(case(&bare, MINE), Case::Add);
        let held = put(&host, json!(["theirs", MINE]));
        assert_eq!(case(&held, MINE), Case::Apply);
        host.delete(&Identity::Privileged, &held.target, &Default::default())
            .expect("delete");
        let deleting = cluster.object("ConfigMap", "n", "c").expect("held");
        assert_eq!(case(&deleting, MINE), Case::Cleanup(1));
        assert!(!is_last(&deleting, MINE));
        host.patch(
            &Identity::Privileged,
            &deleting.target,
            &remove_patch(1, MINE),
        )
        .expect("removed");
        let theirs = cluster
            .object("ConfigMap", "n", "c")
            .expect("theirs hold it");
        assert_eq!(theirs.metadata.finalizers, vec!["theirs".to_string()]);
        assert_eq!(case(&theirs, MINE), Case::Done);
        assert!(!is_last(&theirs, MINE), "theirs still hold it");
        let only_mine = put(&host, json!([MINE]));
        assert!(is_last(&only_mine, MINE), "removing it lets the object go");
        assert!(is_last(&put(&host, json!([])), MINE), "nothing holds it");
    }

    #[test]
    fn adding_is_refused_when_the_object_changed_since_it_was_read() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        let read = put(&host, json!(null));
        let patch = add_patch(&read, MINE);
        host.patch(
            &Identity::Privileged,
            &read.target,
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .expect("someone else writes");
        assert!(matches!(
            host.patch(&Identity::Privileged, &read.target, &patch),
            Err(KubeError::Invalid(_))
        ));
        let now = cluster.object("ConfigMap", "n", "c").expect("there");
        host.patch(&Identity::Privileged, &now.target, &add_patch(&now, MINE))
            .expect("added");
        let added = cluster.object("ConfigMap", "n", "c").expect("there");
        assert_eq!(added.metadata.finalizers, vec![MINE.to_string()]);
    }

    #[test]
    fn removing_never_takes_another_entry() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        let o = put(&host, json!([MINE, "theirs"]));
        // Another controller reordered the list after it was read: index 0 is theirs now.
        cluster.edit("ConfigMap", "n", "c", |v| {
            v["metadata"]["finalizers"] = json!(["theirs", MINE]);
        });
        assert!(
            host.patch(&Identity::Privileged, &o.target, &remove_patch(0, MINE))
                .is_err()
        );
        let kept = cluster.object("ConfigMap", "n", "c").expect("there");
        assert_eq!(
            kept.metadata.finalizers,
            vec!["theirs".to_string(), MINE.to_string()]
        );
    }
}
