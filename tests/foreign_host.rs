//! The same handlers in hosts that have none of lethe's capabilities:
//!
//! * `cf-api` composed at build time with the `wasi-adapter` component (`kube` over `wasi:http`,
//!   `log` to stderr, `config` from the environment) runs in a plain wasmtime host that links only
//!   WASI 0.2 and `wasi:http`, as `wasmtime serve` does, against the embedded cluster over plain
//!   HTTP;
//! * `smoke` composed with the `spin-adapter` (`sql` over Spin's SQLite, `config` from Spin
//!   variables) runs in a host that adds only `spin:sqlite` and Spin's variables, implemented here
//!   the way Spin does (one SQLite database, statements prepared and stepped with their `?N`
//!   parameters), with Spin's routing headers and its schema prepared first;
//! * the repository's `spin.toml` names, for every handler, the Spin `dependencies` that supply
//!   its `lethe:platform` imports, checked by Spin's own matching rules, and the composition Spin
//!   would make links in that Spin-like host.
//!
//! Unlike the other scenario tests this one ignores `KUBECONFIG`: outgoing `wasi:http` requests
//! trust only the public web roots, which neither the embedded cluster's generated CA nor a typical
//! cluster's private CA is, so the test serves its own cluster without TLS.

use crate::support;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::Value as Json;
use wasmtime::component::{Component, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// A host's per-request state: WASI and `wasi:http`, plus Spin's SQLite and variables when the
/// host is Spin-like.
struct Plain {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    /// The one database the component is granted, with its label (as Spin's runtime config maps
    /// a label to a file and the manifest's `sqlite_databases` grants it).
    sqlite: Option<(String, Database)>,
    variables: Arc<Vec<(String, String)>>,
}

/// The application's one SQLite database, shared by every request as Spin shares it.
type Database = Arc<Mutex<rusqlite::Connection>>;

/// Host bindings of `spin:sqlite` and Spin's variables, from the adapter world that imports them.
mod spin {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "lethe:platform/spin-adapter",
        imports: { default: trappable },
        with: { "spin:sqlite/sqlite.connection": super::SpinConnection },
    });
}

use spin::fermyon::spin::variables as spin_variables;
use spin::spin::sqlite::sqlite as spin_sqlite;

impl spin_variables::Host for Plain {
    /// Spin's rules: a valid name, then the component's variable or `undefined`.
    fn get(&mut self, name: String) -> wasmtime::Result<Result<String, spin_variables::Error>> {
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Ok(Err(spin_variables::Error::InvalidName(name)));
        }
        Ok(self
            .variables
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
            .ok_or(spin_variables::Error::Undefined(name)))
    }
}

/// An open `spin:sqlite` connection (the database lives in [`Plain::sqlite`]).
pub struct SpinConnection;

impl spin_sqlite::Host for Plain {}

impl spin_sqlite::HostConnection for Plain {
    fn open(
        &mut self,
        database: String,
    ) -> wasmtime::Result<Result<Resource<SpinConnection>, spin_sqlite::Error>> {
        match &self.sqlite {
            Some((label, _)) if *label == database => {}
            Some(_) => return Ok(Err(spin_sqlite::Error::AccessDenied)),
            None => return Ok(Err(spin_sqlite::Error::NoSuchDatabase)),
        }
        Ok(Ok(self.table.push(SpinConnection)?))
    }

    fn execute(
        &mut self,
        _connection: Resource<SpinConnection>,
        statement: String,
        parameters: Vec<spin_sqlite::Value>,
    ) -> wasmtime::Result<Result<spin_sqlite::QueryResult, spin_sqlite::Error>> {
        let Some((_, db)) = &self.sqlite else {
            return Ok(Err(spin_sqlite::Error::InvalidConnection));
        };
        let db = db
            .lock()
            .map_err(|_| wasmtime::format_err!("database lock poisoned"))?;
        Ok(run_statement(&db, &statement, parameters)
            .map_err(|e| spin_sqlite::Error::Io(e.to_string())))
    }

    fn drop(&mut self, connection: Resource<SpinConnection>) -> wasmtime::Result<()> {
        self.table.delete(connection)?;
        Ok(())
    }
}

fn run_statement(
    db: &rusqlite::Connection,
    statement: &str,
    parameters: Vec<spin_sqlite::Value>,
) -> rusqlite::Result<spin_sqlite::QueryResult> {
    use rusqlite::types::{Value as Sql, ValueRef};
    use spin_sqlite::Value as V;
    let mut stmt = db.prepare(statement)?;
    let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
    let params: Vec<Sql> = parameters
        .into_iter()
        .map(|v| match v {
            V::Integer(i) => Sql::Integer(i),
            V::Real(f) => Sql::Real(f),
            V::Text(t) => Sql::Text(t),
            V::Blob(b) => Sql::Blob(b),
            V::Null => Sql::Null,
        })
        .collect();
    let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let mut values = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
            values.push(match row.get_ref(i)? {
                ValueRef::Null => V::Null,
                ValueRef::Integer(i) => V::Integer(i),
                ValueRef::Real(f) => V::Real(f),
                ValueRef::Text(t) => V::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => V::Blob(b.to_vec()),
            });
        }
        out.push(spin_sqlite::RowResult { values });
    }
    Ok(spin_sqlite::QueryResult { columns, rows: out })
}

impl WasiView for Plain {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Plain {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: wasmtime_wasi_http::default_hooks(),
        }
    }
}

/// What `wasmtime serve --env K=V … component.wasm` amounts to, minus the socket; with a
/// database, what Spin supplies too.
struct PlainHost {
    engine: Engine,
    pre: ProxyPre<Plain>,
    env: Vec<(String, String)>,
    sqlite: Option<(String, Database)>,
    variables: Arc<Vec<(String, String)>>,
}

struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Json {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl PlainHost {
    fn new(
        component: &std::path::Path,
        env: Vec<(String, String)>,
        sqlite: Option<(String, Database)>,
    ) -> anyhow::Result<PlainHost> {
        let engine = Engine::new(Config::new().wasm_component_model(true))?;
        let component = Component::from_file(&engine, component)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        if sqlite.is_some() {
            spin_sqlite::add_to_linker::<Plain, HasSelf<Plain>>(&mut linker, |s| s)?;
            spin_variables::add_to_linker::<Plain, HasSelf<Plain>>(&mut linker, |s| s)?;
        }
        let pre = ProxyPre::new(linker.instantiate_pre(&component)?)?;
        Ok(PlainHost {
            engine,
            pre,
            env,
            sqlite,
            variables: Arc::default(),
        })
    }

    /// The component's Spin variables (a Spin-like host's).
    fn with_variables(mut self, variables: &[(&str, &str)]) -> PlainHost {
        self.variables = Arc::new(
            variables
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        self
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> anyhow::Result<Answer> {
        self.call_with(method, path, token, body, &[]).await
    }

    async fn call_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<Answer> {
        let mut wasi = WasiCtx::builder();
        wasi.inherit_stderr();
        for (k, v) in &self.env {
            wasi.env(k, v);
        }
        let mut store = Store::new(
            &self.engine,
            Plain {
                table: ResourceTable::new(),
                wasi: wasi.build(),
                http: WasiHttpCtx::new(),
                sqlite: self.sqlite.clone(),
                variables: self.variables.clone(),
            },
        );
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("http://lethe.test:39100{path}"))
            .header("host", "lethe.test:39100");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default().to_string())))?;
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let incoming = store
            .data_mut()
            .http()
            .new_incoming_request(Scheme::Http, req)?;
        let out = store.data_mut().http().new_response_outparam(sender)?;
        let proxy = self.pre.instantiate_async(&mut store).await?;
        let task = tokio::spawn(async move {
            proxy
                .wasi_http_incoming_handler()
                .call_handle(&mut store, incoming, out)
                .await
        });
        let resp = match receiver.await {
            Ok(resp) => resp.map_err(|code| anyhow::anyhow!("wasi:http error {code:?}"))?,
            Err(_) => {
                task.await??;
                anyhow::bail!("the component set no response")
            }
        };
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await?.to_bytes();
        task.await??;
        Ok(Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

fn composed(name: &str) -> PathBuf {
    PathBuf::from(lethe::COMPONENTS_DIR)
        .join("foreign")
        .join(format!("{name}.wasm"))
}

/// The imports of a composed handler, by name.
fn imports_of(name: &str) -> Vec<String> {
    let engine = Engine::new(Config::new().wasm_component_model(true)).expect("engine");
    let component = Component::from_file(&engine, composed(name))
        .unwrap_or_else(|e| panic!("{name} is composed: {e:#}"));
    component
        .component_type()
        .imports(&engine)
        .map(|(name, _)| name.to_string())
        .collect()
}

#[test]
fn composed_handlers_import_only_wasi_and_spin() {
    let cf_api = imports_of("cf_api");
    assert!(
        cf_api.iter().all(|i| i.starts_with("wasi:")),
        "cf-api needs nothing but WASI: {cf_api:?}"
    );
    assert!(
        cf_api
            .iter()
            .any(|i| i.starts_with("wasi:http/outgoing-handler@"))
    );
    let mut with_sql = vec!["cf_job_status", "cf_reconciler", "data_jobs", "smoke"];
    if composed("smoke_py").exists() {
        with_sql.push("smoke_py");
    }
    for name in with_sql {
        let imports = imports_of(name);
        assert!(
            imports.iter().all(|i| spin_supplies(i)),
            "{name} imports only WASI and Spin's SQLite, variables and cron types: {imports:?}"
        );
        assert!(
            imports.iter().any(|i| i == "spin:sqlite/sqlite@3.0.0"),
            "{name}'s sql comes from Spin's SQLite: {imports:?}"
        );
    }
    // misbehave imports no lethe capability, so it runs anywhere as it is.
    assert!(!composed("misbehave").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_composed_with_the_spin_adapter_runs_on_spin_sqlite_and_variables() {
    smoke_twin_runs_on_spin("smoke", "/smoke", "smoke_note").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_smoke_composed_with_the_spin_adapter_runs_on_spin_sqlite_and_variables() {
    const TEST: &str =
        "the_python_smoke_composed_with_the_spin_adapter_runs_on_spin_sqlite_and_variables";
    if !support::python_components_built(TEST) {
        return;
    }
    smoke_twin_runs_on_spin("smoke-py", "/smoke-py", "smoke_py_note").await;
}

/// The smoke twin `component` (`smoke`, or `smoke-py` in Python), composed with the Spin adapter,
/// served at `route` in a host that adds only Spin's SQLite and variables; its notes land in
/// `table` of Spin's database.
async fn smoke_twin_runs_on_spin(component: &str, route: &'static str, table: &str) {
    let db = rusqlite::Connection::open_in_memory().expect("sqlite");
    // The schema `lethe migrate` prepares before `spin up`.
    let migrations = PathBuf::from(lethe::REPO_ROOT)
        .join("components")
        .join(component)
        .join("migrations");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&migrations)
        .expect("migrations")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        db.execute_batch(&std::fs::read_to_string(&file).expect("migration"))
            .expect("migration applies");
    }
    let db: Database = Arc::new(Mutex::new(db));
    // On Spin, configuration is the component's Spin variables, not the environment.
    let host = PlainHost::new(
        &composed(&component.replace('-', "_")),
        vec![("LETHE_VAR_GREETING".into(), "not read on Spin".into())],
        Some((component.to_owned(), db.clone())),
    )
    .expect("the composed smoke links against WASI, wasi:http and Spin's SQLite and variables")
    .with_variables(&[
        ("greeting", "hello from Spin"),
        ("sqlite_database", component),
    ]);
    // Spin's routing headers for the route `<route>/...`.
    let call = |method: &'static str, info: &'static str, body: Option<&'static str>| {
        let host = &host;
        async move {
            let path = format!("{route}{info}");
            let raw_route = format!("{route}/...");
            let headers = [
                ("spin-path-info", info),
                ("spin-matched-route", route),
                ("spin-component-route", route),
                ("spin-raw-component-route", raw_route.as_str()),
                ("spin-base-path", "/"),
            ];
            host.call_with(method, &path, None, body, &headers)
                .await
                .expect("call")
        }
    };

    let greeting = call("GET", "/greeting", None).await;
    assert_eq!(greeting.status, 200, "{}", greeting.body);
    assert_eq!(greeting.json()["greeting"], "hello from Spin");

    let created = call("PUT", "/notes/first", Some("one")).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let replaced = call("PUT", "/notes/first", Some("uno")).await;
    assert_eq!(
        replaced.status, 200,
        "an upsert that changed a row: {}",
        replaced.body
    );
    let read = call("GET", "/notes/first", None).await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert!(read.body.contains("uno"), "{}", read.body);
    let listed = call("GET", "/notes", None).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(listed.body.contains("first"), "{}", listed.body);
    let missing = call("GET", "/notes/nothing", None).await;
    assert_eq!(missing.status, 404, "{}", missing.body);

    // The rows are in Spin's database, where the adapter put them.
    let stored: String = db
        .lock()
        .expect("db")
        .query_row(
            &format!("SELECT body FROM {table} WHERE name = 'first'"),
            [],
            |r| r.get(0),
        )
        .expect("row");
    assert_eq!(stored, "uno");
}

/// The embedded cluster with the CF manifests applied, served over HTTPS (for kubectl) and over
/// plain HTTP beside it (for the adapter, whose `wasi:http` trusts only public roots): the cluster, its admin token, a client of it, and the token of cf-api's own ServiceAccount
/// (the adapter's privileged identity, as the component's under lethe). A caller `nobody-token-0123456789` has no
/// role anywhere.
struct CfCluster {
    dir: tempfile::TempDir,
    cluster: lethe_apiserver::RunningApiServer,
    admin: String,
    client: lethe_kube::Cluster,
    service_account: String,
}

impl CfCluster {
    async fn start() -> CfCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let cluster = lethe_apiserver::start(lethe_apiserver::ApiServerConfig {
            data_dir: Some(dir.path().join("cluster")),
            listen: "127.0.0.1:0".parse().expect("addr"),
            // HTTPS for kubectl and lethe's own client, plain HTTP beside it for the adapter.
            tls: true,
            plain_listen: Some("127.0.0.1:0".parse().expect("addr")),
            faults: Default::default(),
        })
        .await
        .expect("embedded cluster");
        let admin = cluster.admin_token().to_string();
        cluster.add_token("nobody-token-0123456789", "nobody", "nobody", &[]);
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, cluster.kubeconfig_yaml()).expect("kubeconfig");
        let client = lethe_kube::Cluster::from_kubeconfig(&kubeconfig, Default::default())
            .await
            .expect("cluster client");
        let shipped = lethe::manifest::load(&PathBuf::from(lethe::REPO_ROOT).join("spin.toml"))
            .expect("spin.toml");
        for path in shipped.kubernetes_manifests() {
            lethe::kubernetes_manifests::apply_file(&client, &path)
                .await
                .expect("CF manifests");
        }
        // cf-api's own account: on a host that impersonates no one, the component carries the
        // token of the account it acts as under lethe.
        let service_account =
            lethe::service_account::token(&client, "lethe-system", "lethe-cf-api")
                .await
                .expect("the ServiceAccount's token");
        CfCluster {
            dir,
            cluster,
            admin,
            client,
            service_account,
        }
    }

    async fn shutdown(self) {
        self.cluster.shutdown().await;
    }

    /// The environment that configures the composed `cf_api.wasm` for this cluster.
    fn cf_api_env(&self) -> Vec<(String, String)> {
        vec![
            (
                "LETHE_KUBE_URL".into(),
                self.cluster.plain_url().expect("plain HTTP").to_string(),
            ),
            ("LETHE_KUBE_TOKEN".into(), self.service_account.clone()),
            ("LETHE_VAR_CF_ROOT_NAMESPACE".into(), "cf".into()),
        ]
    }
}

/// A host serving a composed handler: in this process, as `wasmtime serve` would, or jco (a
/// second implementation of the component model and WASI, in Node.js) over a real socket.
enum Server {
    InProcess(PlainHost),
    Jco(JcoServe),
}

impl Server {
    /// The scheme and authority requests are sent to, which links must carry.
    fn origin(&self) -> String {
        match self {
            Server::InProcess(_) => "http://lethe.test:39100".to_string(),
            Server::Jco(jco) => jco.origin.clone(),
        }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> anyhow::Result<Answer> {
        match self {
            Server::InProcess(host) => host.call(method, path, token, body).await,
            Server::Jco(jco) => {
                let url = format!("{}{path}", jco.origin);
                let (method, token, body) = (
                    method.to_string(),
                    token.map(str::to_string),
                    body.map(str::to_string),
                );
                tokio::task::spawn_blocking(move || http_call(&method, &url, token, body)).await?
            }
        }
    }
}

/// One request over a socket.
fn http_call(
    method: &str,
    url: &str,
    token: Option<String>,
    body: Option<String>,
) -> anyhow::Result<Answer> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(60)))
        .build()
        .into();
    let mut req = http::Request::builder().method(method).uri(url);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let mut resp = match body {
        Some(b) => agent.run(req.header("content-type", "application/json").body(b)?)?,
        None => agent.run(req.body(())?)?,
    };
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.body_mut().read_to_string()?;
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// `jco serve` of a composed handler, stopped when dropped.
struct JcoServe {
    child: std::process::Child,
    origin: String,
}

impl Drop for JcoServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The jco command: `LETHE_TEST_JCO`, else the copy `.ci/run` and the README install under
/// `target/jco`. `None` (the test skips) only outside CI: in CI a missing jco fails the test.
fn jco_command() -> Option<PathBuf> {
    let path = std::env::var_os("LETHE_TEST_JCO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(lethe::REPO_ROOT).join("target/jco/node_modules/.bin/jco")
        });
    if path.exists() {
        return Some(path);
    }
    let hint = "install it with `npm install --prefix target/jco @bytecodealliance/jco@1.35.0` \
                or set LETHE_TEST_JCO";
    assert!(
        std::env::var("CI").is_err(),
        "jco is required in CI but {} does not exist: {hint}",
        path.display()
    );
    eprintln!("skipping the jco test: no {}; {hint}", path.display());
    None
}

impl JcoServe {
    /// Serves `component` with `env`, once it answers (jco transpiles the component first).
    fn start(
        jco: &std::path::Path,
        component: &std::path::Path,
        env: &[(String, String)],
    ) -> JcoServe {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = std::process::Command::new(jco)
            .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
            .arg(component)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", jco.display()));
        let mut serve = JcoServe {
            child,
            origin: format!("http://127.0.0.1:{port}"),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
        loop {
            if let Some(status) = serve.child.try_wait().expect("jco's status") {
                panic!("jco serve exited before answering: {status}");
            }
            if http_call("GET", &format!("{}/", serve.origin), None, None).is_ok() {
                return serve;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "jco serve did not answer within 180 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cf_api_composed_with_the_adapter_runs_in_a_host_without_lethe_capabilities() {
    let cf = CfCluster::start().await;
    let host = PlainHost::new(&composed("cf_api"), cf.cf_api_env(), None)
        .expect("the composed component links against WASI and wasi:http alone");
    cf_api_scenario(&cf, &Server::InProcess(host)).await;
    cf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cf_api_composed_with_the_adapter_runs_under_jco_serve() {
    let Some(jco) = jco_command() else {
        return;
    };
    let cf = CfCluster::start().await;
    let (component, env) = (composed("cf_api"), cf.cf_api_env());
    let serve = tokio::task::spawn_blocking(move || JcoServe::start(&jco, &component, &env))
        .await
        .expect("jco serve");
    let server = Server::Jco(serve);
    cf_api_scenario(&cf, &server).await;
    drop(server);
    cf.shutdown().await;
}

/// What a CF client does through the composed `cf_api`: links, authentication, create, list, a
/// hidden org, and a deletion accepted as a job.
async fn cf_api_scenario(cf: &CfCluster, server: &Server) {
    let admin = cf.admin.as_str();
    let origin = server.origin();

    // Links carry the request's own scheme and authority, port included (no Spin header here).
    let root = server.call("GET", "/", None, None).await.expect("call");
    assert_eq!(root.status, 200, "{}", root.body);
    assert_eq!(root.json()["links"]["self"]["href"], origin.as_str());
    assert_eq!(
        root.json()["links"]["cloud_controller_v3"]["href"],
        format!("{origin}/v3")
    );

    // Authentication goes through the adapter's SelfSubjectReview.
    let none = server
        .call("GET", "/v3/organizations", None, None)
        .await
        .expect("call");
    assert_eq!(none.status, 401, "{}", none.body);
    assert_eq!(none.json()["errors"][0]["code"], 10002);
    let bad = server
        .call("GET", "/v3/organizations", Some("not-a-token"), None)
        .await
        .expect("call");
    assert_eq!(bad.status, 401, "{}", bad.body);
    assert_eq!(bad.json()["errors"][0]["code"], 1000);

    // Create, list and read through kube over wasi:http.
    let created = server
        .call(
            "POST",
            "/v3/organizations",
            Some(admin),
            Some(r#"{"name":"abroad"}"#),
        )
        .await
        .expect("call");
    assert_eq!(created.status, 201, "{}", created.body);
    let guid = created.json()["guid"].as_str().expect("guid").to_string();
    assert_eq!(
        created.json()["links"]["self"]["href"],
        format!("{origin}/v3/organizations/{guid}")
    );
    let listed = server
        .call("GET", "/v3/organizations?names=abroad", Some(admin), None)
        .await
        .expect("call");
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json()["resources"][0]["guid"], guid.as_str());

    // A caller without a role sees nothing: 404, as Cloud Controller answers.
    let hidden = server
        .call(
            "DELETE",
            &format!("/v3/organizations/{guid}"),
            Some("nobody-token-0123456789"),
            None,
        )
        .await
        .expect("call");
    assert_eq!(hidden.status, 404, "{}", hidden.body);

    // The admin's DELETE is accepted as a job once the deletionTimestamp is visible.
    let deleted = server
        .call(
            "DELETE",
            &format!("/v3/organizations/{guid}"),
            Some(admin),
            None,
        )
        .await
        .expect("call");
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let location = deleted
        .headers
        .get("location")
        .and_then(|v| v.to_str().ok())
        .expect("Location");
    assert_eq!(location, format!("{origin}/v3/jobs/org.delete~{guid}"));
    let org = cf
        .client
        .privileged()
        .get(&lethe_kube::ObjectRef {
            api_version: "cf.lethe.dev/v1alpha1".into(),
            kind: "Org".into(),
            namespace: Some("cf".into()),
            name: guid.clone(),
        })
        .await
        .expect("the org waits for its finalizer");
    assert!(
        org.metadata.deletion_timestamp.is_some(),
        "deletion requested"
    );

    // kubectl reaches the same cluster through the kubeconfig's HTTPS address.
    let kubectl = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(cf.dir.path().join("kubeconfig"))
        .args(["get", "orgs.cf.lethe.dev", "-n", "cf", "-o", "name"])
        .output()
        .expect("kubectl runs");
    let listed = String::from_utf8_lossy(&kubectl.stdout);
    assert!(
        kubectl.status.success() && listed.contains(&guid),
        "kubectl sees the org: {listed} {}",
        String::from_utf8_lossy(&kubectl.stderr)
    );
}

/// The adapter's side of a bad day, through the composed `cf_api.wasm` over `wasi:http`: a
/// cluster that answers only 503 is tried exactly as often as the lethe host tries it, then the
/// caller gets a typed CF error (never a 500); once the cluster is back the same call succeeds;
/// and without `LETHE_KUBE_TOKEN` the privileged identity is refused, not borrowed from the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_retries_a_failing_cluster_boundedly_and_refuses_an_unset_privileged_identity()
{
    let cf = CfCluster::start().await;
    let host = PlainHost::new(&composed("cf_api"), cf.cf_api_env(), None).expect("links");
    let admin = cf.admin.as_str();
    let reviews = |cf: &CfCluster| {
        cf.cluster
            .requests()
            .get("POST selfsubjectreviews")
            .copied()
            .unwrap_or(0)
    };

    cf.cluster.set_faults(lethe_apiserver::FaultConfig {
        error_rate: 1.0,
        error_status: 503,
        ..Default::default()
    });
    let before = reviews(&cf);
    let down = host
        .call("GET", "/v3/organizations", Some(admin), None)
        .await
        .expect("call");
    let tried = reviews(&cf) - before;
    assert_eq!(down.status, 503, "{}", down.body);
    assert!(
        down.json()["errors"][0]["code"].is_number(),
        "{}",
        down.body
    );
    assert_eq!(
        tried, 4,
        "the caller's token review is tried as often as the host tries a read"
    );

    cf.cluster.set_faults(Default::default());
    let up = host
        .call("GET", "/v3/organizations", Some(admin), None)
        .await
        .expect("call");
    assert_eq!(up.status, 200, "{}", up.body);

    // No privileged token configured: what needs lethe's own identity is refused.
    let env = cf
        .cf_api_env()
        .into_iter()
        .filter(|(k, _)| k != "LETHE_KUBE_TOKEN")
        .collect();
    let unprivileged = PlainHost::new(&composed("cf_api"), env, None).expect("links");
    let created = host
        .call(
            "POST",
            "/v3/organizations",
            Some(admin),
            Some(r#"{"name":"kept"}"#),
        )
        .await
        .expect("call");
    assert_eq!(created.status, 201, "{}", created.body);
    let guid = created.json()["guid"].as_str().expect("guid").to_string();
    let refused = unprivileged
        .call(
            "DELETE",
            &format!("/v3/organizations/{guid}"),
            Some(admin),
            None,
        )
        .await
        .expect("call");
    // The contract's `forbidden` for an identity that was not granted fails closed, and it is
    // lethe's own identity that is missing, not the caller's right: 503, never a 403 that would
    // blame the caller (SECURITY.md A8).
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.json()["errors"][0]["code"], 10015);
    let org = cf
        .client
        .privileged()
        .get(&lethe_kube::ObjectRef {
            api_version: "cf.lethe.dev/v1alpha1".into(),
            kind: "Org".into(),
            namespace: Some("cf".into()),
            name: guid,
        })
        .await
        .expect("the org is still there");
    assert!(
        org.metadata.deletion_timestamp.is_none(),
        "nothing was deleted"
    );
    cf.shutdown().await;
}

/// Whether a Spin host (with the cron trigger plugin) supplies the import `name`: WASI 0.2,
/// `wasi:http`, Spin's SQLite and variables, and the cron trigger's types (which hold only types).
fn spin_supplies(name: &str) -> bool {
    name.starts_with("wasi:")
        || name == "spin:sqlite/sqlite@3.0.0"
        || name == "fermyon:spin/variables@2.0.0"
        || name == "spin:cron/cron-types@3.0.0"
}

/// Whether Spin's dependency key `key` (`ns:pkg`, `ns:pkg@version`, `ns:pkg/iface`,
/// `ns:pkg/iface@version`) matches the import `import`, by Spin's rule: the package must be the
/// same, and the interface and the version too where the key names them.
fn spin_key_matches(key: &str, import: &str) -> bool {
    let split = |name: &str| -> (String, Option<String>, Option<String>) {
        let (name, version) = match name.split_once('@') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (name.to_string(), None),
        };
        match name.split_once('/') {
            Some((package, interface)) => {
                (package.to_string(), Some(interface.to_string()), version)
            }
            None => (name, None, version),
        }
    };
    let (key_package, key_interface, key_version) = split(key);
    let (package, interface, version) = split(import);
    key_package == package
        && key_interface.is_none_or(|i| Some(i) == interface)
        && key_version.is_none_or(|v| Some(v) == version)
}

/// `spin-runtime-config.toml` maps every database label of `spin.toml` to the file `lethe migrate
/// --database-url sqlite:.spin/lethe.db` prepares for it, and nothing else, so on Spin each
/// component opens its own label's tables.
#[test]
fn spin_runtime_config_maps_each_label_to_the_file_lethe_migrate_prepares() {
    let root = PathBuf::from(lethe::REPO_ROOT);
    let manifest = lethe::manifest::load(&root.join("spin.toml")).expect("spin.toml");
    let config: toml::Table = std::fs::read_to_string(root.join("spin-runtime-config.toml"))
        .expect("spin-runtime-config.toml")
        .parse()
        .expect("TOML");
    let mapped = config["sqlite_database"]
        .as_table()
        .expect("[sqlite_database.*]");
    let labels = manifest.database_labels();
    assert_eq!(
        mapped.keys().collect::<std::collections::BTreeSet<_>>(),
        labels.keys().collect::<std::collections::BTreeSet<_>>()
    );
    for label in labels.keys() {
        assert_eq!(mapped[label]["type"].as_str(), Some("spin"), "{label}");
        let prepared =
            lethe_sql::sqlite_label_location("sqlite:.spin/lethe.db", label).expect("a location");
        assert_eq!(
            mapped[label]["path"]
                .as_str()
                .map(|p| format!("sqlite:{p}")),
            Some(prepared),
            "{label}"
        );
    }
}

/// What `spin up` does with the repository's `spin.toml`, for every component: Spin's matching of
/// `dependencies` to the component's imports (every `lethe:platform` import matched by exactly
/// one key, every key matching something, the dependency exporting each matched import under its
/// name), configuration inherited (else Spin's deny-all adapter takes the adapter's SQLite,
/// variables and outbound HTTP), the grants the adapter uses made (the database label its
/// `sqlite_database` variable names, the cluster's address, its variables), and then Spin's composition (the dependency's exports as
/// the component's imports, every export of the component exported again), which must leave no
/// `lethe:platform` import and link in a host with only WASI, `wasi:http` and Spin's SQLite and
/// variables.
#[test]
fn spin_toml_supplies_every_lethe_import_through_spin_dependencies() {
    use wac_graph::{CompositionGraph, EncodeOptions, types::Package};
    let root = PathBuf::from(lethe::REPO_ROOT);
    let manifest: toml::Table = std::fs::read_to_string(root.join("spin.toml"))
        .expect("spin.toml")
        .parse()
        .expect("TOML");
    let variables = manifest["variables"].as_table().expect("[variables]");
    let components = manifest["component"].as_table().expect("[component]");
    let engine = Engine::new(Config::new().wasm_component_model(true)).expect("engine");
    let mut checked = 0;
    for (id, component) in components {
        let source = root.join(component["source"].as_str().expect("source"));
        let bytes = std::fs::read(&source).unwrap_or_else(|e| panic!("{id}: {e}"));
        let mut graph = CompositionGraph::new();
        let main = Package::from_bytes(id, None, bytes, graph.types_mut()).expect("a component");
        let main_world = main.ty();
        let imports: Vec<String> = graph.types()[main_world].imports.keys().cloned().collect();
        let exports: Vec<String> = graph.types()[main_world].exports.keys().cloned().collect();
        let lethe_imports: Vec<&String> = imports
            .iter()
            .filter(|i| i.starts_with("lethe:platform/"))
            .collect();
        let Some(dependencies) = component.get("dependencies").and_then(|d| d.as_table()) else {
            assert!(
                lethe_imports.is_empty(),
                "{id} imports {lethe_imports:?} but has no dependencies"
            );
            continue;
        };
        assert_eq!(
            component.get("dependencies_inherit_configuration"),
            Some(&toml::Value::Boolean(true)),
            "{id}: without it Spin denies the adapter SQLite, variables and outbound HTTP"
        );
        let main = graph.register_package(main).expect("register");
        let main = graph.instantiate(main);
        let mut adapters = std::collections::BTreeMap::new();
        for (key, dependency) in dependencies {
            let matched: Vec<&String> = imports
                .iter()
                .filter(|i| spin_key_matches(key, i))
                .collect();
            assert!(
                !matched.is_empty(),
                "{id}: dependency `{key}` matches no import (Spin refuses it)"
            );
            let path = root.join(dependency["path"].as_str().expect("a path dependency"));
            let bytes =
                std::fs::read(&path).unwrap_or_else(|e| panic!("{id}: {}: {e}", path.display()));
            let package_name = key
                .split('/')
                .next()
                .unwrap_or(key)
                .split('@')
                .next()
                .unwrap_or(key);
            let adapter = Package::from_bytes(package_name, None, bytes, graph.types_mut())
                .expect("a component");
            let adapter_world = adapter.ty();
            let adapter_imports: Vec<String> = graph.types()[adapter_world]
                .imports
                .keys()
                .cloned()
                .collect();
            let uses_sql = lethe_imports
                .iter()
                .any(|i| i.starts_with("lethe:platform/sql@"));
            if uses_sql
                && adapter_imports
                    .iter()
                    .any(|i| i.starts_with("spin:sqlite/"))
            {
                // The adapter opens the label the `sqlite_database` variable names (else
                // `default`), which Spin refuses unless `sqlite_databases` grants it.
                let databases = component.get("sqlite_databases").and_then(|d| d.as_array());
                let label = component
                    .get("variables")
                    .and_then(|v| v.get("sqlite_database"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("default");
                assert!(
                    databases.is_some_and(|d| d.iter().any(|v| v.as_str() == Some(label))),
                    "{id}: the adapter's sql opens `{label}`, which sqlite_databases must grant"
                );
            }
            let adapter = graph.register_package(adapter).expect("register");
            let adapter = graph.instantiate(adapter);
            for import in matched {
                assert!(
                    graph.types()[adapter_world].exports.contains_key(import),
                    "{id}: dependency `{key}` does not export `{import}`"
                );
                assert!(
                    adapters
                        .insert(import.clone(), (adapter, key.clone()))
                        .is_none(),
                    "{id}: `{import}` matched twice"
                );
            }
        }
        for import in &lethe_imports {
            assert!(
                adapters.contains_key(*import),
                "{id}: no dependency supplies `{import}`"
            );
        }
        if lethe_imports
            .iter()
            .any(|i| i.starts_with("lethe:platform/kube@"))
        {
            let hosts = component
                .get("allowed_outbound_hosts")
                .and_then(|h| h.as_array());
            assert!(
                hosts.is_some_and(|h| h.iter().any(|v| v.as_str() == Some("{{ kube_url }}"))),
                "{id}: the adapter calls the cluster, so it must be an allowed outbound host"
            );
            let component_variables = component["variables"].as_table().expect("variables");
            // A component granted the privileged identity carries its own account's token on
            // Spin, from an application variable of its own; the others share `kube_token`.
            let privileged = component
                .get("tool")
                .and_then(|t| t.get("lethe"))
                .and_then(|l| l.get("kube_identities"))
                .and_then(|i| i.as_array())
                .is_some_and(|i| i.iter().any(|v| v.as_str() == Some("privileged")));
            let token = if privileged {
                format!("{}_kube_token", id.replace('-', "_"))
            } else {
                "kube_token".to_string()
            };
            for (name, application) in [("kube_url", "kube_url".to_string()), ("kube_token", token)]
            {
                assert!(
                    variables.contains_key(&application),
                    "the application declares `{application}`"
                );
                assert_eq!(
                    component_variables.get(name).and_then(|v| v.as_str()),
                    Some(format!("{{{{ {application} }}}}").as_str()),
                    "{id}: the adapter reads the cluster from the component's `{name}`"
                );
            }
        }
        if exports
            .iter()
            .any(|e| e.starts_with("lethe:platform/reconciler@"))
        {
            let component_variables = component["variables"].as_table().expect("variables");
            assert!(
                variables.contains_key("lethe_instance_id")
                    && component_variables
                        .get("lethe_instance_id")
                        .and_then(|v| v.as_str())
                        == Some("{{ lethe_instance_id }}"),
                "{id}: on Spin the reconciler's Lease holder is the variable `lethe_instance_id`"
            );
        }
        for (import, (adapter, _)) in &adapters {
            let export = graph
                .alias_instance_export(*adapter, import)
                .expect("alias");
            graph
                .set_instantiation_argument(main, import, export)
                .expect("argument");
        }
        for export in &exports {
            let node = graph.alias_instance_export(main, export).expect("alias");
            graph.export(node, export).expect("export");
        }
        let composed = graph
            .encode(EncodeOptions::default())
            .unwrap_or_else(|e| panic!("{id}: Spin's composition fails: {e:#}"));
        let composed = Component::new(&engine, &composed).expect("a valid component");
        let left: Vec<String> = composed
            .component_type()
            .imports(&engine)
            .map(|(name, _)| name.to_string())
            .filter(|name| !spin_supplies(name))
            .collect();
        assert!(
            left.is_empty(),
            "{id}: Spin would still have to supply {left:?}"
        );
        let mut linker: Linker<Plain> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("wasi");
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).expect("http");
        spin_sqlite::add_to_linker::<Plain, HasSelf<Plain>>(&mut linker, |s| s).expect("sqlite");
        spin_variables::add_to_linker::<Plain, HasSelf<Plain>>(&mut linker, |s| s)
            .expect("variables");
        linker
            .instantiate_pre(&composed)
            .unwrap_or_else(|e| panic!("{id} does not link on a Spin-like host: {e:#}"));
        checked += 1;
    }
    assert_eq!(
        checked, 5,
        "smoke, cf-api, cf-job-status, cf-reconciler and data-jobs"
    );
}
