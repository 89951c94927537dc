//! `lethe up --watch`: when a file a component's build reads changes (`[component.<id>.build]`
//! `watch`, globs against its `workdir`, as `spin watch` reads them), rebuild that component and
//! serve the new build from the next request and tick on. Requests and ticks under way finish on
//! the build they started on. A build that fails, or a new build lethe refuses (an ungranted
//! import, a configuration its check rejects), leaves the previous one serving; the compiler's
//! output is on lethe's stderr and the reason in its log.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::manifest::{Build, Manifest};
use crate::runtime::Runtime;
use crate::trigger::configuration;
use crate::trigger::cron::CronJob;
use crate::trigger::http::Router;

/// How often the watched files are looked at.
const POLL: Duration = Duration::from_millis(400);

/// What is served, so that a new build can take its place.
pub struct Served {
    /// The manifest lethe started with.
    pub manifest: Manifest,
    /// Its runtime.
    pub runtime: Arc<Runtime>,
    /// The HTTP routes.
    pub router: Arc<Router>,
    /// The cron triggers.
    pub cron_jobs: Vec<Arc<CronJob>>,
}

/// The files a build reads, with when each last changed and its size.
type Fingerprint = BTreeMap<PathBuf, (SystemTime, u64)>;

/// The files matching `build`'s `watch` globs now.
fn fingerprint(build: &Build) -> Fingerprint {
    let mut files = Fingerprint::new();
    for pattern in &build.watch {
        let full = build.workdir.join(pattern);
        let Ok(paths) = glob::glob(&full.to_string_lossy()) else {
            continue;
        };
        for path in paths.flatten() {
            if let Ok(meta) = std::fs::metadata(&path)
                && meta.is_file()
            {
                let changed = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                files.insert(path, (changed, meta.len()));
            }
        }
    }
    files
}

/// Watches every component with a `watch` list until `shutdown` turns true.
pub async fn run(served: Served, mut shutdown: watch::Receiver<bool>) {
    let mut watched: Vec<(String, Build, Fingerprint)> = Vec::new();
    for (id, decl) in &served.manifest.components {
        match &decl.build {
            Some(build) if !build.watch.is_empty() => {
                let now = fingerprint(build);
                tracing::info!(
                    "watching {} file(s) of component `{id}` ({})",
                    now.len(),
                    build.watch.join(", ")
                );
                watched.push((id.clone(), build.clone(), now));
            }
            _ => tracing::info!(
                "component `{id}` is not watched: its [component.{id}.build] has no `watch` list"
            ),
        }
    }
    if watched.is_empty() {
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.changed() => return,
        }
        for (id, build, seen) in &mut watched {
            let mut now = fingerprint(build);
            if now == *seen {
                continue;
            }
            // Let an editor's burst of writes settle before building.
            loop {
                tokio::time::sleep(POLL).await;
                let again = fingerprint(build);
                if again == now {
                    break;
                }
                now = again;
            }
            *seen = now;
            rebuild(&served, id, build).await;
        }
    }
}

/// Builds component `id` and, if that works and lethe accepts the result, serves it.
async fn rebuild(served: &Served, id: &str, build: &Build) {
    tracing::info!("component `{id}` changed: building");
    let (owned_id, owned_build) = (id.to_string(), build.clone());
    let built =
        tokio::task::spawn_blocking(move || crate::component_build::run(&owned_id, &owned_build))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the build task failed: {e}")));
    if let Err(e) = built {
        tracing::error!("{e:#}; still serving the previous build of `{id}`");
        return;
    }
    match swap_in(served, id).await {
        Ok(routes) => tracing::info!(
            "serving the new build of `{id}` ({routes} route(s)); work under way finishes on the old one"
        ),
        Err(e) => tracing::error!("{e:#}; still serving the previous build of `{id}`"),
    }
}

/// Loads the new build of `id`, checks it as at start, and puts it on its routes and triggers.
async fn swap_in(served: &Served, id: &str) -> anyhow::Result<usize> {
    let component = served.runtime.reload(&served.manifest, id)?;
    if let configuration::Checked::Refused(why) = configuration::check(&component).await? {
        anyhow::bail!("component `{id}`: {why}");
    }
    // Every route and trigger takes it, or none does.
    let routes = served.router.replacement(&component)?;
    let ticks = served
        .cron_jobs
        .iter()
        .filter(|j| j.component_id() == id)
        .map(|j| Ok((j, j.replacement(component.clone())?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (job, replacement) in ticks {
        job.put(replacement);
    }
    Ok(served.router.put(routes))
}
