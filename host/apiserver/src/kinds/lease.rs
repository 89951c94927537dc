//! Leases: their spec's validation.

use crate::kinds::causes::nonnegative;
use crate::kinds::strategy::Strategy;
use crate::status::Cause;
use crate::validation;
use serde_json::Value;

/// `ValidateLeaseSpec`.
pub(crate) fn lease_causes(spec: &Value, causes: &mut Vec<Cause>) {
    if let Some(n) = spec["leaseDurationSeconds"].as_i64()
        && n <= 0
    {
        let why = "must be greater than 0";
        causes.push(validation::invalid("spec.leaseDurationSeconds", n, why));
    }
    nonnegative(spec, "leaseTransitions", "spec", causes);
    if spec["preferredHolder"]
        .as_str()
        .is_some_and(|h| !h.is_empty())
        && spec["strategy"].as_str().is_none_or(str::is_empty)
    {
        causes.push(validation::forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
}

/// Leases: the spec's rules, and no unconditional update.
pub(crate) struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        lease_causes(&obj["spec"], causes);
    }

    fn allows_unconditional_update(&self) -> bool {
        false
    }
}
