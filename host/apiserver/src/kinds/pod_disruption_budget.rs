//! PodDisruptionBudgets: their spec's validation.

use crate::kinds::strategy::Strategy;
use crate::status::Cause;
use crate::validation;
use serde_json::Value;

/// ValidatePodDisruptionBudgetSpec's rule that only one of the two bounds may be set.
pub(crate) fn pdb_spec_causes(spec: &Value, causes: &mut Vec<Cause>) {
    if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
        let why = "minAvailable and maxUnavailable cannot be both set";
        causes.push(validation::invalid("spec", spec, why));
    }
}

/// PodDisruptionBudgets: the spec's rules.
pub(crate) struct PodDisruptionBudgetStrategy;

impl Strategy for PodDisruptionBudgetStrategy {
    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        pdb_spec_causes(&obj["spec"], causes);
    }
}
