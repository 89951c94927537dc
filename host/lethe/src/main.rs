//! The `lethe` command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use lethe::app::{App, UpOptions};
use lethe::configure::{ClusterSource, EmbeddedCluster};

#[derive(Parser)]
#[command(
    name = "lethe",
    version,
    about = "Asynchronous deletion and reconciliation on Kubernetes, as WebAssembly components"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the manifest's HTTP routes and run its cron schedules.
    Up(UpArgs),
    /// Run only the embedded Kubernetes API server.
    Cluster(ClusterArgs),
    /// Run the manifest's reconcilers once, on the same database and cluster as `lethe up`.
    Sync(SyncArgs),
    /// Make a new component from a template: its crate or Python package, its migrations, and
    /// its stanza in the application's `spin.toml`.
    New(NewArgs),
    /// Run the manifest's build commands (`[component.<id>.build]`), as `spin build` does.
    Build(BuildArgs),
    /// Apply every component's migrations to the database and exit (for example, to prepare
    /// the SQLite database of a Spin application, which applies none of its own).
    Migrate(AppArgs),
    /// Show or clear the compiled-component cache that every `lethe up` of this user shares.
    Cache(CacheCommand),
}

#[derive(clap::Args)]
struct CacheCommand {
    #[command(subcommand)]
    action: CacheAction,
    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(Subcommand)]
enum CacheAction {
    /// Print the cache's directory, how many compiled components it holds and their size.
    Info,
    /// Remove every compiled component from it; the next start compiles them again.
    Clear,
}

/// Where compiled components are cached, shared by every data dir of the user.
#[derive(clap::Args)]
struct CacheArgs {
    /// The compiled-component cache (default `$XDG_CACHE_HOME/lethe/components`, else
    /// `~/.cache/lethe/components`).
    #[arg(long, env = "LETHE_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// The bound on its size in MiB: past it, the least recently used components are removed.
    #[arg(long, env = "LETHE_CACHE_MAX_MB", default_value_t = 1024)]
    cache_max_mb: u64,
}

impl CacheArgs {
    fn options(&self, data_dir: &std::path::Path) -> lethe::configure::CacheOptions {
        let mut options =
            lethe::configure::CacheOptions::for_user(self.cache_dir.clone(), data_dir);
        options.max_bytes = self.cache_max_mb.saturating_mul(1 << 20);
        options
    }
}

#[derive(clap::Args)]
struct NewArgs {
    /// What to make.
    #[arg(value_enum)]
    template: lethe::scaffold::Template,
    /// The component's name: its id, its route (`/<name>/...`) and its directory.
    name: String,
    /// The language to write it in.
    #[arg(long, value_enum, default_value = "rust")]
    lang: lethe::scaffold::Lang,
    /// The kind a `job-status` component tracks or a `reconciler` keeps, as `<apiVersion>/<Kind>`
    /// (`v1/ConfigMap`, `apps/v1/Deployment`).
    #[arg(long)]
    kind: Option<lethe::scaffold::Kind>,
    /// The application directory: its `spin.toml` gets the component (and is written if
    /// missing), `components/<name>/` its files.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The lethe checkout whose guest SDKs, WIT and Spin adapter the component uses (default:
    /// the one this binary was built from).
    #[arg(long, env = "LETHE_ROOT")]
    lethe_root: Option<PathBuf>,
}

#[derive(clap::Args)]
struct BuildArgs {
    /// The Spin v2 manifest.
    #[arg(long, default_value = "spin.toml")]
    manifest: PathBuf,
    /// Only this component.
    #[arg(long)]
    component: Option<String>,
}

/// How long a start waits for a failing embedded cluster.
#[derive(clap::Args)]
struct PatienceArgs {
    /// Seconds the start waits for a failing embedded cluster while it applies each of the
    /// manifest's Kubernetes objects, before it gives up.
    #[arg(
        long,
        default_value_t = lethe::kubernetes_manifests::DEFAULT_PATIENCE.as_secs(),
        env = "LETHE_MANIFESTS_PATIENCE_SECONDS"
    )]
    manifests_patience_seconds: u64,
}

impl PatienceArgs {
    fn manifests(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(
            self.manifests_patience_seconds,
        ))
    }
}

/// The application a command works on, as `lethe up` runs it: its manifest and its database.
#[derive(clap::Args)]
struct AppArgs {
    /// The Spin v2 manifest.
    #[arg(long, default_value = "spin.toml")]
    manifest: PathBuf,
    /// The data dir of `lethe up` (its SQLite database, its embedded cluster).
    #[arg(long, default_value = ".lethe", env = "LETHE_DATA_DIR")]
    data_dir: PathBuf,
    /// Database URL (`postgres://…` or `sqlite:<path>`, e.g. `sqlite:.spin/sqlite_db.db` for
    /// Spin's `default` database); SQLite in the data dir when absent.
    #[arg(long, env = "LETHE_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
}

#[derive(clap::Args)]
struct SyncArgs {
    /// Run one pass and exit (the only mode: the periodic sync is `lethe up`'s cron trigger).
    #[arg(long, required = true)]
    once: bool,
    #[command(flatten)]
    app: AppArgs,
    /// Use this kubeconfig instead of the embedded cluster.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Only this component (default: every component exporting lethe:platform/reconciler).
    #[arg(long)]
    component: Option<String>,
    /// The Lease holder identity (default `<hostname>-sync`).
    #[arg(long)]
    instance_id: Option<String>,
    /// Print the reports as JSON lines instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    patience: PatienceArgs,
    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(clap::Args)]
struct UpArgs {
    /// The Spin v2 manifest.
    #[arg(long, default_value = "spin.toml")]
    manifest: PathBuf,
    /// Address to serve HTTP on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// Address of the admin listener: /healthz, /readyz, /metrics and /lethe/status.
    #[arg(long, default_value = "127.0.0.1:9090", env = "LETHE_ADMIN_LISTEN")]
    admin_listen: SocketAddr,
    /// Whether the admin listener asks callers of /metrics, /lethe/status and /readyz?verbose
    /// for a bearer token (checked with TokenReview and SubjectAccessReview): `auto` asks
    /// everywhere but on a loopback address, `token` everywhere, `none` nowhere (loopback only).
    #[arg(long, value_enum, default_value = "auto", env = "LETHE_ADMIN_AUTH")]
    admin_auth: lethe::admin::access::AdminAuth,
    /// Directory for the database and the embedded cluster.
    #[arg(long, default_value = ".lethe", env = "LETHE_DATA_DIR")]
    data_dir: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Database URL (`postgres://…` or `sqlite:<path>`); SQLite in the data dir when absent.
    #[arg(long, env = "LETHE_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Use this kubeconfig instead of the embedded cluster.
    #[arg(long, env = "KUBECONFIG", conflicts_with = "in_cluster")]
    kubeconfig: Option<PathBuf>,
    /// Use the in-cluster service account instead of the embedded cluster.
    #[arg(long)]
    in_cluster: bool,
    /// Address of the embedded cluster.
    #[arg(long, default_value = "127.0.0.1:0")]
    cluster_listen: SocketAddr,
    #[command(flatten)]
    patience: PatienceArgs,
    /// A JSON file of faults for the embedded cluster to inject from the start (latency_ms,
    /// error_rate, error_status, retry_after_seconds, drop_rate, stale_read_ms).
    #[arg(long, env = "LETHE_CLUSTER_FAULTS")]
    cluster_faults: Option<PathBuf>,
    /// Seconds between SIGTERM and closing, as kube-apiserver's `--shutdown-delay-duration`:
    /// `/readyz` fails at once while requests and ticks are still served, so that a Service stops
    /// routing here first. A second signal closes at once.
    #[arg(long, default_value_t = 0, env = "LETHE_SHUTDOWN_DELAY_SECONDS")]
    shutdown_delay_seconds: u64,
    /// Rebuild a component when a file its `[component.<id>.build]` `watch` list names changes,
    /// and serve the new build; a build that fails leaves the previous one serving.
    #[arg(long)]
    watch: bool,
}

#[derive(clap::Args)]
struct ClusterArgs {
    /// Directory for the cluster's database, token file and kubeconfig.
    #[arg(long, default_value = ".lethe", env = "LETHE_DATA_DIR")]
    data_dir: PathBuf,
    /// Address to serve the Kubernetes API on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Serve plain HTTP instead of HTTPS with a generated CA (kubectl then sends no tokens).
    #[arg(long, conflicts_with = "plain_listen")]
    plain_http: bool,
    /// Also serve the cluster over plain HTTP on this address, for hosts whose `wasi:http` trusts
    /// only public roots; kubectl keeps the kubeconfig's HTTPS address.
    #[arg(long)]
    plain_listen: Option<SocketAddr>,
    /// A JSON file of faults to inject from the start (see `lethe up --cluster-faults`).
    #[arg(long)]
    faults: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The chain of causes, without a backtrace: start-up errors are for operators.
            tracing::error!("{e:#}");
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    init_logging()?;
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Up(args) => up(args).await,
            Command::Cluster(args) => cluster(args).await,
            Command::Sync(args) => sync(args).await,
            Command::Migrate(args) => migrate(args).await,
            Command::New(args) => new_component(args),
            Command::Build(args) => build(args),
            Command::Cache(args) => cache(args),
        }
    })
}

fn new_component(args: NewArgs) -> anyhow::Result<()> {
    let made = lethe::scaffold::NewComponent {
        template: args.template,
        name: args.name.clone(),
        lang: args.lang,
        kind: args.kind,
        app_dir: args.dir.clone(),
        lethe_root: args
            .lethe_root
            .unwrap_or_else(|| PathBuf::from(lethe::REPO_ROOT)),
    }
    .write()?;
    let in_dir = |command: &str| {
        if args.dir == std::path::Path::new(".") {
            command.to_string()
        } else {
            format!("cd {} && {command}", args.dir.display())
        }
    };
    println!(
        "made component `{name}` in {dir}, and its stanza in {manifest}{joined}.\n\n\
         next:\n  {test}\n  {build}\n  {up}\n  {try_it}",
        name = args.name,
        dir = made.dir.display(),
        manifest = made.manifest.display(),
        joined = if made.in_workspace {
            " (the crate joined the Cargo workspace)"
        } else {
            ""
        },
        test = made.test_command,
        build = in_dir("lethe build"),
        up = in_dir("lethe up"),
        try_it = made.try_it,
    );
    Ok(())
}

fn build(args: BuildArgs) -> anyhow::Result<()> {
    let manifest = lethe::manifest::load(&args.manifest)?;
    let built = lethe::component_build::build_all(&manifest, args.component.as_deref())?;
    eprintln!("built {} component(s)", built.len());
    Ok(())
}

/// Logs go to stderr, filtered by `LETHE_LOG` (default `info`), as text or, with
/// `LETHE_LOG_FORMAT=json`, as one JSON object per line carrying the fields of the event and of
/// the spans it happened in (a request's `id` among them).
fn init_logging() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LETHE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let format = std::env::var("LETHE_LOG_FORMAT").unwrap_or_default();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format.as_str() {
        "" | "text" => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        "json" => builder
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .init(),
        other => anyhow::bail!("LETHE_LOG_FORMAT is `{other}`; it must be `text` or `json`"),
    }
    Ok(())
}

async fn up(args: UpArgs) -> anyhow::Result<()> {
    let cluster = match (args.kubeconfig, args.in_cluster) {
        (Some(path), _) => ClusterSource::Kubeconfig(path),
        (None, true) => ClusterSource::InCluster,
        (None, false) => ClusterSource::Embedded(EmbeddedCluster {
            listen: Some(args.cluster_listen),
            faults: read_faults(args.cluster_faults.as_deref())?,
            join_running: false,
            // Served to kubectl even when no component needs it.
            start_unused: true,
            manifests_patience: args.patience.manifests(),
        }),
    };
    let signal = ShutdownSignal::listen();
    let delay = std::time::Duration::from_secs(args.shutdown_delay_seconds);
    let app = App::start(UpOptions {
        manifest: args.manifest,
        listen: args.listen,
        admin_listen: args.admin_listen,
        admin_auth: args.admin_auth,
        cache: args.cache.options(&args.data_dir),
        data_dir: args.data_dir,
        database_url: args.database_url,
        cluster,
        watch: args.watch,
    })
    .await?;
    signal.wait().await;
    tracing::info!("shutting down");
    let again = ShutdownSignal::listen();
    tokio::select! {
        () = app.drain(delay) => {}
        () = again.wait() => tracing::info!("a second signal: closing now"),
    }
    app.shutdown().await;
    Ok(())
}

async fn migrate(args: AppArgs) -> anyhow::Result<()> {
    let opened =
        lethe::configure::migrate(&args.manifest, args.database_url.as_deref(), &args.data_dir)
            .await?;
    for label in &opened.split {
        println!("database `{label}`: split from the older single database");
    }
    for (component, versions) in opened.applied {
        match versions.len() {
            0 => println!("{component}: up to date"),
            n => println!("{component}: applied {n} migration(s)"),
        }
    }
    Ok(())
}

async fn sync(args: SyncArgs) -> anyhow::Result<()> {
    let _ = args.once;
    let outcomes = lethe::sync::run_once(lethe::sync::SyncOptions {
        cache: args.cache.options(&args.app.data_dir),
        manifest: args.app.manifest,
        data_dir: args.app.data_dir,
        database_url: args.app.database_url,
        kubeconfig: args.kubeconfig,
        component: args.component,
        instance_id: args.instance_id,
        progress: !args.json && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        manifests_patience: args.patience.manifests(),
    })
    .await?;
    let mut failed = Vec::new();
    for outcome in outcomes {
        match outcome.result {
            Ok(report) if args.json => {
                println!("{}", lethe::sync::report_json(&outcome.component, &report))
            }
            Ok(report) => print!("{}", lethe::sync::report_text(&outcome.component, &report)),
            Err(e) => failed.push(format!("{}: {e:#}", outcome.component)),
        }
    }
    if !failed.is_empty() {
        anyhow::bail!("no pass ran for {}", failed.join("; "));
    }
    Ok(())
}

fn cache(args: CacheCommand) -> anyhow::Result<()> {
    // The cache is the user's, whatever the data dir; without a home directory there is none.
    let options = args.cache.options(std::path::Path::new(".lethe"));
    let dir = options
        .dir
        .context("no cache directory: set LETHE_CACHE_DIR or HOME")?;
    let cache = lethe::runtime::cache::ComponentCache::open(&dir, options.max_bytes)?;
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    match args.action {
        CacheAction::Info => {
            let usage = cache.usage()?;
            println!(
                "{}: {} compiled component(s), {:.1} MiB of {} MiB",
                dir.display(),
                usage.entries,
                mib(usage.bytes),
                args.cache.cache_max_mb
            );
        }
        CacheAction::Clear => {
            let cleared = cache.clear()?;
            println!(
                "{}: removed {} compiled component(s), {:.1} MiB",
                dir.display(),
                cleared.entries,
                mib(cleared.bytes)
            );
        }
    }
    Ok(())
}

async fn cluster(args: ClusterArgs) -> anyhow::Result<()> {
    let signal = ShutdownSignal::listen();
    let server = lethe_apiserver::start(lethe_apiserver::ApiServerConfig {
        data_dir: Some(args.data_dir.join("cluster")),
        listen: args.listen,
        tls: !args.plain_http,
        plain_listen: args.plain_listen,
        faults: read_faults(args.faults.as_deref())?,
    })
    .await?;
    tracing::info!("Kubernetes API at {}", server.url());
    if let Some(plain) = server.plain_url() {
        tracing::info!("the same API over plain HTTP at {plain}");
    }
    if let Some(path) = server.kubeconfig_path() {
        tracing::info!("kubeconfig (admin): {}", path.display());
    }
    signal.wait().await;
    server.shutdown().await;
    Ok(())
}

/// The fault configuration in the JSON file at `path`, or none.
fn read_faults(path: Option<&std::path::Path>) -> anyhow::Result<lethe_apiserver::FaultConfig> {
    let Some(path) = path else {
        return Ok(Default::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the fault configuration {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a fault configuration", path.display()))
}

/// SIGINT or SIGTERM, listened for from the moment it is created: a signal that arrives while
/// the host is still starting (or right after its start-up log) is not lost to the default
/// action, which would kill the process without a graceful shutdown.
struct ShutdownSignal {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    interrupt: std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>,
}

impl ShutdownSignal {
    fn listen() -> ShutdownSignal {
        // `ctrl_c` installs its handler on first poll; poll it once now so SIGINT is caught too.
        let mut interrupt: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>> =
            Box::pin(tokio::signal::ctrl_c());
        let waker = futures::task::noop_waker();
        let _ = interrupt
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker));
        ShutdownSignal {
            #[cfg(unix)]
            term: match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!("cannot listen for SIGTERM: {e}");
                    None
                }
            },
            interrupt,
        }
    }

    async fn wait(mut self) {
        #[cfg(unix)]
        if let Some(term) = self.term.as_mut() {
            tokio::select! {
                _ = &mut self.interrupt => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = self.interrupt.await;
    }
}
