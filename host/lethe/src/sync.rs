//! `lethe sync --once`: one reconciler pass on the same database and cluster as `lethe up` with
//! the same data dir, outside the cron schedule.
//!
//! The cluster: `--kubeconfig` when given; else the embedded cluster of a running `lethe up`
//! (its `<data-dir>/cluster/kubeconfig`, when the server it names answers); else the embedded
//! cluster is started on the data dir for the duration of the pass (it persists there, so the
//! next `lethe up` sees the result). On the embedded cluster the manifest's objects are applied
//! and the pass acts as its `service_account`, as under `lethe up`.
//!
//! Each component that exports `lethe:platform/reconciler` (or only `--component`) runs one pass
//! in a fresh instance, under a progress bar fed by the component's `log.progress` reports, and its
//! report is printed. The host identity
//! (`lethe_instance_id`) is `--instance-id`, by default `<hostname>-sync`, so consecutive
//! `sync --once` runs count as one Lease holder; a pass is refused while another host (a
//! `lethe up` with a cron trigger) holds the Lease.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::bail;

use crate::caps;
use crate::configure::{self, AppOptions, ClusterSource, EmbeddedCluster, Observers};
use crate::trigger::reconcile::{Pass, Reconciler, Report};

/// Options of `lethe sync --once`.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// The Spin v2 manifest.
    pub manifest: PathBuf,
    /// The data dir shared with `lethe up`.
    pub data_dir: PathBuf,
    /// Database URL; SQLite in the data dir when absent (as `lethe up`).
    pub database_url: Option<String>,
    /// A kubeconfig instead of the embedded cluster.
    pub kubeconfig: Option<PathBuf>,
    /// Only this component.
    pub component: Option<String>,
    /// The Lease holder identity.
    pub instance_id: Option<String>,
    /// Show the progress bar (on a terminal).
    pub progress: bool,
    /// Where compiled components are cached.
    pub cache: configure::CacheOptions,
    /// How long to wait for a failing embedded cluster per object of the manifests (`None`: the
    /// default).
    pub manifests_patience: Option<Duration>,
}

/// The outcome of one component's pass.
pub struct PassOutcome {
    /// The component id.
    pub component: String,
    /// The report, or why no pass ran.
    pub result: anyhow::Result<Report>,
}

/// Runs one pass of every selected reconciler and returns their outcomes.
pub async fn run_once(opts: SyncOptions) -> anyhow::Result<Vec<PassOutcome>> {
    let cluster = match &opts.kubeconfig {
        Some(path) => ClusterSource::Kubeconfig(path.clone()),
        None => ClusterSource::Embedded(EmbeddedCluster {
            join_running: true,
            manifests_patience: opts.manifests_patience,
            ..Default::default()
        }),
    };
    // Components report `done of total` through `log.progress`; the bar shows the latest.
    let progress = Arc::new(caps::Progress::default());
    let observers = Observers {
        progress: Some(progress.clone()),
        ..Default::default()
    };
    let app = configure::configure_app(
        &AppOptions {
            manifest: opts.manifest.clone(),
            data_dir: opts.data_dir.clone(),
            database_url: opts.database_url.clone(),
            cluster,
            instance_id: opts
                .instance_id
                .clone()
                .unwrap_or_else(|| format!("{}-sync", configure::hostname())),
            cache: opts.cache.clone(),
        },
        &observers,
    )
    .await?;
    let runtime = app.runtime;

    let mut selected = Vec::new();
    for component in runtime.components() {
        if opts
            .component
            .as_deref()
            .is_some_and(|c| c != &*component.id)
        {
            continue;
        }
        match Reconciler::new(component.clone()) {
            Ok(r) => selected.push((component.id.to_string(), r)),
            Err(e) if opts.component.is_some() => return Err(e),
            Err(_) => {}
        }
    }
    if selected.is_empty() {
        match &opts.component {
            Some(c) => bail!("the manifest has no component `{c}`"),
            None => bail!("no component of the manifest exports lethe:platform/reconciler"),
        }
    }

    let mut outcomes = Vec::new();
    for (id, reconciler) in selected {
        progress.done.store(0, Ordering::Relaxed);
        progress.total.store(0, Ordering::Relaxed);
        let bar = progress_bar(&id, opts.progress);
        let result = match &bar {
            Some(bar) => {
                let run = async { reconciler.run_once().await?.into_report() };
                tokio::pin!(run);
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    tokio::select! {
                        result = &mut run => break result,
                        _ = tick.tick() => {
                            let total = progress.total.load(Ordering::Relaxed);
                            if total > 0 {
                                bar.set_length(total);
                                bar.set_position(progress.done.load(Ordering::Relaxed));
                            }
                        }
                    }
                }
            }
            None => reconciler.run_once().await.and_then(Pass::into_report),
        };
        if let Some(s) = bar {
            match &result {
                // The report is printed next; the bar would only repeat it.
                Ok(_) => s.finish_and_clear(),
                Err(e) => s.abandon_with_message(format!("{id}: {e:#}")),
            }
        }
        outcomes.push(PassOutcome {
            component: id,
            result,
        });
    }
    // As `lethe up` does on a clean stop: the next host takes the Leases over at once.
    runtime.release_leases().await;
    drop(runtime);
    if let Some(server) = app.embedded {
        server.shutdown().await;
    }
    Ok(outcomes)
}

/// A bar of `done/total` items as the component reports them (a spinner until the first
/// report), with the elapsed time.
fn progress_bar(component: &str, enabled: bool) -> Option<indicatif::ProgressBar> {
    if !enabled {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} {msg} [{bar:30}] {pos}/{len} items [{elapsed_precise}]",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(format!("{component}: reconciling"));
    bar.enable_steady_tick(Duration::from_millis(100));
    Some(bar)
}

/// The report as JSON (for `--json`).
pub fn report_json(component: &str, report: &Report) -> serde_json::Value {
    serde_json::json!({
        "component": component,
        "examined": report.examined,
        "created": report.created,
        "updated": report.updated,
        "deleted": report.deleted,
        "failed": report.failed.iter().map(|f| serde_json::json!({
            "item": f.item, "reason": f.reason, "parked": f.parked,
        })).collect::<Vec<_>>(),
        "duration_ms": report.duration_ms,
    })
}

/// The report as text.
pub fn report_text(component: &str, report: &Report) -> String {
    let mut out = format!(
        "{component}: examined {}, created {}, updated {}, deleted {}, failed {} ({} ms)\n",
        report.examined,
        report.created,
        report.updated,
        report.deleted,
        report.failed.len(),
        report.duration_ms
    );
    for f in &report.failed {
        out.push_str(&format!(
            "  {} {}: {}\n",
            if f.parked { "parked " } else { "failed " },
            f.item,
            f.reason
        ));
    }
    out
}
