//! Calling a component's `lethe:platform/reconciler` export directly: one pass, with its report
//! (for `lethe sync --once` and on-demand passes).

use std::sync::Arc;

use anyhow::Context as _;

use crate::runtime::call;
use crate::runtime::{InstanceState, LoadedComponent};

/// Host-side bindings of the reconciler world; the capability imports reuse [`crate::caps`].
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "lethe:platform/reconciler-handler",
        exports: { default: async },
        with: {
            "lethe:platform/kube": crate::caps::bindings::lethe::platform::kube,
            "lethe:platform/sql": crate::caps::bindings::lethe::platform::sql,
            "lethe:platform/log": crate::caps::bindings::lethe::platform::log,
            "lethe:platform/config": crate::caps::bindings::lethe::platform::config,
        },
    });
}

pub use bindings::exports::lethe::platform::reconciler::{DeletionInFlight, ItemFailure, Report};

/// What one call to a reconciler came to.
#[derive(Debug, Clone)]
pub enum Pass {
    /// A pass ran.
    Ran {
        /// What the component reported.
        report: Report,
        /// How long its Kubernetes calls waited for the component's rate limit.
        kube_waited: std::time::Duration,
    },
    /// No pass ran: another instance holds the reconciler's lease.
    NotLeader {
        /// The lease holder's identity.
        holder: String,
    },
}

impl Pass {
    /// The report of a pass that ran; that no pass ran is an error (for `lethe sync --once`,
    /// where the caller asked for a pass).
    pub fn into_report(self) -> anyhow::Result<Report> {
        match self {
            Pass::Ran { report, .. } => Ok(report),
            Pass::NotLeader { holder } => Err(anyhow::anyhow!(
                "not the leader: the lease is held by {holder}; no pass was run"
            )),
        }
    }
}

/// A component that exports `lethe:platform/reconciler`.
pub struct Reconciler {
    component: Arc<LoadedComponent>,
    pre: bindings::ReconcilerHandlerPre<InstanceState>,
}

call::instantiate_through!(bindings::ReconcilerHandlerPre<InstanceState> => bindings::ReconcilerHandler);

impl Reconciler {
    /// Prepares calls to `component`'s reconciler export.
    pub fn new(component: Arc<LoadedComponent>) -> anyhow::Result<Reconciler> {
        let pre = bindings::ReconcilerHandlerPre::new(component.pre.clone()).map_err(|e| {
            anyhow::Error::from(e).context(format!(
                "component `{}` does not export lethe:platform/reconciler",
                component.id
            ))
        })?;
        Ok(Reconciler { component, pre })
    }

    /// The component.
    pub fn component(&self) -> &Arc<LoadedComponent> {
        &self.component
    }

    /// Runs one pass in a fresh instance, within the component's time limit.
    pub async fn run_once(&self) -> anyhow::Result<Pass> {
        let mut store = self.component.new_store();
        let component = &self.component;
        let result = call::call(component, &self.pre, &mut store, |instance, store| {
            Box::pin(async move {
                instance
                    .lethe_platform_reconciler()
                    .call_reconcile(store)
                    .await
            })
        })
        .await
        .map_err(|failed| anyhow::anyhow!("component `{}` {failed}", component.id))?;
        let report = result
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("component `{}` could not run a pass", self.component.id))?;
        Ok(match report.leader_elsewhere.clone() {
            Some(holder) => Pass::NotLeader { holder },
            None => Pass::Ran {
                report,
                kube_waited: store.data().caps.kube_waited(),
            },
        })
    }
}

/// Records a reconciler call's outcome in `component`'s metrics: the pass counters, the leader
/// gauge (with its transitions), and the deletions in flight by state.
pub fn record(component: &LoadedComponent, outcome: &anyhow::Result<Pass>) {
    use crate::metrics::{ChangeLabels, ComponentLabels, DeletionLabels, PassLabels};
    let metrics = &component.env.metrics;
    let id = component.id.to_string();
    let by_component = ComponentLabels {
        component: id.clone(),
    };
    let (label, leads) = match outcome {
        Ok(Pass::Ran { .. }) => ("ran", Some(true)),
        Ok(Pass::NotLeader { .. }) => ("not_leader", Some(false)),
        Err(_) => ("error", None),
    };
    metrics
        .passes
        .get_or_create(&PassLabels {
            component: id.clone(),
            outcome: label,
        })
        .inc();
    if let Some(leads) = leads {
        let now = i64::from(leads);
        let before = metrics.leader.get_or_create(&by_component).set(now);
        if before != now {
            metrics
                .leader_transitions
                .get_or_create(&by_component)
                .inc();
        }
    }
    let empty = Vec::new();
    let deletions = match outcome {
        Ok(Pass::Ran { report, .. }) => {
            metrics
                .pass_duration
                .get_or_create(&by_component)
                .observe(report.duration_ms as f64 / 1000.0);
            metrics
                .pass_items
                .get_or_create(&by_component)
                .inc_by(u64::from(report.examined));
            for (change, n) in [
                ("created", report.created),
                ("updated", report.updated),
                ("deleted", report.deleted),
            ] {
                metrics
                    .pass_changes
                    .get_or_create(&ChangeLabels {
                        component: id.clone(),
                        change,
                    })
                    .inc_by(u64::from(n));
            }
            metrics
                .pass_failures
                .get_or_create(&by_component)
                .inc_by(report.failed.len() as u64);
            &report.deletions
        }
        // A host that ran no pass sees no deletions: across replicas, take the maximum.
        Ok(Pass::NotLeader { .. }) => &empty,
        Err(_) => return,
    };
    for state in ["PROCESSING", "FAILED"] {
        let (count, oldest_ms) = deletions
            .iter()
            .filter(|d| d.state == state)
            .fold((0i64, 0u64), |(n, oldest), d| (n + 1, oldest.max(d.age_ms)));
        let labels = DeletionLabels {
            component: id.clone(),
            state: state.to_string(),
        };
        metrics
            .deletions_in_flight
            .get_or_create(&labels)
            .set(count);
        metrics
            .deletion_oldest_age
            .get_or_create(&labels)
            .set(oldest_ms as f64 / 1000.0);
    }
}
