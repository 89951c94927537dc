//! `lethe up`: configure the application (manifest, grants, variables, database, cluster), then
//! serve its HTTP routes and run its cron schedules until asked to stop.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::admin::{AdminState, Readiness, Step};
use crate::caps::{self, CapabilityEnv};
use crate::manifest::{self, Capability, Manifest};
use crate::metrics::Metrics;
use crate::runtime::Runtime;
use crate::status_page::StatusSource;
use crate::trigger::cron::CronJob;
use crate::trigger::http::{self, Router};

/// Where the cluster comes from.
#[derive(Debug, Clone)]
pub enum ClusterSource {
    /// A kubeconfig file.
    Kubeconfig(PathBuf),
    /// The in-cluster service account.
    InCluster,
    /// The embedded API server, persisted under `<data dir>/cluster`.
    Embedded,
}

/// Options of `lethe up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The Spin v2 manifest.
    pub manifest: PathBuf,
    /// Address to serve HTTP on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Address of the admin listener: probes, metrics, status page (port 0 picks a free port).
    pub admin_listen: SocketAddr,
    /// Directory for the SQLite database, the compiled-component cache and the embedded cluster.
    pub data_dir: PathBuf,
    /// The database URL; `None` uses SQLite in the data dir.
    pub database_url: Option<String>,
    /// The cluster.
    pub cluster: ClusterSource,
    /// Address of the embedded cluster (port 0 picks a free port).
    pub cluster_listen: SocketAddr,
    /// Faults the embedded cluster injects from the start (off by default; tests and chaos
    /// drills). They can be changed later through its admin-only `/lethe/faults`.
    pub cluster_faults: lethe_apiserver::FaultConfig,
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
        let admin = Arc::new(AdminState {
            readiness: readiness.clone(),
            metrics: metrics.clone(),
            status: std::sync::OnceLock::new(),
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
            "admin listening on http://{admin_addr} (/healthz, /readyz, /metrics, /lethe/status)"
        );
        // Until `start` returns, dropping `shutdown` (an error on the way) stops this task too.
        let mut tasks = vec![tokio::spawn(crate::admin::serve(
            admin_listener,
            admin.clone(),
            shutdown_rx.clone(),
        ))];

        std::fs::create_dir_all(&opts.data_dir)
            .with_context(|| format!("cannot create data dir {}", opts.data_dir.display()))?;
        let manifest = manifest::load(&opts.manifest)?;
        caps::config::check_required(&manifest)?;

        let needs = |c: Capability| manifest.components.values().any(|d| d.grants.allows(c));
        let database = if needs(Capability::Sql) {
            Some(open_database(&manifest, opts.database_url.as_deref(), &opts.data_dir).await?)
        } else {
            None
        };
        if let Some(db) = &database {
            readiness.watch_database(db);
            metrics.watch_database(db);
        }

        let (cluster, embedded) =
            if needs(Capability::Kube) || matches!(opts.cluster, ClusterSource::Embedded) {
                let (mut cluster, embedded) = connect_cluster(&opts).await?;
                if embedded.is_some() {
                    readiness.pending(
                        Step::Manifests,
                        "applying the manifest's Kubernetes objects",
                    );
                    cluster = prepare_embedded(&manifest, cluster).await?;
                }
                // Probed and counted with the identity the components use.
                readiness.watch_cluster(&cluster);
                metrics.watch_cluster(&cluster);
                (Some(cluster), embedded)
            } else {
                (None, None)
            };
        // On a cluster of its own, lethe applies nothing: an administrator did (deploy/).
        readiness.done(Step::Manifests);

        let envs = capability_envs(
            &manifest,
            database.as_ref(),
            cluster.as_ref(),
            &instance_id(),
            None,
            &metrics,
        )?;

        let cache_dir = opts.data_dir.join("cache");
        readiness.pending(Step::Components, "compiling and loading the components");
        let runtime = Arc::new(Runtime::new(&manifest, Some(&cache_dir), envs)?);
        let router = Arc::new(Router::new(&manifest, &runtime, metrics.clone())?);
        let cron_jobs = manifest
            .cron_triggers
            .iter()
            .map(|t| {
                let component = runtime
                    .component(&t.component)
                    .with_context(|| format!("unknown component `{}`", t.component))?
                    .clone();
                CronJob::new(&t.cron_expression, component).map(Arc::new)
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
            database.as_ref(),
            embedded.as_ref(),
        );
        // The runtime (engines, epoch ticker) lives as long as the App, which the tasks end before.
        let (r, rx) = (router.clone(), shutdown_rx.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = http::serve(listener, r, rx).await {
                tracing::error!("HTTP server stopped: {e:#}");
            }
        }));
        for job in cron_jobs {
            tasks.push(tokio::spawn(job.run(shutdown_rx.clone())));
        }
        Ok(App {
            addr,
            admin_addr,
            cluster: embedded,
            runtime,
            shutdown,
            tasks,
        })
    }

    /// Stops accepting work, lets in-flight requests and ticks finish (bounded), and stops the
    /// embedded cluster.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        if let Some(cluster) = self.cluster {
            cluster.shutdown().await;
        }
        tracing::info!("lethe stopped");
    }
}

/// Sets up the embedded cluster as an administrator would before lethe runs there: applies the
/// manifest's `kubernetes_manifests` with `admin`, the cluster's administrator, and returns the
/// cluster the components use. With `service_account` set that is the same cluster acting as
/// lethe's ServiceAccount, with exactly the rights the manifests bound (SECURITY.md H1), never as
/// the administrator.
pub(crate) async fn prepare_embedded(
    manifest: &Manifest,
    admin: lethe_kube::Cluster,
) -> anyhow::Result<lethe_kube::Cluster> {
    for path in &manifest.settings.kubernetes_manifests {
        crate::kubernetes_manifests::apply_file(&admin, path).await?;
    }
    let Some((namespace, name)) = manifest.settings.service_account() else {
        return Ok(admin);
    };
    let token = crate::service_account::token(&admin, namespace, name).await?;
    let cluster = admin.with_privileged_token(&token)?;
    tracing::info!("privileged identity: system:serviceaccount:{namespace}:{name}");
    Ok(cluster)
}

/// Opens the application's database — `database_url`, else the manifest variable
/// `database_url`, else SQLite in `data_dir` — and applies every component's migrations.
pub(crate) async fn open_database(
    manifest: &Manifest,
    database_url: Option<&str>,
    data_dir: &std::path::Path,
) -> anyhow::Result<lethe_sql::Database> {
    let url = database_url
        .map(str::to_string)
        .or_else(|| caps::config::app_variable(manifest, "database_url").filter(|u| !u.is_empty()))
        .unwrap_or_else(|| format!("sqlite:{}", data_dir.join("lethe.db").display()));
    let db = lethe_sql::Database::open(&url)
        .await
        .with_context(|| format!("cannot open the database ({})", redact_url(&url)))?;
    for (id, decl) in &manifest.components {
        if let Some(dir) = &decl.grants.migrations {
            let migrations = crate::migrations::load(id, dir)?;
            db.migrate(&migrations)
                .await
                .with_context(|| format!("applying the migrations of component `{id}`"))?;
        }
    }
    Ok(db)
}

/// Each component's capability environment: its grants, its resolved configuration (plus the
/// host's `lethe_instance_id`), and the database and cluster if it is granted them.
pub(crate) fn capability_envs(
    manifest: &Manifest,
    database: Option<&lethe_sql::Database>,
    cluster: Option<&lethe_kube::Cluster>,
    instance_id: &str,
    progress: Option<&Arc<caps::Progress>>,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<BTreeMap<String, Arc<CapabilityEnv>>> {
    let mut envs = BTreeMap::new();
    for (id, decl) in &manifest.components {
        let mut config = caps::config::resolve(manifest, decl)?;
        config.insert(
            caps::config::INSTANCE_ID_KEY.to_string(),
            instance_id.to_string(),
        );
        let env = CapabilityEnv {
            component_id: Arc::from(id.as_str()),
            grants: decl.grants.clone(),
            config,
            database: database
                .filter(|_| decl.grants.allows(Capability::Sql))
                .cloned(),
            cluster: cluster
                .filter(|_| decl.grants.allows(Capability::Kube))
                .cloned(),
            progress: progress.cloned(),
            metrics: metrics.clone(),
        };
        envs.insert(id.clone(), Arc::new(env));
    }
    Ok(envs)
}

async fn connect_cluster(
    opts: &UpOptions,
) -> anyhow::Result<(
    lethe_kube::Cluster,
    Option<lethe_apiserver::RunningApiServer>,
)> {
    match &opts.cluster {
        ClusterSource::Kubeconfig(path) => Ok((
            lethe_kube::Cluster::from_kubeconfig(path, Default::default()).await?,
            None,
        )),
        ClusterSource::InCluster => {
            Ok((lethe_kube::Cluster::infer(Default::default()).await?, None))
        }
        ClusterSource::Embedded => {
            let server = lethe_apiserver::start(lethe_apiserver::ApiServerConfig {
                data_dir: Some(opts.data_dir.join("cluster")),
                listen: opts.cluster_listen,
                // kubectl sends bearer tokens only over TLS.
                tls: true,
                faults: opts.cluster_faults.clone(),
            })
            .await
            .context("cannot start the embedded cluster")?;
            let path = server
                .kubeconfig_path()
                .context("the embedded cluster wrote no kubeconfig")?
                .to_path_buf();
            let cluster = lethe_kube::Cluster::from_kubeconfig(&path, Default::default()).await?;
            Ok((cluster, Some(server)))
        }
    }
}

fn announce(
    manifest: &Manifest,
    router: &Router,
    cron_jobs: &[Arc<CronJob>],
    addr: SocketAddr,
    database: Option<&lethe_sql::Database>,
    embedded: Option<&lethe_apiserver::RunningApiServer>,
) {
    tracing::info!(app = %manifest.name, "lethe listening on http://{addr}");
    for (route, component) in router.describe() {
        tracing::info!("  http  {route:<28} -> {component}");
    }
    for job in cron_jobs {
        tracing::info!("  cron  {:<28} -> {}", job.expression(), job.component_id());
    }
    if let Some(db) = database {
        tracing::info!("  sql   {}", db.backend_name());
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
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "lethe".to_string());
    format!(
        "{host}-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    )
}

/// `url` with any password replaced, for logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            super::redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact_url("sqlite:/x/y.db"), "sqlite:/x/y.db");
    }
}
