//! A standalone embedded cluster (`lethe cluster`) that several lethe hosts share, and kubectl as
//! its client.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

/// Runs `kubectl --kubeconfig <kubeconfig> <args>` (stdin: `input`); its stdout as JSON (`null`
/// when empty), or its error output.
pub fn kubectl(kubeconfig: &Path, args: &[&str], input: Option<Json>) -> Result<Json, String> {
    use std::io::Write as _;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed");
    if let Some(mut stdin) = child.stdin.take()
        && let Some(input) = input
    {
        stdin
            .write_all(input.to_string().as_bytes())
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("kubectl output");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!(
            "kubectl {args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if stdout.trim().is_empty() {
        return Ok(Json::Null);
    }
    Ok(serde_json::from_str(&stdout).unwrap_or(Json::String(stdout)))
}

/// The server URL and bearer token in the kubeconfig at `path`.
pub fn kubeconfig_server_and_token(path: &Path) -> (String, String) {
    let text = std::fs::read_to_string(path).expect("kubeconfig");
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no {name} in kubeconfig"))
    };
    (field("server:"), field("token:"))
}

/// `lethe cluster` on its own, as a cluster that several lethe hosts share.
pub struct StandaloneCluster {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl StandaloneCluster {
    /// Starts it on a free port, in a temporary data directory.
    pub fn start() -> StandaloneCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = super::free_port();
        let child = super::spawn_cluster(dir.path(), &["--listen", &format!("127.0.0.1:{port}")]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !dir.path().join("cluster/kubeconfig").exists()
            || std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
        {
            assert!(Instant::now() < deadline, "lethe cluster did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        StandaloneCluster { child, dir }
    }

    /// Its administrator's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("cluster/kubeconfig")
    }

    /// A kubeconfig of lethe's ServiceAccount, bound by `deploy/rbac.json`, with every file of
    /// the repository's `spin.toml` `kubernetes_manifests` applied first as the administrator
    /// would (the CF CRDs and roles, lethe's account, each component's own account and rights), so
    /// that hosts given it act with lethe's least privilege and each component with its own.
    pub fn service_account_kubeconfig(&self) -> PathBuf {
        let admin = self.kubeconfig();
        let files = lethe::manifest::load(&super::repo_root().join("spin.toml"))
            .expect("spin.toml")
            .kubernetes_manifests();
        for file in files {
            let path = file.display().to_string();
            kubectl(&admin, &["apply", "-f", &path], None).expect("kubectl apply");
        }
        let token = kubectl(
            &admin,
            &[
                "create",
                "token",
                "lethe",
                "-n",
                "lethe-system",
                "--duration=1h",
            ],
            None,
        )
        .expect("kubectl create token");
        let token = token.as_str().expect("a token").trim().to_string();
        let (_, admin_token) = kubeconfig_server_and_token(&admin);
        let text = std::fs::read_to_string(&admin)
            .expect("kubeconfig")
            .replace(&admin_token, &token);
        assert!(
            text.contains(&token) && !text.contains(&admin_token),
            "the kubeconfig still holds the administrator's token"
        );
        let path = self.dir.path().join("lethe-sa.kubeconfig");
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }
}

impl Drop for StandaloneCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The holder of the Lease `namespace/name`, as `kubectl` shows it; `None` while there is none.
pub fn lease_holder(kubeconfig: &Path, namespace: &str, name: &str) -> Option<String> {
    let lease = kubectl(
        kubeconfig,
        &["get", "lease", "-n", namespace, name, "-o", "json"],
        None,
    )
    .ok()?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

/// Whether `instance` (a Lease holder, `<host>-<pid>-<n>`) is the lethe process `pid`.
pub fn is_instance_of(pid: u32, instance: &str) -> bool {
    instance.rsplit('-').nth(1) == Some(pid.to_string().as_str())
}
