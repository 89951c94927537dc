//! Namespaces: their spec finalizers and what an update may change.

use crate::kinds::strategy::{Ctx, Strategy};
use crate::status::ApiError;
use crate::store::Obj;
use crate::util::{set_in, string_list};
use crate::validation;
use crate::verbs::{DeleteOpts, Sub};
use serde_json::{Value, json};

/// Where a namespace carries its own name, which the server sets and keeps.
const NAME_LABEL: [&str; 3] = ["metadata", "labels", "kubernetes.io/metadata.name"];

/// What the namespace strategy enforces on every update: the name label is the name, a status
/// phase matches whether deletion has begun, and finalize sets only valid finalizer names.
pub(crate) fn namespace_update(cur: &Obj, result: &mut Value, sub: Sub) -> Result<(), ApiError> {
    let name = cur.meta_str("name").to_string();
    set_in(result, &NAME_LABEL, json!(name));
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
                vec![validation::invalid("status.Phase", json!(phase), why)]
            }
        }
        Sub::Finalize => {
            validation::finalizer_name_causes(&string_list(&result["spec"]["finalizers"]), |i| {
                format!("spec.finalizers[{i}]")
            })
        }
        Sub::Main => vec![],
    };
    ApiError::invalid_if_any("", "Namespace", &name, causes)
}

/// Namespaces: the name label, the `kubernetes` spec finalizer and the phase.
pub(crate) struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn prepare_create(&self, ctx: &Ctx, obj: &mut Value) -> Result<(), ApiError> {
        set_in(obj, &NAME_LABEL, json!(ctx.name));
        // The client's own spec finalizers stay, with `kubernetes` added after them.
        let mut finalizers = string_list(&obj["spec"]["finalizers"]);
        let causes = validation::finalizer_name_causes(&finalizers, |_| "spec.finalizers".into());
        ApiError::invalid_if_any("", "Namespace", ctx.name, causes)?;
        if !finalizers.iter().any(|f| f == "kubernetes") {
            finalizers.push("kubernetes".into());
        }
        obj["spec"] = json!({"finalizers": finalizers});
        obj["status"] = json!({"phase": "Active"});
        Ok(())
    }

    fn prepare_update(
        &self,
        _ctx: &Ctx,
        old: &Obj,
        new: &mut Value,
        sub: Sub,
    ) -> Result<(), ApiError> {
        // Only `finalize` changes the spec.
        if sub == Sub::Main {
            new["spec"] = old.value["spec"].clone();
        }
        namespace_update(old, new, sub)
    }

    fn check_delete(&self, name: &str) -> Result<(), ApiError> {
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::forbidden(
                "",
                "namespaces",
                name,
                "this namespace may not be deleted",
            ));
        }
        Ok(())
    }

    /// A namespace's own storage checks its preconditions, in its own words.
    fn check_delete_stored(&self, cur: &Obj, opts: &DeleteOpts) -> Result<(), ApiError> {
        let name = cur.meta_str("name");
        let differs = |field: &str, wanted: &Option<String>, have: &str| {
            wanted.as_deref().filter(|w| *w != have).map(|w| {
                ApiError::conflict(
                    "",
                    "namespaces",
                    name,
                    &format!(
                        "Precondition failed: {field} in precondition: {w}, {field} in object meta: {have}"
                    ),
                )
            })
        };
        if let Some(e) = differs("UID", &opts.uid, cur.uid()).or_else(|| {
            differs(
                "ResourceVersion",
                &opts.resource_version,
                cur.meta_str("resourceVersion"),
            )
        }) {
            return Err(e);
        }
        if cur.deleting() && self.held_by_spec(&cur.value) {
            return Err(ApiError::conflict(
                "",
                "namespaces",
                name,
                "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.",
            ));
        }
        Ok(())
    }

    fn finalized_by_a_controller(&self) -> bool {
        true
    }

    /// A namespace's storage sets only the timestamp, and the phase.
    fn mark_deleting(&self, obj: &mut Value) {
        set_in(obj, &["status", "phase"], json!("Terminating"));
    }

    fn held_by_spec(&self, obj: &Value) -> bool {
        !string_list(&obj["spec"]["finalizers"]).is_empty()
    }
}
