//! Status conditions, as `meta.SetStatusCondition` keeps them (`metav1.Condition`): each with a
//! type, a status (`True`, `False`, `Unknown`), a reason, a message, the `observedGeneration`
//! it was decided on, and a `lastTransitionTime` that moves only when the status does. A
//! reconciler states the conditions it decided; [`status_patch`] says what to write through the
//! status subresource, and nothing when they are already so.

use serde_json::{Value as Json, json};

use crate::env::format_rfc3339;
use crate::kube::{Object, Patch};

/// One condition, as a reconciler decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// Its type, in UpperCamelCase (`Ready`, `Deleting`, `Blocked`).
    pub type_: String,
    /// Whether it holds.
    pub status: bool,
    /// Why, in UpperCamelCase.
    pub reason: String,
    /// For a person.
    pub message: String,
}

impl Condition {
    /// A condition of `type_` that holds (`status`) for `reason`, saying `message`.
    pub fn new(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: message.to_string(),
        }
    }

    fn status_str(&self) -> &'static str {
        if self.status { "True" } else { "False" }
    }
}

/// The status patch that makes `object`'s conditions say `decided` (each condition of those
/// types set, others kept), decided on its current generation at `now_ms`; `None` when they
/// already say so. A condition keeps its `lastTransitionTime` unless its status changes.
pub fn status_patch(object: &Object, decided: &[Condition], now_ms: i64) -> Option<Patch> {
    let json = object.json();
    let generation = json["metadata"]["generation"].as_i64().unwrap_or(0);
    let current: Vec<Json> = json
        .pointer("/status/conditions")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let mut next = current.clone();
    for condition in decided {
        let found = next
            .iter_mut()
            .find(|c| c["type"] == condition.type_.as_str());
        let transition = match &found {
            Some(c) if c["status"] == condition.status_str() => c["lastTransitionTime"].clone(),
            _ => json!(format_rfc3339(now_ms)),
        };
        let written = json!({
            "type": condition.type_,
            "status": condition.status_str(),
            "reason": condition.reason,
            "message": condition.message,
            "observedGeneration": generation,
            "lastTransitionTime": transition,
        });
        match found {
            Some(c) => *c = written,
            None => next.push(written),
        }
    }
    (next != current).then(|| Patch::Merge(json!({"status": {"conditions": next}})))
}

/// The condition of `type_` on `object`, as stored: its status (`True`, `False`, `Unknown`) and
/// reason.
pub fn condition<'a>(object: &'a Object, type_: &str) -> Option<(&'a str, &'a str)> {
    object
        .json()
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("Unknown"),
                c["reason"].as_str().unwrap_or_default(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::object_from_json;

    fn org(status: Json, generation: i64) -> Object {
        object_from_json(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": "o", "namespace": "cf", "generation": generation}, "status": status}))
    }

    fn conditions(patch: Option<Patch>) -> Vec<Json> {
        match patch {
            Some(Patch::Merge(p)) => p["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_new_condition_is_written_with_its_generation_and_transition_time() {
        let o = org(json!({}), 3);
        let written = conditions(status_patch(
            &o,
            &[Condition::new(
                "Ready",
                true,
                "NamespaceReady",
                "its namespace exists",
            )],
            1_796_119_200_000,
        ));
        assert_eq!(written.len(), 1);
        assert_eq!(written[0]["status"], "True");
        assert_eq!(written[0]["observedGeneration"], 3);
        assert_eq!(written[0]["lastTransitionTime"], "2026-12-01T10:00:00Z");
    }

    #[test]
    fn nothing_is_written_when_the_conditions_already_say_so() {
        let ready = json!({"type": "Ready", "status": "True", "reason": "NamespaceReady",
            "message": "its namespace exists", "observedGeneration": 3,
            "lastTransitionTime": "2026-12-01T10:00:00Z"});
        let o = org(json!({"conditions": [ready]}), 3);
        let same = [Condition::new(
            "Ready",
            true,
            "NamespaceReady",
            "its namespace exists",
        )];
        assert!(status_patch(&o, &same, 1_796_119_900_000).is_none());
        assert_eq!(condition(&o, "Ready"), Some(("True", "NamespaceReady")));
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let ready = json!({"type": "Ready", "status": "True", "reason": "NamespaceReady",
            "message": "m", "observedGeneration": 3, "lastTransitionTime": "2026-12-01T10:00:00Z"});
        let other = json!({"type": "Custom", "status": "True", "reason": "Theirs"});
        let o = org(json!({"conditions": [ready, other]}), 4);
        // Same status, new reason and generation: the transition time stays.
        let written = conditions(status_patch(
            &o,
            &[Condition::new("Ready", true, "Other", "m")],
            1_796_119_900_000,
        ));
        assert_eq!(written[0]["lastTransitionTime"], "2026-12-01T10:00:00Z");
        assert_eq!(written[0]["observedGeneration"], 4);
        assert_eq!(
            written[1]["reason"], "Theirs",
            "a condition not decided on is kept"
        );
        // A new status moves it.
        let written = conditions(status_patch(
            &o,
            &[Condition::new("Ready", false, "Deleting", "m")],
            1_796_119_900_000,
        ));
        assert_eq!(written[0]["lastTransitionTime"], "2026-12-01T10:11:40Z");
    }
}
