//! `lethe up`: configure the application (manifest, grants, variables, database, cluster), then
//! serve its HTTP routes and run its cron schedules until asked to stop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::admin::access::{AdminAccess, AdminAuth};
use crate::admin::{AdminState, Readiness, Step};
use crate::configure::{self, AppOptions, ClusterSource, ConfiguredApp, Observers};
use crate::manifest::Manifest;
use crate::metrics::Metrics;
use crate::runtime::Runtime;
use crate::status_page::StatusSource;
use crate::trigger::cron::CronJob;
use crate::trigger::http::{self, Router};

/// Options of `lethe up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The Spin v2 manifest.
    pub manifest: PathBuf,
    /// Address to serve HTTP on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Address of the admin listener: probes, metrics, status page (port 0 picks a free port).
    pub admin_listen: SocketAddr,
    /// Whether the admin listener asks for tokens.
    pub admin_auth: AdminAuth,
    /// Directory for the SQLite database and the embedded cluster.
    pub data_dir: PathBuf,
    /// Where compiled components are cached.
    pub cache: configure::CacheOptions,
    /// The database URL; `None` uses SQLite in the data dir.
    pub database_url: Option<String>,
    /// The cluster.
    pub cluster: ClusterSource,
    /// Rebuild a component when its sources change and serve the new build (`--watch`).
    pub watch: bool,
}

/// A running application.
pub struct App {
    /// The address HTTP is served on.
    pub addr: SocketAddr,
    /// The address of the admin listener.
    pub admin_addr: SocketAddr,
    /// The embedded cluster, when one was started.
    pub cluster: Option<lethe_apiserver::RunningApiServer>,
    /// The runtime (engine and components).
    pub runtime: Arc<Runtime>,
    readiness: Arc<Readiness>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl App {
    /// Configures and starts everything; returns once HTTP is being served. The admin listener
    /// comes first, so that `/readyz` says what is still starting.
    pub async fn start(opts: UpOptions) -> anyhow::Result<App> {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let metrics = Arc::new(Metrics::new());
        let readiness = Arc::new(Readiness::new());
        let requires_token = opts.admin_auth.requires_token(opts.admin_listen)?;
        let token_reviews = Arc::new(crate::identity::TokenReviews::default());
        let admin = Arc::new(AdminState {
            readiness: readiness.clone(),
            metrics: metrics.clone(),
            status: std::sync::OnceLock::new(),
            access: AdminAccess::new(requires_token, token_reviews.clone()),
        });
        let admin_listener = TcpListener::bind(opts.admin_listen)
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {} for the admin listener (choose another address with --admin-listen)",
                    opts.admin_listen
                )
            })?;
        let admin_addr = admin_listener.local_addr()?;
        tracing::info!(
            "admin listening on http://{admin_addr} (/healthz, /readyz, /metrics, /lethe/status; {})",
            if requires_token {
                "all but the probes ask for a token with `get` on their path"
            } else {
                "open to whoever can reach this loopback address"
            }
        );
        // Until `start` returns, dropping `shutdown` (an error on the way) stops this task too.
        let mut tasks = vec![tokio::spawn(crate::admin::serve(
            admin_listener,
            admin.clone(),
            shutdown_rx.clone(),
        ))];

        let observers = Observers {
            readiness: Some(&readiness),
            metrics: metrics.clone(),
            progress: None,
            denials: readiness.denials().clone(),
        };
        let ConfiguredApp {
            manifest,
            databases,
            cluster,
            embedded,
            runtime,
        } = configure::configure_app(
            &AppOptions {
                manifest: opts.manifest.clone(),
                data_dir: opts.data_dir.clone(),
                database_url: opts.database_url.clone(),
                cluster: opts.cluster.clone(),
                instance_id: instance_id(),
                cache: opts.cache.clone(),
            },
            &observers,
        )
        .await?;
        let runtime = Arc::new(runtime);
        let fairness = crate::trigger::fairness::Fairness::new(
            manifest.settings.fairness(),
            token_reviews,
            cluster,
        )?;
        let router = Arc::new(Router::new(&manifest, &runtime, metrics.clone(), fairness)?);
        let cron_jobs = manifest
            .cron_triggers
            .iter()
            .map(|t| {
                let component = runtime
                    .component(&t.component)
                    .with_context(|| format!("unknown component `{}`", t.component))?
                    .clone();
                CronJob::new(t, component).map(Arc::new)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        readiness.done(Step::Components);
        let _ = admin.status.set(StatusSource {
            app: manifest.name.clone(),
            routes: router.describe(),
            cron_jobs: cron_jobs.clone(),
            started: chrono::Utc::now(),
        });

        let listener = TcpListener::bind(opts.listen)
            .await
            .with_context(|| format!("cannot listen on {}", opts.listen))?;
        let addr = listener.local_addr()?;

        announce(
            &manifest,
            &router,
            &cron_jobs,
            addr,
            &databases,
            embedded.as_ref(),
        );
        // The runtime (engines, epoch ticker) lives as long as the App, which the tasks end before.
        let (r, rx) = (router.clone(), shutdown_rx.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = http::serve(listener, r, rx).await {
                tracing::error!("HTTP server stopped: {e:#}");
            }
        }));
        for job in &cron_jobs {
            tasks.push(tokio::spawn(job.clone().run(shutdown_rx.clone())));
        }
        if opts.watch {
            let served = crate::watch::Served {
                manifest,
                runtime: runtime.clone(),
                router,
                cron_jobs,
            };
            tasks.push(tokio::spawn(crate::watch::run(served, shutdown_rx.clone())));
        }
        Ok(App {
            addr,
            admin_addr,
            cluster: embedded,
            runtime,
            readiness,
            shutdown,
            tasks,
        })
    }

    /// Begins a graceful shutdown as kube-apiserver's `--shutdown-delay-duration` does: `/readyz`
    /// fails at once, and requests and ticks go on being served for `delay`, so that whatever
    /// routes to this host (a Service's endpoints) stops before it closes. Then [`App::shutdown`].
    pub async fn drain(&self, delay: std::time::Duration) {
        self.readiness.shut_down();
        if !delay.is_zero() {
            tracing::info!(
                "shutting down: /readyz fails now; serving for {:.1} s more",
                delay.as_secs_f64()
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// Stops accepting work, lets in-flight requests and ticks finish (bounded), releases the
    /// leader Leases the components hold for this host, and stops the embedded cluster.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        // No tick runs any more: hand the Leases on, so the next host need not wait them out.
        self.runtime.release_leases().await;
        if let Some(cluster) = self.cluster {
            cluster.shutdown().await;
        }
        tracing::info!("lethe stopped");
    }
}

fn announce(
    manifest: &Manifest,
    router: &Router,
    cron_jobs: &[Arc<CronJob>],
    addr: SocketAddr,
    databases: &crate::databases::Databases,
    embedded: Option<&lethe_apiserver::RunningApiServer>,
) {
    tracing::info!(app = %manifest.name, "lethe listening on http://{addr}");
    for (route, component) in router.describe() {
        tracing::info!("  http  {route:<28} -> {component}");
    }
    for job in cron_jobs {
        tracing::info!("  cron  {:<28} -> {}", job.expression(), job.component_id());
    }
    for (label, db) in databases {
        tracing::info!("  sql   {label:<28} {}", db.location());
    }
    if let Some(server) = embedded {
        let kubeconfig = server
            .kubeconfig_path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        tracing::info!(
            "  kube  embedded cluster at {} (kubeconfig: {kubeconfig})",
            server.url()
        );
    }
}

/// A name for this host process, unique among the hosts sharing a cluster (for leases).
fn instance_id() -> String {
    format!(
        "{}-{}-{}",
        configure::hostname(),
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    )
}
