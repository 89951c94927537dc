//! Configuring an application, the phase `lethe up` and `lethe sync --once` share (Spin's
//! "configure app"): load and check the manifest, open the database and apply the migrations,
//! connect to the cluster (and set up the embedded one), resolve each component's capability
//! environment, and compile and link the components. Every error stops start-up here, before a
//! request or pass runs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::admin::{Readiness, Step};
use crate::caps::{self, CapabilityEnv};
use crate::databases::{self, Databases};
use crate::manifest::{self, Capability, Manifest};
use crate::metrics::Metrics;
use crate::runtime::cache::{self, ComponentCache};
use crate::runtime::{CompiledApp, Runtime};
use crate::trigger::configuration;

/// Where the cluster comes from.
#[derive(Debug, Clone)]
pub enum ClusterSource {
    /// A kubeconfig file.
    Kubeconfig(PathBuf),
    /// The in-cluster service account.
    InCluster,
    /// The embedded API server, persisted under `<data dir>/cluster`.
    Embedded(EmbeddedCluster),
}

/// How the embedded cluster is run.
#[derive(Debug, Clone, Default)]
pub struct EmbeddedCluster {
    /// Address to serve it on (port 0 picks a free port).
    pub listen: Option<SocketAddr>,
    /// Faults it injects from the start (off by default; tests and chaos drills). They can be
    /// changed later through its admin-only `/lethe/faults`.
    pub faults: lethe_apiserver::FaultConfig,
    /// Use the embedded cluster of a `lethe up` running on the same data dir, when the server its
    /// kubeconfig names answers, rather than starting one (`lethe sync --once` beside `lethe up`).
    pub join_running: bool,
    /// Start it even when no component is granted `kube`: `lethe up` serves it to kubectl.
    pub start_unused: bool,
    /// How long the start waits for it while it fails, per object of the manifests it applies
    /// (`None`: [`crate::kubernetes_manifests::DEFAULT_PATIENCE`]).
    pub manifests_patience: Option<Duration>,
}

/// What configuring an application needs.
#[derive(Debug, Clone)]
pub struct AppOptions {
    /// The Spin v2 manifest.
    pub manifest: PathBuf,
    /// Directory for the SQLite database and the embedded cluster.
    pub data_dir: PathBuf,
    /// The database URL; `None` uses the manifest's `database_url` variable, else SQLite in the
    /// data dir.
    pub database_url: Option<String>,
    /// The cluster.
    pub cluster: ClusterSource,
    /// This host's name among the hosts sharing a cluster (`lethe_instance_id`, the Lease holder).
    pub instance_id: String,
    /// Where compiled components are cached.
    pub cache: CacheOptions,
}

/// Where compiled components are cached ([`crate::runtime::cache`]).
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// The directory; `None` compiles every component at every start.
    pub dir: Option<PathBuf>,
    /// The bound on its size.
    pub max_bytes: u64,
}

impl CacheOptions {
    /// The user's cache: `dir` when given, else [`ComponentCache::default_dir`], else (no home
    /// directory) `<data_dir>/cache`.
    pub fn for_user(dir: Option<PathBuf>, data_dir: &Path) -> CacheOptions {
        CacheOptions {
            dir: Some(
                dir.or_else(ComponentCache::default_dir)
                    .unwrap_or_else(|| data_dir.join("cache")),
            ),
            max_bytes: cache::DEFAULT_MAX_BYTES,
        }
    }

    /// The cache, opened; `None` (compiling without one, which is only slower) when there is
    /// none or it cannot be used, which is logged.
    pub fn open(&self) -> Option<ComponentCache> {
        let dir = self.dir.as_ref()?;
        match ComponentCache::open(dir, self.max_bytes) {
            Ok(cache) => Some(cache),
            Err(e) => {
                tracing::warn!("compiling the components without a cache: {e:#}");
                None
            }
        }
    }
}

/// Who watches the configuration: the readiness it reports to and the metrics the capabilities
/// record into, and the progress a pass reports through `log.progress`.
#[derive(Default)]
pub struct Observers<'a> {
    /// Told what is still being set up (`/readyz`).
    pub readiness: Option<&'a Readiness>,
    /// The metrics every capability records into.
    pub metrics: Arc<Metrics>,
    /// Where `log.progress` reports go (`lethe sync`'s progress bar).
    pub progress: Option<Arc<caps::Progress>>,
    /// Where the components' privileged calls that the cluster refused are told.
    pub denials: Arc<crate::admin::denials::Denials>,
}

/// A configured application, ready to serve or to run a pass.
pub struct ConfiguredApp {
    /// The manifest.
    pub manifest: Manifest,
    /// Each database label's database (none when no component is granted `sql`).
    pub databases: Databases,
    /// The cluster as the components' identity, when one is connected.
    pub cluster: Option<lethe_kube::Cluster>,
    /// The embedded cluster, when one was started here (stop it with the application).
    pub embedded: Option<lethe_apiserver::RunningApiServer>,
    /// The compiled, linked components with their capability environments.
    pub runtime: Runtime,
}

/// Configures the application `opts` names: the manifest first; then the components are
/// compiled (or loaded from the cache) on a thread of their own while the database and the
/// cluster are set up side by side; then each component's capability environment, and the
/// components are linked. `observers.readiness` is told about each step as it goes, and the time
/// each took is logged and kept in the metrics.
pub async fn configure_app(
    opts: &AppOptions,
    observers: &Observers<'_>,
) -> anyhow::Result<ConfiguredApp> {
    let started = Instant::now();
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("cannot create data dir {}", opts.data_dir.display()))?;
    let manifest = manifest::load(&opts.manifest)?;
    caps::config::check_required(&manifest)?;
    let needs = |c: Capability| manifest.components.values().any(|d| d.grants.allows(c));

    if let Some(readiness) = observers.readiness {
        readiness.pending(Step::Components, "compiling and loading the components");
    }
    let compiling = {
        let (manifest, cache) = (manifest.clone(), opts.cache.open());
        tokio::task::spawn_blocking(move || {
            let began = Instant::now();
            CompiledApp::compile(&manifest, cache).map(|c| (c, began.elapsed()))
        })
    };

    let databases = async {
        if !needs(Capability::Sql) {
            return Ok((Databases::new(), Duration::ZERO));
        }
        let began = Instant::now();
        let app_url =
            databases::app_location(&manifest, opts.database_url.as_deref(), &opts.data_dir);
        let (dbs, _) = databases::open(&manifest, &app_url).await?;
        for db in dbs.values() {
            if let Some(readiness) = observers.readiness {
                readiness.watch_database(db);
            }
            observers.metrics.watch_database(db);
        }
        anyhow::Ok((dbs, began.elapsed()))
    };
    let cluster = async {
        let wanted = needs(Capability::Kube)
            || matches!(&opts.cluster, ClusterSource::Embedded(e) if e.start_unused);
        if !wanted {
            return Ok((None, None, Duration::ZERO));
        }
        let began = Instant::now();
        let (mut cluster, embedded, is_embedded) = connect_cluster(opts).await?;
        if is_embedded {
            if let Some(readiness) = observers.readiness {
                readiness.pending(
                    Step::Manifests,
                    "applying the manifest's Kubernetes objects",
                );
            }
            let patience = match &opts.cluster {
                ClusterSource::Embedded(e) => e.manifests_patience,
                _ => None,
            };
            cluster = prepare_embedded(&manifest, cluster, patience).await?;
        }
        // Probed and counted with the identity the components use.
        if let Some(readiness) = observers.readiness {
            readiness.watch_cluster(&cluster);
        }
        observers.metrics.watch_cluster(&cluster);
        anyhow::Ok((Some(cluster), embedded, began.elapsed()))
    };
    let ((databases, database_took), (cluster, embedded, cluster_took)) =
        tokio::try_join!(databases, cluster)?;
    // On a cluster of its own, lethe applies nothing: an administrator did (deploy/).
    if let Some(readiness) = observers.readiness {
        readiness.done(Step::Manifests);
    }

    let envs = capability_envs(
        &manifest,
        &databases,
        cluster.as_ref(),
        &opts.instance_id,
        observers,
    )?;
    let waited = Instant::now();
    let (compiled, compile_took) = compiling
        .await
        .context("compiling the components stopped")??;
    let compile_waited = waited.elapsed();
    let (cached, fresh) = (compiled.cached, compiled.compiled);
    let linking = Instant::now();
    let runtime = Runtime::link(&manifest, compiled, envs)?;
    let link_took = linking.elapsed();
    for component in runtime.components() {
        let refused = match configuration::check(component).await? {
            configuration::Checked::NoCheck | configuration::Checked::Accepted => continue,
            configuration::Checked::Refused(why) => format!("component `{}`: {why}", component.id),
        };
        if let Some(readiness) = observers.readiness {
            readiness.failed(Step::Components, refused.clone());
        }
        anyhow::bail!("{refused}");
    }
    let total = started.elapsed();
    let startup = &observers.metrics.startup;
    for (step, took) in [
        ("database", database_took),
        ("cluster", cluster_took),
        ("compile", compile_took),
        ("link", link_took),
        ("total", total),
    ] {
        startup
            .get_or_create(&crate::metrics::StartupLabels { step })
            .set(took.as_secs_f64());
    }
    tracing::info!(
        "configured in {:.2} s: database and migrations {:.2} s and cluster {:.2} s, side by side \
         with the components {:.2} s ({cached} from the cache, {fresh} compiled{}; waited {:.2} s \
         for them), then linking {:.2} s",
        total.as_secs_f64(),
        database_took.as_secs_f64(),
        cluster_took.as_secs_f64(),
        compile_took.as_secs_f64(),
        runtime
            .cache_dir()
            .map(|d| format!(", cache {}", d.display()))
            .unwrap_or_else(|| ", no cache".into()),
        compile_waited.as_secs_f64(),
        link_took.as_secs_f64(),
    );
    Ok(ConfiguredApp {
        manifest,
        databases,
        cluster,
        embedded,
        runtime,
    })
}

/// Sets up the embedded cluster as an administrator would before lethe runs there: applies the
/// manifest's `kubernetes_manifests` (and each component's `kubernetes_manifests_when` whose
/// variable has its value) with `admin`, the cluster's administrator, and returns the
/// cluster the components use. With `service_account` set that is the same cluster acting as
/// lethe's ServiceAccount, with exactly the rights the manifests bound (SECURITY.md H1), never as
/// the administrator.
async fn prepare_embedded(
    manifest: &Manifest,
    admin: lethe_kube::Cluster,
    patience: Option<Duration>,
) -> anyhow::Result<lethe_kube::Cluster> {
    let mut files = manifest.kubernetes_manifests();
    for decl in manifest.components.values() {
        if decl.grants.kubernetes_manifests_when.is_empty() {
            continue;
        }
        let config = caps::config::resolve(manifest, decl)?;
        for when in &decl.grants.kubernetes_manifests_when {
            if config.get(&when.variable) != Some(&when.equals) {
                continue;
            }
            for file in &when.files {
                if !files.contains(file) {
                    files.push(file.clone());
                }
            }
        }
    }
    for path in files {
        let patience = patience.unwrap_or(crate::kubernetes_manifests::DEFAULT_PATIENCE);
        crate::kubernetes_manifests::apply_file_within(&admin, &path, patience).await?;
    }
    let Some((namespace, name)) = manifest.settings.service_account() else {
        return Ok(admin);
    };
    let token = crate::service_account::token(&admin, namespace, name).await?;
    let cluster = admin.with_privileged_token(&token)?;
    tracing::info!("host identity: system:serviceaccount:{namespace}:{name}");
    Ok(cluster)
}

/// Opens every label's database of the application, as `lethe up` does at start (splitting an
/// older single database into them), applies each component's migrations, and returns what each
/// component got (`lethe migrate`). This is how databases are prepared for hosts that apply no
/// migrations of their own, such as Spin.
pub async fn migrate(
    manifest: &Path,
    database_url: Option<&str>,
    data_dir: &Path,
) -> anyhow::Result<databases::Opened> {
    let manifest = manifest::load(manifest)?;
    if database_url.is_none() {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("cannot create data dir {}", data_dir.display()))?;
    }
    let app_url = databases::app_location(&manifest, database_url, data_dir);
    Ok(databases::open(&manifest, &app_url).await?.1)
}

/// Each component's capability environment: its grants, its resolved configuration (plus the
/// host's `lethe_instance_id`), and the database and cluster if it is granted them.
fn capability_envs(
    manifest: &Manifest,
    databases: &Databases,
    cluster: Option<&lethe_kube::Cluster>,
    instance_id: &str,
    observers: &Observers<'_>,
) -> anyhow::Result<BTreeMap<String, Arc<CapabilityEnv>>> {
    let mut envs = BTreeMap::new();
    for (id, decl) in &manifest.components {
        let mut config = caps::config::resolve(manifest, decl)?;
        config.insert(
            caps::config::INSTANCE_ID_KEY.to_string(),
            instance_id.to_string(),
        );
        let rate_limit = Arc::new(
            lethe_kube::RateLimit::new(decl.grants.kube_rate_limit())
                .with_context(|| format!("component `{id}`"))?,
        );
        if decl.grants.allows(Capability::Kube) {
            observers.metrics.watch_rate_limit(id, &rate_limit);
        }
        let env = CapabilityEnv {
            component_id: Arc::from(id.as_str()),
            grants: decl.grants.clone(),
            config,
            database: decl
                .database
                .as_ref()
                .and_then(|label| databases.get(label))
                .cloned(),
            cluster: match cluster.filter(|_| decl.grants.allows(Capability::Kube)) {
                Some(cluster) => Some(component_cluster(manifest, id, cluster, observers)?),
                None => None,
            },
            progress: observers.progress.clone(),
            metrics: observers.metrics.clone(),
            kube_rate_limit: rate_limit,
            wake: Arc::new(tokio::sync::Notify::new()),
            denials: observers.denials.clone(),
            held_leases: Default::default(),
        };
        envs.insert(id.clone(), Arc::new(env));
    }
    Ok(envs)
}

/// The cluster component `id` reaches: when it is granted the privileged identity, the host's
/// cluster acting as the component's own ServiceAccount ([`Manifest::component_account`]) by
/// impersonation, so its privileged calls have exactly the rights that account's RBAC grants and
/// no other component's; otherwise the host's cluster, whose privileged client the component can
/// never open (only its callers' clients).
fn component_cluster(
    manifest: &Manifest,
    id: &str,
    cluster: &lethe_kube::Cluster,
    observers: &Observers<'_>,
) -> anyhow::Result<lethe_kube::Cluster> {
    let Some((namespace, name)) = manifest.component_account(id) else {
        return Ok(cluster.clone());
    };
    let user = format!("system:serviceaccount:{namespace}:{name}");
    let own = cluster
        .impersonating(&user)
        .with_context(|| format!("component `{id}`: acting as {user}"))?;
    tracing::info!("component `{id}` acts as {user}");
    observers.metrics.watch_cluster(&own);
    Ok(own)
}

/// The cluster as its kubeconfig's identity, the embedded server when it was started here, and
/// whether it is the embedded cluster (started or joined).
async fn connect_cluster(
    opts: &AppOptions,
) -> anyhow::Result<(
    lethe_kube::Cluster,
    Option<lethe_apiserver::RunningApiServer>,
    bool,
)> {
    let embedded = match &opts.cluster {
        ClusterSource::Kubeconfig(path) => {
            let cluster = lethe_kube::Cluster::from_kubeconfig(path, Default::default()).await?;
            return Ok((cluster, None, false));
        }
        ClusterSource::InCluster => {
            let cluster = lethe_kube::Cluster::infer(Default::default()).await?;
            return Ok((cluster, None, false));
        }
        ClusterSource::Embedded(embedded) => embedded,
    };
    let dir = opts.data_dir.join("cluster");
    let kubeconfig = dir.join("kubeconfig");
    if embedded.join_running && server_answers(&kubeconfig).await {
        tracing::info!(
            "using the embedded cluster of the running lethe (kubeconfig {})",
            kubeconfig.display()
        );
        let cluster = lethe_kube::Cluster::from_kubeconfig(&kubeconfig, Default::default()).await?;
        return Ok((cluster, None, true));
    }
    if embedded.join_running {
        tracing::info!(
            "no running embedded cluster; starting it on {}",
            dir.display()
        );
    }
    let defaults = lethe_apiserver::ApiServerConfig::default();
    let server = lethe_apiserver::start(lethe_apiserver::ApiServerConfig {
        data_dir: Some(dir),
        listen: embedded.listen.unwrap_or(defaults.listen),
        // kubectl sends bearer tokens only over TLS.
        tls: true,
        plain_listen: None,
        faults: embedded.faults.clone(),
    })
    .await
    .context("cannot start the embedded cluster")?;
    let path = server
        .kubeconfig_path()
        .context("the embedded cluster wrote no kubeconfig")?
        .to_path_buf();
    let cluster = lethe_kube::Cluster::from_kubeconfig(&path, Default::default()).await?;
    Ok((cluster, Some(server), true))
}

/// Whether the `server:` of `kubeconfig` accepts a TCP connection.
async fn server_answers(kubeconfig: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(kubeconfig) else {
        return false;
    };
    let Some(server) = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:").map(str::trim))
    else {
        return false;
    };
    let authority = server
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    matches!(
        tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(authority)
        )
        .await,
        Ok(Ok(_))
    )
}

/// This machine's host name, for host identities.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "lethe".to_string())
}
