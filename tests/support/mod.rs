//! Shared helpers of the end-to-end tests: run the real `lethe` binary on a manifest, talk HTTP to
//! it, and find the PostgreSQL server to test against.

#![allow(dead_code)]

pub mod cf;
pub mod standalone;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `lethe` binary under test.
pub fn lethe_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lethe"))
}

/// A TCP port nothing listens on right now (the OS picks it; released for the caller to bind).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts `lethe cluster --data-dir <data_dir>` with `args`, quietly; the caller stops it.
pub fn spawn_cluster(data_dir: &Path, args: &[&str]) -> Child {
    Command::new(lethe_bin())
        .arg("cluster")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("LETHE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lethe cluster")
}

/// Where the build script put the wasm components.
pub fn component(name: &str) -> PathBuf {
    Path::new(lethe::COMPONENTS_DIR).join(format!("{name}.wasm"))
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(lethe::REPO_ROOT)
}

/// The repository's `spin.toml` with its paths made absolute, so that a test can change it and
/// serve it from anywhere ([`Lethe::up_app_manifest`]).
pub fn shipped_manifest() -> String {
    let root = repo_root();
    let root = root.display();
    std::fs::read_to_string(repo_root().join("spin.toml"))
        .expect("spin.toml")
        .replace("\"target/wasm/", &format!("\"{root}/target/wasm/"))
        .replace("\"components/", &format!("\"{root}/components/"))
        .replace("\"deploy/", &format!("\"{root}/deploy/"))
}

/// The cluster the scenario tests should use instead of the embedded one (`KUBECONFIG`).
pub fn external_kubeconfig() -> Option<PathBuf> {
    std::env::var_os("KUBECONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `true` when the build script built the Python components (componentize-py is installed);
/// otherwise prints why `test` skips, or fails it in CI (`CI=true`), where a silent skip would
/// hide that the Python component was never tested.
pub fn python_components_built(test: &str) -> bool {
    if component("smoke_py").is_file() {
        return true;
    }
    let why = "the Python components were not built: componentize-py is not installed \
               (pip install componentize-py==0.25.1, then build again)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why}");
    }
    eprintln!("skipping {test}: {why}");
    false
}

/// The test users' tokens in kube-apiserver's `--token-auth-file` format, relative to the
/// repository root: the embedded cluster gets the lines a scenario asks for, and a real cluster is
/// given the whole file (README, "Testing").
pub const TEST_USERS: &str = "tests/test-users.csv";

/// Runs `kubectl --kubeconfig <kubeconfig> <args>`; returns (success, stdout, stderr).
fn run_kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A user's line of a token file: `token,user,uid` with the user's name as uid, and the groups
/// as a fourth, quoted column when there are any (kube-apiserver would read an empty fourth
/// column as one group named "").
fn test_user_line((token, user, groups): &(&str, &str, &[&str])) -> String {
    match groups {
        [] => format!("{token},{user},{user}"),
        groups => format!("{token},{user},{user},\"{}\"", groups.join(",")),
    }
}

/// `true` (after printing why) when a test needs the test users ([`TEST_USERS`]) but `KUBECONFIG`
/// points elsewhere; set `LETHE_TEST_USERS_EXIST=1` once that cluster's token file holds them.
pub fn skip_without_test_users(test: &str) -> bool {
    if external_kubeconfig().is_some() && std::env::var_os("LETHE_TEST_USERS_EXIST").is_none() {
        eprintln!(
            "skipping {test}: it needs the test users of {TEST_USERS}; give KUBECONFIG's cluster that file's lines in its --token-auth-file, then set LETHE_TEST_USERS_EXIST=1"
        );
        return true;
    }
    false
}

/// A `lethe up` process, stopped with SIGTERM when dropped.
pub struct Lethe {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The admin listener, `http://127.0.0.1:<port>`.
    pub admin_url: String,
    log: Arc<Mutex<String>>,
    /// The data dir (kept alive for the process's lifetime).
    pub data_dir: tempfile::TempDir,
    /// How it was started, to start it again the same way.
    launch: Launch,
}

/// A `lethe up` command line, apart from the data dir.
struct Launch {
    manifest: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

/// The result of a `lethe up` that did not start.
pub struct StartFailure {
    /// Exit status.
    pub status: std::process::ExitStatus,
    /// Everything it logged.
    pub log: String,
}

impl Lethe {
    /// Writes `manifest` into a fresh data dir and runs `lethe up` on it with `extra_args`;
    /// returns once it serves HTTP.
    pub fn up(manifest: &str, extra_args: &[&str]) -> Lethe {
        match Self::try_up(manifest, extra_args, &[]) {
            Ok(l) => l,
            Err(f) => panic!("lethe up failed ({}):\n{}", f.status, f.log),
        }
    }

    /// Like [`Lethe::up`], with extra environment variables, returning the failure instead of
    /// panicking.
    pub fn try_up(
        manifest: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Lethe, StartFailure> {
        let data_dir = tempfile::tempdir().expect("tempdir");
        let manifest_path = data_dir.path().join("spin.toml");
        std::fs::write(&manifest_path, manifest).expect("write manifest");
        Self::spawn(data_dir, &manifest_path, extra_args, env)
    }

    /// Runs `lethe up` on the repository's own `spin.toml` (the real application), with the
    /// embedded cluster's token file seeded with `users` (`token, user, groups`) first.
    ///
    /// When `KUBECONFIG` is set, the cluster is that one instead: the manifest's
    /// `kubernetes_manifests` (lethe's CRDs, roles and RBAC) are applied with `kubectl apply`,
    /// `users` must already exist there, the admin token is taken from `LETHE_TEST_ADMIN_TOKEN`
    /// (or the kubeconfig's token), and the host runs with `LETHE_TEST_HOST_KUBECONFIG`'s
    /// credentials when set, else `KUBECONFIG`'s.
    pub fn up_app(users: &[(&str, &str, &[&str])], env: &[(&str, &str)]) -> Lethe {
        let data_dir = tempfile::tempdir().expect("tempdir");
        Self::up_app_in(data_dir, &repo_root().join("spin.toml"), users, &[], env)
    }

    /// Like [`Lethe::up_app`], on `manifest` (the text of a manifest whose paths are absolute,
    /// such as `spin.toml` with a limit changed), on the same cluster as `up_app`.
    pub fn up_app_manifest(
        manifest: &str,
        users: &[(&str, &str, &[&str])],
        env: &[(&str, &str)],
    ) -> Lethe {
        let data_dir = tempfile::tempdir().expect("tempdir");
        let path = data_dir.path().join("spin.toml");
        std::fs::write(&path, manifest).expect("write manifest");
        Self::up_app_in(data_dir, &path, users, &[], env)
    }

    /// Like [`Lethe::up_app`], on the manifest file at `manifest` (its relative paths resolve
    /// against its own directory, as `lethe up --manifest` does), with `args` added to `lethe up`.
    pub fn up_app_at(manifest: &Path, users: &[(&str, &str, &[&str])], args: &[&str]) -> Lethe {
        let data_dir = tempfile::tempdir().expect("tempdir");
        Self::up_app_in(data_dir, manifest, users, args, &[])
    }

    /// Like [`Lethe::up_app_at`] on the embedded cluster without users, returning the failure
    /// instead of panicking.
    pub fn try_up_app_at(manifest: &Path) -> Result<Lethe, StartFailure> {
        let data_dir = tempfile::tempdir().expect("tempdir");
        Self::spawn(data_dir, manifest, &[], &[])
    }

    fn up_app_in(
        data_dir: tempfile::TempDir,
        manifest: &Path,
        users: &[(&str, &str, &[&str])],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Lethe {
        let lines: Vec<String> = users.iter().map(test_user_line).collect();
        let listed = std::fs::read_to_string(repo_root().join(TEST_USERS))
            .unwrap_or_else(|e| panic!("{TEST_USERS}: {e}"));
        for line in &lines {
            assert!(
                listed.lines().any(|l| l == line),
                "{line:?} is not in {TEST_USERS}, the test users a real cluster is given"
            );
        }
        if let Some(kubeconfig) = external_kubeconfig() {
            // What lethe up applies to the embedded cluster, an administrator applies here.
            let files = lethe::manifest::load(manifest)
                .unwrap_or_else(|e| panic!("{}: {e:#}", manifest.display()))
                .kubernetes_manifests();
            for file in &files {
                let file = file.to_string_lossy();
                let (applied, _, stderr) = run_kubectl(&kubeconfig, &["apply", "-f", &file]);
                assert!(applied, "kubectl apply -f {file} failed:\n{stderr}");
            }
            // The host's own credentials: lethe's ServiceAccount's when given.
            let kubeconfig = std::env::var_os("LETHE_TEST_HOST_KUBECONFIG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or(kubeconfig)
                .to_string_lossy()
                .into_owned();
            let args: Vec<&str> = ["--kubeconfig", kubeconfig.as_str()]
                .into_iter()
                .chain(args.iter().copied())
                .collect();
            return match Self::spawn(data_dir, manifest, &args, env) {
                Ok(l) => l,
                Err(f) => panic!("lethe up failed ({}):\n{}", f.status, f.log),
            };
        }
        if !users.is_empty() {
            let cluster_dir = data_dir.path().join("data/cluster");
            std::fs::create_dir_all(&cluster_dir).expect("cluster dir");
            std::fs::write(cluster_dir.join("tokens.csv"), lines.join("\n") + "\n")
                .expect("tokens.csv");
        }
        match Self::spawn(data_dir, manifest, args, env) {
            Ok(l) => l,
            Err(f) => panic!("lethe up failed ({}):\n{}", f.status, f.log),
        }
    }

    /// Runs `lethe up` on the repository's own `spin.toml` with `extra_args` (a cluster of its
    /// own through `--kubeconfig`, a shared `--database-url`) and `env`.
    pub fn up_repo_app(extra_args: &[&str], env: &[(&str, &str)]) -> Lethe {
        match Self::try_up_repo_app(extra_args, env) {
            Ok(l) => l,
            Err(f) => panic!("lethe up failed ({}):\n{}", f.status, f.log),
        }
    }

    /// Like [`Lethe::up_repo_app`], returning the failure instead of panicking.
    pub fn try_up_repo_app(
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Lethe, StartFailure> {
        let data_dir = tempfile::tempdir().expect("tempdir");
        let manifest = repo_root().join("spin.toml");
        Self::spawn(data_dir, &manifest, extra_args, env)
    }

    /// The admin kubeconfig: `KUBECONFIG` when set, else the embedded cluster's.
    pub fn kubeconfig(&self) -> PathBuf {
        external_kubeconfig()
            .unwrap_or_else(|| self.data_dir.path().join("data/cluster/kubeconfig"))
    }

    /// A token of the cluster's administrator: `LETHE_TEST_ADMIN_TOKEN`, else the token in
    /// [`Lethe::kubeconfig`].
    pub fn admin_token(&self) -> String {
        if let Ok(token) = std::env::var("LETHE_TEST_ADMIN_TOKEN") {
            return token;
        }
        let text = std::fs::read_to_string(self.kubeconfig()).expect("kubeconfig");
        text.lines()
            .find_map(|l| l.trim().strip_prefix("token:"))
            .map(|t| t.trim().trim_matches('"').to_string())
            .expect("token in kubeconfig")
    }

    /// Runs `kubectl` against the embedded cluster as its admin; returns (success, stdout, stderr).
    pub fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        run_kubectl(&self.kubeconfig(), args)
    }

    /// Runs `kubectl` against the cluster with `token` as the only credential (a user acting with
    /// their own rights); returns (success, stdout, stderr).
    pub fn kubectl_as(&self, token: &str, args: &[&str]) -> (bool, String, String) {
        run_kubectl(&self.kubeconfig_for_token(token), args)
    }

    /// The user name the cluster gives kubectl run with a kubeconfig holding only `token`:
    /// `kubectl auth whoami` (a SelfSubjectReview, Kubernetes 1.28 and later), else, on a server
    /// without SelfSubjectReview, the user that the server's refusal of a read no test user may
    /// make names (`User "<name>" cannot list ...`), which every version writes. `Err` carries
    /// kubectl's output when neither names one.
    pub fn user_name_as(&self, token: &str) -> Result<String, String> {
        let (ok, name, stderr) = self.kubectl_as(
            token,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
        );
        if ok {
            return Ok(name);
        }
        let (_, _, refused) = self.kubectl_as(
            token,
            &["get", "secrets", "-n", "kube-system", "-o", "name"],
        );
        refused
            .split_once("User \"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(name, _)| name.to_string())
            .ok_or_else(|| format!("kubectl auth whoami: {stderr}\nkubectl get secrets: {refused}"))
    }

    /// A kubeconfig for the admin's cluster and context whose only credential is `token`.
    ///
    /// `kubectl --token` is not enough: kubectl still presents the kubeconfig's client
    /// certificate, and kube-apiserver authenticates the certificate before the token
    /// (kubernetes/kubectl#1657), so on a cluster whose admin kubeconfig holds a certificate (kind,
    /// kubeadm) the "user" would act as the admin and every refusal a test expects would vanish.
    fn kubeconfig_for_token(&self, token: &str) -> PathBuf {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(token, &mut hasher);
        let path = self.data_dir.path().join(format!(
            "kubeconfig-as-{:016x}.json",
            std::hash::Hasher::finish(&hasher)
        ));
        if path.exists() {
            return path;
        }
        let minified = self.kubectl_ok(&[
            "config",
            "view",
            "--raw",
            "--minify",
            "--flatten",
            "-o",
            "json",
        ]);
        let mut config: serde_json::Value =
            serde_json::from_str(&minified).expect("kubectl config view prints JSON");
        let user = config
            .pointer("/contexts/0/context/user")
            .and_then(serde_json::Value::as_str)
            .expect("the admin kubeconfig's context names a user")
            .to_string();
        config["users"] = serde_json::json!([{"name": user, "user": {"token": token}}]);
        std::fs::write(&path, config.to_string()).expect("write the user's kubeconfig");
        path
    }

    /// Like [`Lethe::kubectl`], panicking with kubectl's output on failure.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.kubectl(args);
        assert!(ok, "kubectl {args:?} failed:\n{stderr}");
        stdout
    }

    /// Puts `faults` (a `lethe_apiserver::FaultConfig` as JSON) in force on the embedded
    /// cluster, through its admin-only `/lethe/faults`, which no fault reaches.
    pub fn set_cluster_faults(&self, faults: &serde_json::Value) {
        let path = self.data_dir.path().join("faults.json");
        std::fs::write(&path, faults.to_string()).expect("write the faults");
        self.kubectl_ok(&[
            "create",
            "--raw",
            "/lethe/faults",
            "-f",
            &path.to_string_lossy(),
        ]);
    }

    fn spawn(
        data_dir: tempfile::TempDir,
        manifest_path: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Lethe, StartFailure> {
        let launch = Launch {
            manifest: manifest_path.to_path_buf(),
            args: extra_args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let (child, [url, admin_url], log) = launch.run(data_dir.path())?;
        Ok(Lethe {
            child,
            url,
            admin_url,
            log,
            data_dir,
            launch,
        })
    }

    /// Kills the process without warning (SIGKILL, as a crash or a lost node would) and starts
    /// it again the same way on the same data dir; returns once it serves HTTP again. The log
    /// starts afresh.
    pub fn crash_and_restart(&mut self) {
        self.crash();
        self.restart();
    }

    /// Kills the process without warning (SIGKILL), leaving its data dir as a crash leaves it.
    pub fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the process again the same way on the same data dir, after [`Lethe::crash`] or
    /// [`Lethe::stop`]; returns once it serves HTTP again. The log starts afresh.
    pub fn restart(&mut self) {
        match self.launch.run(self.data_dir.path()) {
            Ok((child, [url, admin_url], log)) => {
                self.child = child;
                self.url = url;
                self.admin_url = admin_url;
                self.log = log;
            }
            Err(f) => panic!("lethe up failed after a crash ({}):\n{}", f.status, f.log),
        }
    }

    /// The process id of the `lethe up` process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The seconds `component`'s client-side rate limit has made its Kubernetes calls wait, as
    /// the host's metrics say, with the metrics text.
    pub fn rate_limit_wait_seconds(&self, component: &str) -> (f64, String) {
        let metrics = get(&format!("{}/metrics", self.admin_url)).body;
        let label = format!("component=\"{component}\"");
        let waited = metrics
            .lines()
            .filter(|l| {
                l.starts_with("lethe_kube_rate_limit_wait_seconds_total{") && l.contains(&label)
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        (waited, metrics)
    }

    /// Everything logged so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }

    /// Waits (bounded) until the log contains `needle`.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Sends SIGTERM, and returns at once.
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    /// Sends SIGTERM and waits for the exit status (bounded).
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        self.terminate();
        self.exit_within(Duration::from_secs(20))
    }

    /// Waits up to `within` for the process to exit, and kills it if it does not.
    pub fn exit_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        None
    }
}

impl Launch {
    /// Starts `lethe up` on `data_dir`; the child, its app and admin URLs and its log once it
    /// serves HTTP. The admin listener gets a free port unless the arguments name one.
    #[allow(clippy::type_complexity)]
    fn run(
        &self,
        data_dir: &Path,
    ) -> Result<(Child, [String; 2], Arc<Mutex<String>>), StartFailure> {
        let mut cmd = Command::new(lethe_bin());
        cmd.arg("up")
            .arg("--manifest")
            .arg(&self.manifest)
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir.join("data"));
        if !self.args.iter().any(|a| a.starts_with("--admin-listen")) {
            cmd.args(["--admin-listen", "127.0.0.1:0"]);
        }
        cmd.args(&self.args)
            .env("LETHE_LOG", "info")
            .env_remove("KUBECONFIG")
            .env_remove("LETHE_DATABASE_URL")
            .env_remove("LETHE_LOG_FORMAT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn lethe");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log_writer = log.clone();
        std::thread::spawn(move || {
            let tx = Some(tx);
            let mut admin = None;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // The URL ends at a space, or at the quote that closes a JSON log's message.
                let url_after = |marker: &str| {
                    line.split(marker).nth(1).map(|rest| {
                        rest.split(|c: char| c.is_whitespace() || c == '"')
                            .next()
                            .unwrap_or_default()
                            .to_string()
                    })
                };
                if let Some(url) = url_after("admin listening on ") {
                    admin = Some(url);
                }
                if let (Some(url), Some(tx)) = (url_after("lethe listening on "), tx.as_ref()) {
                    let _ = tx.send([url, admin.clone().unwrap_or_default()]);
                }
                let mut l = log_writer.lock().expect("log lock");
                l.push_str(&line);
                l.push('\n');
            }
        });
        // A bound, not a speed check: a debug build compiling a Python component while other
        // tests build theirs once took more than 120 s.
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if let Ok(urls) = rx.recv_timeout(Duration::from_millis(100)) {
                return Ok((child, urls, log));
            }
            if let Ok(Some(status)) = child.try_wait() {
                std::thread::sleep(Duration::from_millis(200));
                let log = log.lock().expect("log lock").clone();
                return Err(StartFailure { status, log });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "lethe up did not start within 300 s:\n{}",
                    log.lock().expect("log lock")
                );
            }
        }
    }
}

impl Drop for Lethe {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers, lower-case names.
    pub headers: Vec<(String, String)>,
    /// Body text.
    pub body: String,
}

impl Answer {
    /// The body as JSON (panics with the body when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first CF error's code.
    pub fn cf_code(&self) -> i64 {
        self.json()["errors"][0]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no CF error: {}", self.body))
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Sends a request with an optional body and headers.
pub fn request(method: &str, url: &str, body: Option<&str>, headers: &[(&str, &str)]) -> Answer {
    let mut builder = http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let agent = agent();
    let result = match body {
        Some(b) => agent.run(builder.body(b.to_string()).expect("request")),
        None => agent.run(builder.body(()).expect("request")),
    };
    let mut resp = result.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    Answer {
        status,
        headers,
        body,
    }
}

/// The PostgreSQL server to test against (see `lethe_sql::testing`): `None` means skip.
pub fn postgres_url_or_skip(test: &str) -> Option<String> {
    block_on(lethe_sql::testing::postgres_url_or_skip(test))
}

/// Creates a fresh, uniquely named database on the server at `url` and returns its URL, so that
/// tests never see each other's tables.
pub fn fresh_postgres_database(url: &str, prefix: &str) -> String {
    block_on(lethe_sql::testing::fresh_database(url, prefix)).1
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// GET `url`.
pub fn get(url: &str) -> Answer {
    request("GET", url, None, &[])
}

/// Sends `bytes` exactly as given over a fresh connection to the server of `url` (an
/// `http://host:port` URL), and reads until the server closes the connection, so the request
/// should say `Connection: close`. For what an HTTP client refuses to send: raw bytes in the path,
/// invalid UTF-8, lying lengths, bodies on GET. The bytes are written from another thread, so a
/// server that answers before reading the whole body is seen answering; `half_close` shuts the
/// write side down after the last byte. `None` when the server closed without answering.
pub fn raw_request(url: &str, bytes: Vec<u8>, half_close: bool) -> Option<Answer> {
    use std::io::{Read as _, Write as _};
    let authority = url.strip_prefix("http://").expect("an http:// URL");
    let authority = authority.split('/').next().unwrap_or(authority);
    let stream = std::net::TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let mut writer = stream.try_clone().expect("clone stream");
    let written = std::thread::spawn(move || {
        // A server that answers early closes the connection under the writer; that is expected.
        let _ = writer.write_all(&bytes);
        if half_close {
            let _ = writer.shutdown(std::net::Shutdown::Write);
        }
    });
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut reader = &stream;
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = written.join();
    parse_raw_answer(&received)
}

/// The last final (non-1xx) response in `bytes`; its body de-chunked when chunked.
fn parse_raw_answer(mut bytes: &[u8]) -> Option<Answer> {
    loop {
        let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let rest = &bytes[end + 4..];
        let mut lines = head.split("\r\n");
        let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        if (100..200).contains(&status) {
            bytes = rest;
            continue;
        }
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            dechunk(rest)
        } else {
            match header("content-length").and_then(|v| v.parse::<usize>().ok()) {
                Some(n) => rest[..n.min(rest.len())].to_vec(),
                None => rest.to_vec(),
            }
        };
        return Some(Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
    }
}

fn dechunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = bytes.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&bytes[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size.filter(|n| *n > 0) else {
            break;
        };
        let start = eol + 2;
        let end = (start + size).min(bytes.len());
        out.extend_from_slice(&bytes[start..end]);
        bytes = bytes.get(end + 2..).unwrap_or(&[]);
    }
    out
}
