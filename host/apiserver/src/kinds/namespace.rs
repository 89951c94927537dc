//! Namespaces: their spec finalizers and what an update may change.

use crate::status::{ApiError, Cause};
use crate::store::Obj;
use crate::util::{meta_mut, string_list};
use crate::validation;
use crate::verbs::Sub;
use serde_json::{Value, json};

/// Label keys and values, as the real server validates them.
/// `validateFinalizerName` for each of a namespace's spec finalizers, reported at `field(i)`.
pub(crate) fn namespace_finalizer_causes(
    finalizers: &[String],
    field: impl Fn(usize) -> String,
) -> Vec<Cause> {
    let mut causes = vec![];
    for (i, f) in finalizers.iter().enumerate() {
        let mut msgs = validation::qualified_name(f);
        if !f.contains('/') && !matches!(f.as_str(), "kubernetes" | "orphan" | "foregroundDeletion")
        {
            msgs.push("name is neither a standard finalizer name nor is it fully qualified".into());
        }
        causes.extend(validation::invalid_causes(&field(i), &json!(f), msgs));
    }
    causes
}

/// What the namespace strategy enforces on every update: the name label is the name, a status
/// phase matches whether deletion has begun, and finalize sets only valid finalizer names.
pub(crate) fn namespace_update(cur: &Obj, result: &mut Value, sub: Sub) -> Result<(), ApiError> {
    let name = cur.meta_str("name").to_string();
    let meta = meta_mut(result);
    if !meta.get("labels").is_some_and(Value::is_object) {
        meta.insert("labels".into(), json!({}));
    }
    if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        l.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    let causes = match sub {
        Sub::Status => {
            let phase = result["status"]["phase"].as_str().unwrap_or("Active");
            let (wanted, why) = if cur.deleting() {
                (
                    "Terminating",
                    "may only be 'Terminating' if `deletionTimestamp` is not empty",
                )
            } else {
                (
                    "Active",
                    "may only be 'Active' if `deletionTimestamp` is empty",
                )
            };
            if phase == wanted {
                vec![]
            } else {
                validation::invalid_causes("status.Phase", &json!(phase), vec![why.into()])
            }
        }
        Sub::Finalize => {
            namespace_finalizer_causes(&string_list(&result["spec"]["finalizers"]), |i| {
                format!("spec.finalizers[{i}]")
            })
        }
        Sub::Main => vec![],
    };
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("", "Namespace", &name, causes))
    }
}
