//! What a reconciler pass tells its host (WIT `reconciler.report`), in plain Rust. Each core says
//! what its pass did in these terms; [`crate::wit_report!`] then builds the component's own
//! generated binding of the record, which wit-bindgen makes per component (an exported type
//! cannot be shared between bindings as an imported one can).

use serde::Serialize;

/// An item the pass could not bring in line; the pass went on past it (WIT `item-failure`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ItemFailure {
    /// What failed, in the reconciler's words (`team/job`, `org/<guid>`).
    pub item: String,
    /// Why.
    pub reason: String,
    /// Parked until its desired state changes, rather than retried with backoff.
    pub parked: bool,
}

/// A deletion still under way after the pass (WIT `deletion-in-flight`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeletionInFlight {
    /// What is being deleted (`<type>/<guid>`).
    pub item: String,
    /// Its deletion job's state, as the job status API words it (`PROCESSING`, `FAILED`).
    pub state: String,
    /// Milliseconds since the deletion was asked for.
    pub age_ms: u64,
    /// Why it is not done, in the words of its job poll's error; `None` while it proceeds.
    pub reason: Option<String>,
}

impl DeletionInFlight {
    /// The deletion of `item`, asked for `age_ms` ago, while finalizers other than `ours` hold
    /// its object `live`: `PROCESSING`, or `FAILED` once it is older than `timeout_ms`, and why.
    /// `None` when nothing but `ours` holds it.
    pub fn held(
        item: String,
        age_ms: i64,
        timeout_ms: i64,
        live: &crate::kube::Object,
        ours: &str,
    ) -> Option<DeletionInFlight> {
        let others: Vec<&str> = (live.metadata.finalizers.iter())
            .map(String::as_str)
            .filter(|f| *f != ours)
            .collect();
        (!others.is_empty()).then(|| DeletionInFlight {
            item,
            state: if age_ms < timeout_ms {
                "PROCESSING"
            } else {
                "FAILED"
            }
            .into(),
            age_ms: u64::try_from(age_ms).unwrap_or(0),
            reason: Some(format!("waiting for finalizers {}", others.join(", "))),
        })
    }
}

/// What one pass did (WIT `report`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PassReport {
    /// Items visited.
    pub examined: u32,
    /// Objects created.
    pub created: u32,
    /// Objects updated.
    pub updated: u32,
    /// Objects deleted.
    pub deleted: u32,
    /// Items that failed.
    pub failed: Vec<ItemFailure>,
    /// Wall time of the pass in milliseconds.
    pub duration_ms: u64,
    /// Deletions under way; empty for a reconciler that runs none.
    pub deletions: Vec<DeletionInFlight>,
    /// When no pass ran because another instance holds the reconciler's lease: its holder.
    pub leader_elsewhere: Option<String>,
}

impl PassReport {
    /// No pass ran: `holder` holds the lease, so every count is zero.
    pub fn not_leader(holder: String) -> Self {
        PassReport {
            leader_elsewhere: Some(holder),
            ..PassReport::default()
        }
    }
}

/// Builds a component's generated `Report` from a [`PassReport`]:
/// `wit_report!(reconciler, report)`, where `reconciler` is the path of the component's
/// generated `exports::lethe::platform::reconciler` module.
#[macro_export]
macro_rules! wit_report {
    ($($wit:ident)::+, $report:expr) => {{
        let report: $crate::reconciler::PassReport = $report;
        $($wit)::+::Report {
            examined: report.examined,
            created: report.created,
            updated: report.updated,
            deleted: report.deleted,
            failed: report
                .failed
                .into_iter()
                .map(|f| $($wit)::+::ItemFailure {
                    item: f.item,
                    reason: f.reason,
                    parked: f.parked,
                })
                .collect(),
            duration_ms: report.duration_ms,
            deletions: report
                .deletions
                .into_iter()
                .map(|d| $($wit)::+::DeletionInFlight {
                    item: d.item,
                    state: d.state,
                    age_ms: d.age_ms,
                    reason: d.reason,
                })
                .collect(),
            leader_elsewhere: report.leader_elsewhere,
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module shaped as a component's generated `reconciler` bindings: the macro fills its
    /// `Report`, `ItemFailure` and `DeletionInFlight` by field name, as it fills theirs.
    mod generated {
        pub use crate::reconciler::{DeletionInFlight, ItemFailure, PassReport as Report};
    }

    #[test]
    fn every_field_reaches_the_generated_report() {
        let report = PassReport {
            examined: 7,
            created: 1,
            updated: 2,
            deleted: 3,
            failed: vec![ItemFailure {
                item: "team/job".into(),
                reason: "422".into(),
                parked: true,
            }],
            duration_ms: 45,
            deletions: vec![DeletionInFlight {
                item: "org/1".into(),
                state: "FAILED".into(),
                age_ms: 600,
                reason: Some("org deletion cannot finish: Namespace x is not lethe's".into()),
            }],
            leader_elsewhere: None,
        };
        let wit = crate::wit_report!(generated, report.clone());
        assert_eq!(wit, report);
        assert_eq!(
            (wit.examined, wit.created, wit.updated, wit.deleted),
            (7, 1, 2, 3)
        );
        assert_eq!(wit.duration_ms, 45);
        let failure = &wit.failed[0];
        assert_eq!(
            (
                failure.item.as_str(),
                failure.reason.as_str(),
                failure.parked
            ),
            ("team/job", "422", true)
        );
        let deletion = &wit.deletions[0];
        assert_eq!(
            (
                deletion.item.as_str(),
                deletion.state.as_str(),
                deletion.age_ms
            ),
            ("org/1", "FAILED", 600)
        );
        assert_eq!(
            deletion.reason.as_deref(),
            Some("org deletion cannot finish: Namespace x is not lethe's")
        );
        assert_eq!(wit.leader_elsewhere, None);

        let elsewhere = crate::wit_report!(generated, PassReport::not_leader("host-2".into()));
        assert_eq!(elsewhere.leader_elsewhere.as_deref(), Some("host-2"));
        assert_eq!(elsewhere.examined + elsewhere.created, 0);
    }
}
