//! The cron trigger: Spin's `[[trigger.cron]]` (six fields, seconds first, UTC), calling the
//! component's root export `handle-cron-event` from `spin:cron@3.0.0` in a fresh instance per tick.
//!
//! Spin declares that export an `async func`, and components built against our WIT export it
//! lifted with the component model's async ABI, so they are compiled for the runtime's engine
//! with component-model-async (see `runtime::Runtime`). A tick calls the export through
//! `TypedFunc::call_async`, which on that engine runs the call as a concurrent task of the store
//! and waits for it to finish. A component built against the older plain-`func` signature is
//! accepted too (the type check compares parameters and results only): it lands on the plain
//! engine, where `call_async` calls it on a fiber as before. Either way the store's epoch
//! deadline traps a tick that runs too long, and `runtime::within_time_limit` backs it up.
//!
//! A component that also exports `lethe:platform/reconciler` is ticked through `reconcile`
//! instead: the same pass (both exports run it), but the host gets its report, which feeds the
//! metrics and the status page. On Spin, which knows only `handle-cron-event`, the pass runs
//! just the same without a report.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::reconcile::{Pass, Reconciler};
use crate::manifest::CronTrigger;

use crate::runtime::call::{self, CallFailed};
use crate::runtime::{InstanceState, LoadedComponent};

/// Host-side bindings of Spin's cron world.
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "spin:cron/spin-cron",
        exports: { default: async },
    });
}

use bindings::SpinCronPre;
use bindings::spin::cron::cron_types::Metadata;

call::instantiate_through!(SpinCronPre<InstanceState> => bindings::SpinCron);

/// How long a woken trigger waits before it ticks, so that changes arriving together make one
/// tick; it also bounds the woken ticks of one trigger to about 20 a second.
const WAKE_SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// One scheduled component. Its component can be replaced while it runs (`lethe up --watch`); a
/// tick under way finishes on the one it started on.
pub struct CronJob {
    schedule: cron::Schedule,
    expression: String,
    id: Arc<str>,
    target: super::Slot<CronTarget>,
    last: std::sync::Mutex<Option<LastTick>>,
}

/// A component checked to be tickable by one [`CronJob`], ready for [`CronJob::put`].
pub struct Replacement(Arc<CronTarget>);

/// What a cron trigger ticks: the component, pre-linked for `handle-cron-event`.
struct CronTarget {
    component: Arc<LoadedComponent>,
    pre: SpinCronPre<InstanceState>,
    /// Set when the component exports `lethe:platform/reconciler` too.
    reconciler: Option<Reconciler>,
}

impl CronTarget {
    fn new(component: Arc<LoadedComponent>) -> anyhow::Result<CronTarget> {
        let pre = SpinCronPre::new(component.pre.clone()).map_err(|e| {
            anyhow::Error::from(e).context(format!(
                "component `{}` does not export spin:cron's handle-cron-event",
                component.id
            ))
        })?;
        let reconciler = Reconciler::new(component.clone()).ok();
        Ok(CronTarget {
            component,
            pre,
            reconciler,
        })
    }
}

/// The most recent tick of a cron trigger.
#[derive(Debug, Clone)]
pub struct LastTick {
    /// When it was due.
    pub at: DateTime<Utc>,
    /// How it ended.
    pub outcome: TickOutcome,
}

/// How a tick ended.
#[derive(Debug, Clone)]
pub enum TickOutcome {
    /// `handle-cron-event` returned `ok`.
    Done,
    /// The reconciler's pass, or that another instance leads.
    Pass(Pass),
    /// The component failed, or returned an error.
    Failed(String),
}

impl CronJob {
    /// Prepares a cron trigger; the component must export `handle-cron-event`.
    pub fn new(trigger: &CronTrigger, component: Arc<LoadedComponent>) -> anyhow::Result<CronJob> {
        Ok(CronJob {
            schedule: trigger.schedule.clone(),
            expression: trigger.cron_expression.clone(),
            id: component.id.clone(),
            target: super::Slot::new(CronTarget::new(component)?),
            last: std::sync::Mutex::new(None),
        })
    }

    /// Checks that `component` (of this job's component id) can be ticked here; [`CronJob::put`]
    /// then ticks it from the next tick on.
    pub fn replacement(&self, component: Arc<LoadedComponent>) -> anyhow::Result<Replacement> {
        anyhow::ensure!(
            component.id == self.id,
            "component `{}` cannot replace `{}`",
            component.id,
            self.id
        );
        Ok(Replacement(Arc::new(CronTarget::new(component)?)))
    }

    /// Ticks the component of `replacement` from the next tick on; a tick under way finishes on
    /// the one it started on.
    pub fn put(&self, replacement: Replacement) {
        self.target.set(replacement.0);
    }

    /// The most recent tick, if one has run.
    pub fn last_tick(&self) -> Option<LastTick> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// When the next tick is due.
    pub fn next_tick(&self) -> Option<DateTime<Utc>> {
        self.schedule.upcoming(Utc).next()
    }

    /// Runs one tick now and records how it ended: through the reconciler export when there is
    /// one, else through `handle-cron-event`.
    pub async fn tick_and_record(&self, at: DateTime<Utc>) -> TickOutcome {
        let target = self.target.get();
        let outcome = match &target.reconciler {
            Some(reconciler) => {
                let pass = reconciler.run_once().await;
                super::reconcile::record(&target.component, &pass);
                match pass {
                    Ok(pass) => TickOutcome::Pass(pass),
                    Err(e) => TickOutcome::Failed(format!("{e:#}")),
                }
            }
            None => match self.tick_on(&target, at).await {
                Ok(()) => TickOutcome::Done,
                Err(failed) => TickOutcome::Failed(format!("component {failed}")),
            },
        };
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(LastTick {
            at,
            outcome: outcome.clone(),
        });
        outcome
    }

    /// The schedule as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The component id.
    pub fn component_id(&self) -> &str {
        &self.id
    }

    /// Runs one tick of `target` (the component the caller took from the slot) in a fresh
    /// instance. Errors are the component's failure or its `error` result.
    async fn tick_on(&self, target: &CronTarget, at: DateTime<Utc>) -> Result<(), CallFailed> {
        let mut store = target.component.new_store();
        let timestamp = u64::try_from(at.timestamp()).unwrap_or(0);
        call::call(
            &target.component,
            &target.pre,
            &mut store,
            |instance, store| {
                Box::pin(async move {
                    // Not `call_handle_cron_event`: for an `async func` that needs an `Accessor` from
                    // `run_concurrent`. `call_async` does the same for one call, and also accepts a
                    // sync-lifted export.
                    let (result,) = instance
                        .func_handle_cron_event()
                        .call_async(store, (Metadata { timestamp },))
                        .await?;
                    result.map_err(|e| match e {
                        bindings::spin::cron::cron_types::Error::Other(msg) => {
                            wasmtime::format_err!("handle-cron-event returned an error: {msg}")
                        }
                    })
                })
            },
        )
        .await
    }

    /// Ticks on schedule until `shutdown` turns true, and, for a reconciler, also soon after the
    /// component's [`wake`](crate::caps::CapabilityEnv::wake) rings. A tick that is still running when the
    /// next one is due delays it (ticks of one trigger never overlap); a wake during a tick brings
    /// one more tick right after it.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            let Some(next) = self.schedule.upcoming(Utc).next() else {
                tracing::info!(
                    component = self.component_id(),
                    "cron schedule `{}` has no further ticks",
                    self.expression
                );
                return;
            };
            let wait = (next - Utc::now()).to_std().unwrap_or_default();
            // Only a reconciler (it exports lethe:platform/reconciler: its passes are idempotent
            // and act on what changed) is woken early; any other cron job keeps its schedule.
            let target = self.target.get();
            let woken = async {
                match target.reconciler {
                    Some(_) => target.component.env.wake.notified().await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                _ = tokio::time::sleep(wait) => next,
                _ = woken => {
                    // Something it acts on changed: tick now, once the changes that came with
                    // it (a burst of watch events, a cascade's next step) have arrived too.
                    tokio::time::sleep(WAKE_SETTLE).await;
                    Utc::now()
                }
                _ = shutdown.changed() => return,
            };
            match self.tick_and_record(next).await {
                TickOutcome::Done => {
                    tracing::debug!(component = self.component_id(), "cron tick at {next} done")
                }
                TickOutcome::Pass(Pass::Ran {
                    report,
                    kube_waited,
                }) => tracing::debug!(
                    component = self.component_id(),
                    examined = report.examined,
                    failed = report.failed.len(),
                    kube_rate_limited_ms = kube_waited.as_millis() as u64,
                    "cron tick at {next}: pass done"
                ),
                TickOutcome::Pass(Pass::NotLeader { holder }) => tracing::debug!(
                    component = self.component_id(),
                    "cron tick at {next}: not the leader (the lease is held by {holder})"
                ),
                TickOutcome::Failed(why) => {
                    tracing::error!(
                        component = self.component_id(),
                        "cron tick at {next}: {why}"
                    )
                }
            }
        }
    }
}
