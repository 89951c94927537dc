//! Leases: their spec's validation.

use crate::kinds::causes::nonnegative;
use crate::status::Cause;
use crate::validation;
use serde_json::{Value, json};

/// `ValidateLeaseSpec`.
pub(crate) fn lease_causes(spec: &Value, causes: &mut Vec<Cause>) {
    if let Some(n) = spec["leaseDurationSeconds"].as_i64()
        && n <= 0
    {
        causes.extend(validation::invalid_causes(
            "spec.leaseDurationSeconds",
            &json!(n),
            vec!["must be greater than 0".into()],
        ));
    }
    nonnegative(spec, "leaseTransitions", "spec", causes);
    if spec["preferredHolder"]
        .as_str()
        .is_some_and(|h| !h.is_empty())
        && spec["strategy"].as_str().is_none_or(str::is_empty)
    {
        causes.push(Cause {
            reason: "FieldValueForbidden",
            message: "Forbidden: may only be specified if `strategy` is defined".into(),
            field: "spec.preferredHolder".into(),
        });
    }
}
