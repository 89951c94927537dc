//! PodDisruptionBudgets: their spec's validation.

use crate::status::Cause;
use crate::validation;
use serde_json::Value;

/// ValidatePodDisruptionBudgetSpec's rule that only one of the two bounds may be set.
pub(crate) fn pdb_spec_causes(spec: &Value, causes: &mut Vec<Cause>) {
    if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
        causes.extend(validation::invalid_causes(
            "spec",
            spec,
            vec!["minAvailable and maxUnavailable cannot be both set".into()],
        ));
    }
}
