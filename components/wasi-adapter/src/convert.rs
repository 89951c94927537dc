//! The WIT types of `lethe:platform/kube` and the shared model ([`lethe_kube_model`]) the adapter's
//! logic works on: field for field the same shapes, converted at the export boundary.

use crate::bindings::exports::lethe::platform::kube as wit;
use lethe_kube_model as model;

impl From<wit::Identity> for model::Identity {
    fn from(identity: wit::Identity) -> Self {
        match identity {
            wit::Identity::Caller(token) => model::Identity::Caller(token),
            wit::Identity::Privileged => model::Identity::Privileged,
        }
    }
}

impl From<wit::ObjectRef> for model::ObjectRef {
    fn from(r: wit::ObjectRef) -> Self {
        model::ObjectRef {
            api_version: r.api_version,
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
        }
    }
}

impl From<model::ObjectRef> for wit::ObjectRef {
    fn from(r: model::ObjectRef) -> Self {
        wit::ObjectRef {
            api_version: r.api_version,
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
        }
    }
}

impl From<wit::ListOptions> for model::ListOptions {
    fn from(o: wit::ListOptions) -> Self {
        lethe_kube_model::convert_list_options!(o => model::ListOptions)
    }
}

impl From<wit::PatchKind> for model::PatchKind {
    fn from(kind: wit::PatchKind) -> Self {
        match kind {
            wit::PatchKind::Merge => model::PatchKind::Merge,
            wit::PatchKind::Json => model::PatchKind::Json,
            wit::PatchKind::StrategicMerge => model::PatchKind::StrategicMerge,
        }
    }
}

impl From<wit::DeleteOptions> for model::DeleteOptions {
    fn from(o: wit::DeleteOptions) -> Self {
        model::DeleteOptions {
            propagation_policy: o.propagation_policy.map(|p| match p {
                wit::PropagationPolicy::Background => model::PropagationPolicy::Background,
                wit::PropagationPolicy::Foreground => model::PropagationPolicy::Foreground,
                wit::PropagationPolicy::Orphan => model::PropagationPolicy::Orphan,
            }),
            precondition_uid: o.precondition_uid,
            precondition_resource_version: o.precondition_resource_version,
        }
    }
}

impl From<model::Object> for wit::Object {
    fn from(o: model::Object) -> Self {
        wit::Object {
            target: o.target.into(),
            metadata: lethe_kube_model::convert_metadata!(o.metadata => wit::Metadata),
            json: o.json,
        }
    }
}

impl From<model::ObjectList> for wit::ObjectList {
    fn from(l: model::ObjectList) -> Self {
        wit::ObjectList {
            items: l.items.into_iter().map(Into::into).collect(),
            continue_token: l.continue_token,
            resource_version: l.resource_version,
        }
    }
}

impl From<wit::Collection> for model::Collection {
    fn from(c: wit::Collection) -> Self {
        lethe_kube_model::convert_collection!(c => model::Collection)
    }
}

impl From<model::ChangeBatch> for wit::ChangeBatch {
    fn from(b: model::ChangeBatch) -> Self {
        wit::ChangeBatch {
            changes: b
                .changes
                .into_iter()
                .map(|c| wit::Change {
                    type_: match c.change_type {
                        model::ChangeType::Added => wit::ChangeType::Added,
                        model::ChangeType::Modified => wit::ChangeType::Modified,
                        model::ChangeType::Deleted => wit::ChangeType::Deleted,
                    },
                    object: c.object.into(),
                })
                .collect(),
            bookmark: b.bookmark,
            more: b.more,
        }
    }
}

impl From<model::DeleteOutcome> for wit::DeleteOutcome {
    fn from(outcome: model::DeleteOutcome) -> Self {
        match outcome {
            model::DeleteOutcome::Deleted => wit::DeleteOutcome::Deleted,
            model::DeleteOutcome::Pending(o) => wit::DeleteOutcome::Pending(o.into()),
        }
    }
}

fn status(s: model::Status) -> wit::Status {
    wit::Status {
        code: s.code,
        reason: s.reason,
        message: s.message,
    }
}

impl From<model::KubeError> for wit::Error {
    fn from(e: model::KubeError) -> Self {
        use model::KubeError as K;
        match e {
            K::NotFound(s) => wit::Error::NotFound(status(s)),
            K::Conflict(s) => wit::Error::Conflict(status(s)),
            K::Forbidden(s) => wit::Error::Forbidden(status(s)),
            K::Unauthorized(s) => wit::Error::Unauthorized(status(s)),
            K::Invalid(s) => wit::Error::Invalid(status(s)),
            K::Gone(s) => wit::Error::Gone(status(s)),
            K::Unavailable(m) => wit::Error::Unavailable(m),
            K::Timeout(m) => wit::Error::Timeout(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_and_errors_cross_the_boundary_whole() {
        let object = model::Object {
            target: model::ObjectRef::namespaced("v1", "ConfigMap", "ns", "c"),
            metadata: model::Metadata {
                uid: "u".into(),
                resource_version: "7".into(),
                generation: Some(2),
                creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
                deletion_timestamp: Some("2026-01-02T00:00:00Z".into()),
                finalizers: vec!["f".into()],
                labels: vec![("a".into(), "b".into())],
                annotations: vec![("c".into(), "d".into())],
            },
            json: "{}".into(),
        };
        let wit::DeleteOutcome::Pending(w) =
            wit::DeleteOutcome::from(model::DeleteOutcome::Pending(object.clone()))
        else {
            panic!("pending stays pending");
        };
        assert_eq!(model::ObjectRef::from(w.target), object.target);
        assert_eq!(w.metadata.generation, Some(2));
        assert_eq!(w.metadata.finalizers, vec!["f".to_string()]);
        assert_eq!(w.metadata.annotations, object.metadata.annotations);
        let gone = model::KubeError::Gone(model::Status {
            code: 410,
            reason: "Expired".into(),
            message: "m".into(),
        });
        assert!(matches!(wit::Error::from(gone), wit::Error::Gone(s) if s.code == 410));
        assert_eq!(
            wit::Error::from(model::KubeError::Timeout("t".into())),
            wit::Error::Timeout("t".into())
        );
    }
}
