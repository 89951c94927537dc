//! Scenarios that drive the real `kubectl` (v1.32) against the server: the embedded one over
//! HTTPS (kubectl only sends bearer tokens over TLS), or the cluster in `KUBECONFIG` when set.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::suffix;
use lethe_apiserver::{ApiServerConfig, RunningApiServer, start};
use std::path::PathBuf;
use std::process::Command;

struct Kubectl {
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
    server: Option<RunningApiServer>,
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    async fn new() -> Option<Kubectl> {
        if !std::path::Path::new("/usr/bin/kubectl").exists() && which("kubectl").is_none() {
            eprintln!("skipped: kubectl is not installed");
            return None;
        }
        let cache = tempfile::tempdir().unwrap();
        if let Some(k) = std::env::var_os("KUBECONFIG") {
            let text = std::fs::read_to_string(&k).unwrap_or_default();
            if text.contains("server: http://") {
                eprintln!("skipped: kubectl sends bearer tokens only over HTTPS");
                return None;
            }
            return Some(Kubectl {
                kubeconfig: PathBuf::from(k),
                cache,
                server: None,
            });
        }
        let server = start(ApiServerConfig {
            tls: true,
            ..Default::default()
        })
        .await
        .unwrap();
        Some(Kubectl {
            kubeconfig: server.kubeconfig_path().unwrap().to_path_buf(),
            cache,
            server: Some(server),
        })
    }

    async fn run(&self, args: &[&str], stdin: Option<&str>) -> Out {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args);
        let stdin = stdin.map(str::to_string);
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            use std::process::Stdio;
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("kubectl runs");
            if let (Some(mut i), Some(s)) = (child.stdin.take(), stdin) {
                i.write_all(s.as_bytes()).unwrap();
            }
            let o = child.wait_with_output().unwrap();
            Out {
                code: o.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            }
        })
        .await
        .unwrap()
    }

    async fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let o = self.run(args, stdin).await;
        assert_eq!(
            o.code, 0,
            "kubectl {args:?} failed: {}{}",
            o.stdout, o.stderr
        );
        o.stdout
    }

    /// Waits until the CRD `name` is established (its kind is served).
    async fn wait_established(&self, name: &str) {
        self.ok(
            &[
                "wait",
                "--for",
                "condition=established",
                &format!("crd/{name}"),
                "--timeout=20s",
            ],
            None,
        )
        .await;
    }

    /// Deletes the CRD `name` without waiting for its custom resources to go.
    async fn delete_crd(&self, name: &str) {
        self.ok(&["delete", "crd", name, "--wait=false"], None)
            .await;
    }

    async fn shutdown(self) {
        if let Some(s) = self.server {
            s.shutdown().await;
        }
    }
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(bin))
            .find(|p| p.exists())
    })
}

fn crd_yaml(group: &str, plural: &str, kind: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Namespaced
  names:
    plural: {plural}
    singular: {singular}
    kind: {kind}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#,
        singular = &plural[..plural.len() - 1]
    )
}

#[tokio::test]
async fn kubectl_deletes_a_custom_resource_held_by_a_finalizer() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let group = format!("k{s}.lethe.test");
    let plural = format!("gadget{s}s");
    let kind = format!("Gadget{s}");
    // 1. apply a CRD (twice: the second is unchanged)
    let crd = crd_yaml(&group, &plural, &kind);
    let out = k.ok(&["apply", "-f", "-"], Some(&crd)).await;
    assert!(out.contains("created"), "{out}");
    let out = k.ok(&["apply", "-f", "-"], Some(&crd)).await;
    assert!(out.contains("unchanged"), "{out}");
    k.wait_established(&format!("{plural}.{group}")).await;
    let ns = format!("kc-{s}");
    k.ok(&["create", "namespace", &ns], None).await;
    // 2. create a custom resource with a finalizer
    let cr = format!(
        "apiVersion: {group}/v1\nkind: {kind}\nmetadata:\n  name: g1\n  namespace: {ns}\n  finalizers: [lethe.test/hold]\nspec:\n  size: 3\n"
    );
    let out = k.ok(&["apply", "-f", "-"], Some(&cr)).await;
    assert!(out.contains("created"), "{out}");
    // 3. delete without waiting
    let out = k
        .ok(&["delete", &plural, "g1", "-n", &ns, "--wait=false"], None)
        .await;
    assert!(out.contains("deleted"), "{out}");
    // 4. the deletionTimestamp is visible
    let ts = k
        .ok(
            &[
                "get",
                &plural,
                "g1",
                "-n",
                &ns,
                "-o",
                "jsonpath={.metadata.deletionTimestamp}",
            ],
            None,
        )
        .await;
    assert!(
        ts.ends_with('Z') && ts.len() == 20,
        "deletionTimestamp {ts:?}"
    );
    // 5. patch the finalizers away
    let out = k
        .ok(
            &[
                "patch",
                &plural,
                "g1",
                "-n",
                &ns,
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ],
            None,
        )
        .await;
    assert!(out.contains("patched"), "{out}");
    // 6. NotFound
    let o = k.run(&["get", &plural, "g1", "-n", &ns], None).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("NotFound") && o.stderr.contains("not found"),
        "{}",
        o.stderr
    );
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.delete_crd(&format!("{plural}.{group}")).await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_json_patch_removes_a_finalizer() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let ns = format!("kj-{s}");
    k.ok(&["create", "namespace", &ns], None).await;
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: {ns}\n  finalizers: [lethe.test/hold]\ndata:\n  a: b\n"
    );
    k.ok(&["apply", "-f", "-"], Some(&cm)).await;
    k.ok(
        &["delete", "configmap", "held", "-n", &ns, "--wait=false"],
        None,
    )
    .await;
    let ts = k
        .ok(
            &[
                "get",
                "configmap",
                "held",
                "-n",
                &ns,
                "-o",
                "jsonpath={.metadata.deletionTimestamp}",
            ],
            None,
        )
        .await;
    assert!(!ts.is_empty());
    k.ok(
        &[
            "patch",
            "configmap",
            "held",
            "-n",
            &ns,
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
        None,
    )
    .await;
    let o = k.run(&["get", "configmap", "held", "-n", &ns], None).await;
    assert!(o.stderr.contains("NotFound"), "{}", o.stderr);
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_deletes_a_namespace_with_its_contents() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("kn-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    k.ok(
        &["create", "configmap", "c1", "-n", &ns, "--from-literal=a=b"],
        None,
    )
    .await;
    k.ok(
        &[
            "create",
            "secret",
            "generic",
            "s1",
            "-n",
            &ns,
            "--from-literal=x=y",
        ],
        None,
    )
    .await;
    let out = k
        .ok(
            &[
                "get",
                "configmap",
                "c1",
                "-n",
                &ns,
                "-o",
                "jsonpath={.data.a}",
            ],
            None,
        )
        .await;
    assert_eq!(out, "b");
    let out = k
        .ok(&["delete", "namespace", &ns, "--timeout=60s"], None)
        .await;
    assert!(out.contains("deleted"), "{out}");
    let o = k.run(&["get", "namespace", &ns], None).await;
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("NotFound"), "{}", o.stderr);
    let o = k.run(&["get", "configmap", "c1", "-n", &ns], None).await;
    assert!(o.stderr.contains("NotFound"), "{}", o.stderr);
    k.shutdown().await;
}

async fn bind_reader(k: &Kubectl, ns: &str, user: &str) {
    k.ok(&["create", "namespace", ns], None).await;
    k.ok(
        &[
            "create",
            "role",
            "cm-reader",
            "-n",
            ns,
            "--verb=get,list",
            "--resource=configmaps",
        ],
        None,
    )
    .await;
    k.ok(
        &[
            "create",
            "rolebinding",
            "cm-reader",
            "-n",
            ns,
            "--role=cm-reader",
            &format!("--user={user}"),
        ],
        None,
    )
    .await;
}

#[tokio::test]
async fn kubectl_auth_can_i_for_a_token_user_bound_by_rbac() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let Some(server) = &k.server else {
        eprintln!("skipped: minting a token needs the embedded server");
        return;
    };
    let s = suffix();
    let user = format!("dana-{s}");
    let token = format!("tok-{s}");
    server.add_token(&token, &user, &format!("uid-{s}"), &["devs"]);
    let ns = format!("ka-{s}");
    bind_reader(&k, &ns, &user).await;
    let yes = k
        .run(
            &[
                "--token",
                &token,
                "auth",
                "can-i",
                "get",
                "configmaps",
                "-n",
                &ns,
            ],
            None,
        )
        .await;
    assert_eq!((yes.code, yes.stdout.trim()), (0, "yes"), "{}", yes.stderr);
    let no = k
        .run(
            &[
                "--token",
                &token,
                "auth",
                "can-i",
                "delete",
                "configmaps",
                "-n",
                &ns,
            ],
            None,
        )
        .await;
    assert_eq!((no.code, no.stdout.trim()), (1, "no"), "{}", no.stderr);
    let elsewhere = k
        .run(
            &[
                "--token",
                &token,
                "auth",
                "can-i",
                "get",
                "configmaps",
                "-n",
                "default",
            ],
            None,
        )
        .await;
    assert_eq!(elsewhere.stdout.trim(), "no");
    let forbidden = k
        .run(
            &["--token", &token, "delete", "configmap", "x", "-n", &ns],
            None,
        )
        .await;
    assert!(
        forbidden.stderr.contains("Forbidden") || forbidden.stderr.contains("forbidden"),
        "{}",
        forbidden.stderr
    );
    k.shutdown().await;
}

/// `kubectl --as` is served as kube-apiserver serves impersonation: the administrator may act as
/// anyone, and the request then has exactly the impersonated user's rights; a user without the
/// `impersonate` verb is refused with a 403 naming what was asked, and nothing is written.
#[tokio::test]
async fn kubectl_as_another_user_acts_with_that_users_rights_when_rbac_allows_impersonating_them() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let ns = format!("ki-{s}");
    let erin = format!("erin-{s}");
    k.ok(&["create", "namespace", &ns], None).await;
    // Erin has no rights: as her, even the administrator is refused, in her name.
    let o = k
        .run(
            &["create", "configmap", "x", "-n", &ns, "--as", &erin],
            None,
        )
        .await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains(&format!(
            "User \"{erin}\" cannot create resource \"configmaps\""
        )),
        "{}",
        o.stderr
    );
    // Given edit in the namespace, she may.
    k.ok(
        &[
            "create",
            "rolebinding",
            "erin-edit",
            "--clusterrole=edit",
            "--user",
            &erin,
            "-n",
            &ns,
        ],
        None,
    )
    .await;
    k.ok(
        &["create", "configmap", "x", "-n", &ns, "--as", &erin],
        None,
    )
    .await;
    // The embedded cluster's audit trail names her as the writer, the administrator as the one
    // who impersonated her, and keeps her refused write too.
    if k.server.is_some() {
        let audit: serde_json::Value =
            serde_json::from_str(&k.ok(&["get", "--raw", "/lethe/audit"], None).await)
                .expect("the audit trail is JSON");
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        let writes: Vec<&serde_json::Value> = audit
            .as_array()
            .expect("a list")
            .iter()
            .filter(|e| e["path"] == path.as_str())
            .collect();
        let codes: Vec<i64> = writes.iter().filter_map(|e| e["code"].as_i64()).collect();
        assert_eq!(codes, vec![403, 201], "{writes:?}");
        for write in writes {
            assert_eq!(write["user"], erin.as_str(), "{write}");
            assert_eq!(write["impersonatedBy"], "admin", "{write}");
            assert_eq!(write["method"], "POST", "{write}");
        }
    }
    // A ServiceAccount impersonated gets its groups: a binding to its namespace's group counts.
    let sa_user = format!("system:serviceaccount:{ns}:robot");
    k.ok(
        &[
            "create",
            "rolebinding",
            "accounts-view",
            "--clusterrole=view",
            "--group",
            &format!("system:serviceaccounts:{ns}"),
            "-n",
            &ns,
        ],
        None,
    )
    .await;
    let read = k
        .run(
            &["get", "configmap", "x", "-n", &ns, "--as", &sa_user],
            None,
        )
        .await;
    assert_eq!(read.code, 0, "{}", read.stderr);
    let write = k
        .run(
            &["delete", "configmap", "x", "-n", &ns, "--as", &sa_user],
            None,
        )
        .await;
    assert_ne!(write.code, 0, "view may not delete");
    // On the embedded cluster: a user with a token of their own but no `impersonate` is refused,
    // and may impersonate exactly the ServiceAccount a Role names.
    if let Some(server) = &k.server {
        let frank_token = format!("frank-{s}");
        server.add_token(&frank_token, "frank", "uid-frank", &[]);
        let as_frank = |extra: &[&str]| {
            let mut args = vec!["--token", frank_token.as_str()];
            args.extend_from_slice(extra);
            args.into_iter().map(str::to_string).collect::<Vec<_>>()
        };
        let args = as_frank(&["get", "configmap", "x", "-n", &ns, "--as", &sa_user]);
        let refused = k
            .run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
            .await;
        assert_ne!(refused.code, 0);
        assert!(
            refused.stderr.contains(&format!(
                "serviceaccounts \"robot\" is forbidden: User \"frank\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"{ns}\""
            )),
            "{}",
            refused.stderr
        );
        k.ok(
            &[
                "create",
                "role",
                "impersonate-robot",
                "--verb=impersonate",
                "--resource=serviceaccounts",
                "--resource-name=robot",
                "-n",
                &ns,
            ],
            None,
        )
        .await;
        k.ok(
            &[
                "create",
                "rolebinding",
                "frank-robot",
                "--role=impersonate-robot",
                "--user=frank",
                "-n",
                &ns,
            ],
            None,
        )
        .await;
        let args = as_frank(&["get", "configmap", "x", "-n", &ns, "--as", &sa_user]);
        let allowed = k
            .run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
            .await;
        assert_eq!(allowed.code, 0, "{}", allowed.stderr);
        // Another account of the namespace, or a group, is still not his to take.
        let other = format!("system:serviceaccount:{ns}:other");
        let args = as_frank(&["get", "configmap", "x", "-n", &ns, "--as", &other]);
        let refused = k
            .run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
            .await;
        assert_ne!(refused.code, 0, "impersonated an account no Role names");
        let args = as_frank(&[
            "get",
            "configmap",
            "x",
            "-n",
            &ns,
            "--as",
            &sa_user,
            "--as-group",
            "system:masters",
        ]);
        let refused = k
            .run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
            .await;
        assert!(
            refused
                .stderr
                .contains("cannot impersonate resource \"groups\""),
            "{}",
            refused.stderr
        );
    }
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_apply_updates_a_cronjob_with_a_strategic_merge_patch() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("kcj-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    let cj = |image: &str| {
        format!(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: sync\n  namespace: {ns}\nspec:\n  schedule: \"*/5 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: main\n            image: {image}\n            args: [\"run\"]\n"
        )
    };
    k.ok(&["apply", "-f", "-"], Some(&cj("busybox:1"))).await;
    let out = k.ok(&["apply", "-f", "-"], Some(&cj("busybox:2"))).await;
    assert!(out.contains("configured"), "{out}");
    let got = k
        .ok(&["get", "cronjob", "sync", "-n", &ns, "-o", "jsonpath={.spec.jobTemplate.spec.template.spec.containers[0].image} {.spec.jobTemplate.spec.template.spec.containers[0].args[0]} {.metadata.generation}"], None)
        .await;
    assert_eq!(got, "busybox:2 run 2");
    let table = k.ok(&["get", "cronjobs", "-n", &ns], None).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header[..3], ["NAME", "SCHEDULE", "TIMEZONE"], "{table}");
    assert!(
        table.contains("sync") && table.contains("*/5 * * * *"),
        "{table}"
    );
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

/// Client-side apply sends strategic merge patches, which merge lists by the Go types' patch
/// merge keys: a Service's ports by `port`; a binding's subjects are replaced as a whole, so a
/// subject removed from the manifest loses its access.
#[tokio::test]
async fn kubectl_apply_removes_a_service_port_and_a_binding_subject() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("kap-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    let service = |ports: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  selector: {{app: web}}\n  ports:\n{ports}"
        )
    };
    let http = "  - {name: http, port: 80}\n";
    let https = "  - {name: https, port: 443}\n";
    k.ok(
        &["apply", "-f", "-"],
        Some(&service(&format!("{http}{https}"))),
    )
    .await;
    k.ok(&["apply", "-f", "-"], Some(&service(http))).await;
    let ports = k
        .ok(
            &[
                "get",
                "service",
                "web",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.ports[*].port}",
            ],
            None,
        )
        .await;
    assert_eq!(ports, "80");
    k.ok(
        &["apply", "-f", "-"],
        Some(&service("  - {name: http, port: 8080}\n")),
    )
    .await;
    let ports = k
        .ok(
            &[
                "get",
                "service",
                "web",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.ports[*].port}",
            ],
            None,
        )
        .await;
    assert_eq!(ports, "8080");
    let binding = |subjects: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: readers\n  namespace: {ns}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects:\n{subjects}"
        )
    };
    let alice = "- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}\n";
    let bob = "- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}\n";
    k.ok(
        &["apply", "-f", "-"],
        Some(&binding(&format!("{alice}{bob}"))),
    )
    .await;
    k.ok(&["apply", "-f", "-"], Some(&binding(alice))).await;
    let names = k
        .ok(
            &[
                "get",
                "rolebinding",
                "readers",
                "-n",
                &ns,
                "-o",
                "jsonpath={.subjects[*].name}",
            ],
            None,
        )
        .await;
    assert_eq!(names, "alice");
    let wide = k
        .ok(
            &["get", "rolebinding", "readers", "-n", &ns, "-o", "wide"],
            None,
        )
        .await;
    let header: Vec<&str> = wide
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // A real cluster adds the wide USERS, GROUPS and SERVICEACCOUNTS; the embedded one does not.
    assert_eq!(header[..3], ["NAME", "ROLE", "AGE"], "{wide}");
    assert!(
        wide.lines()
            .nth(1)
            .is_some_and(|row| row.contains("ClusterRole/view")),
        "{wide}"
    );
    // Bob asks for himself, impersonated by the administrator.
    let args = vec!["auth", "can-i", "get", "pods", "-n", &ns, "--as", "bob"];
    let bob_can = k.run(&args, None).await;
    assert_eq!(bob_can.stdout.trim(), "no");
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_get_prints_a_crds_additional_printer_columns() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let group = format!("p{s}.lethe.test");
    let plural = format!("printer{s}s");
    let kind = format!("Printer{s}");
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Cluster
  names: {{plural: {plural}, kind: {kind}}}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {{name: Size, type: integer, jsonPath: .spec.size}}
    - {{name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}}
    schema:
      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"#
    );
    k.ok(&["apply", "-f", "-"], Some(&crd)).await;
    k.wait_established(&format!("{plural}.{group}")).await;
    let obj = format!(
        "apiVersion: {group}/v1\nkind: {kind}\nmetadata: {{name: p1}}\nspec: {{size: 7}}\nstatus: {{conditions: [{{type: Ready, status: 'True'}}]}}\n"
    );
    k.ok(&["apply", "-f", "-"], Some(&obj)).await;
    let table = k.ok(&["get", &plural], None).await;
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "SIZE", "READY"], "{table}");
    assert_eq!(lines[1], ["p1", "7", "True"], "{table}");
    k.delete_crd(&format!("{plural}.{group}")).await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_auth_whoami_and_can_i_describe_a_token_user() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let Some(server) = &k.server else {
        eprintln!("skipped: minting a token needs the embedded server");
        return;
    };
    let s = suffix();
    let user = format!("finn-{s}");
    let token = format!("tok-{s}");
    server.add_token(&token, &user, &format!("uid-{s}"), &["devs"]);
    let ns = format!("kw-{s}");
    bind_reader(&k, &ns, &user).await;
    let who = k.ok(&["--token", &token, "auth", "whoami"], None).await;
    assert!(
        who.contains(&user) && who.contains("devs") && who.contains("system:authenticated"),
        "{who}"
    );
    // SelfSubjectRulesReview (`can-i --list`) is not served; single questions are.
    for (verb, answer, code) in [("get", "yes", 0), ("delete", "no", 1)] {
        let o = k
            .run(
                &[
                    "--token",
                    &token,
                    "auth",
                    "can-i",
                    verb,
                    "configmaps",
                    "-n",
                    &ns,
                ],
                None,
            )
            .await;
        assert_eq!(
            (o.stdout.trim(), o.code),
            (answer, code),
            "{verb}: {}",
            o.stderr
        );
    }
    k.shutdown().await;
}

/// A Secret of type `kubernetes.io/service-account-token` gets a long-lived token of its
/// ServiceAccount from the token controller; the token works until the Secret is deleted.
#[tokio::test]
async fn a_service_account_token_secret_is_filled_and_revoked_with_the_secret() {
    use base64::Engine;
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("kst-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    k.ok(&["create", "serviceaccount", "ci", "-n", &ns], None)
        .await;
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ci-token\n  namespace: {ns}\n  annotations:\n    kubernetes.io/service-account.name: ci\ntype: kubernetes.io/service-account-token\n"
    );
    k.ok(&["apply", "-f", "-"], Some(&secret)).await;
    let mut encoded = String::new();
    for _ in 0..50 {
        encoded = k
            .ok(
                &[
                    "get",
                    "secret",
                    "ci-token",
                    "-n",
                    &ns,
                    "-o",
                    "jsonpath={.data.token}",
                ],
                None,
            )
            .await;
        if !encoded.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let token = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .expect("base64"),
    )
    .expect("text");
    let namespace = k
        .ok(
            &[
                "get",
                "secret",
                "ci-token",
                "-n",
                &ns,
                "-o",
                "jsonpath={.data.namespace}",
            ],
            None,
        )
        .await;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(namespace.trim())
            .expect("base64"),
        ns.as_bytes()
    );
    let who = k.ok(&["--token", &token, "auth", "whoami"], None).await;
    assert!(
        who.contains(&format!("system:serviceaccount:{ns}:ci")),
        "{who}"
    );
    k.ok(&["delete", "secret", "ci-token", "-n", &ns], None)
        .await;
    let revoked = k.run(&["--token", &token, "auth", "whoami"], None).await;
    assert_ne!(revoked.code, 0, "{}", revoked.stdout);
    assert!(
        revoked.stderr.contains("Unauthorized"),
        "{}",
        revoked.stderr
    );
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_rejects_unknown_custom_resource_fields_with_strict_validation() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let group = format!("v{s}.lethe.test");
    let plural = format!("strict{s}s");
    let kind = format!("Strict{s}");
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Cluster
  names: {{plural: {plural}, kind: {kind}}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{type: integer}}
"#
    );
    k.ok(&["apply", "-f", "-"], Some(&crd)).await;
    k.wait_established(&format!("{plural}.{group}")).await;
    let bad = format!(
        "apiVersion: {group}/v1\nkind: {kind}\nmetadata: {{name: s1}}\nspec: {{size: 1, colour: red}}\n"
    );
    let o = k.run(&["apply", "-f", "-"], Some(&bad)).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr
            .contains(r#"strict decoding error: unknown field "spec.colour""#),
        "{}",
        o.stderr
    );
    let o = k
        .run(&["apply", "--validate=false", "-f", "-"], Some(&bad))
        .await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    let spec = k
        .ok(&["get", &plural, "s1", "-o", "jsonpath={.spec}"], None)
        .await;
    assert_eq!(spec, r#"{"size":1}"#, "pruned without strict validation");
    k.delete_crd(&format!("{plural}.{group}")).await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_shows_server_warnings_for_unqualified_finalizers() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let ns = format!("kwarn-{s}");
    k.ok(&["create", "namespace", &ns], None).await;
    // A built-in kind's finalizer must be standard or domain-qualified.
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n  namespace: {ns}\n  finalizers: [plainname]\n"
    );
    let o = k.run(&["apply", "-f", "-"], Some(&cm)).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains(
            "The ConfigMap \"w\" is invalid: metadata.finalizers[0]: Invalid value: \"plainname\": name is neither a standard finalizer name nor is it fully qualified"
        ),
        "{}",
        o.stderr
    );
    // A custom resource's is only warned about.
    let group = format!("w{s}.lethe.test");
    let plural = format!("widget{s}s");
    let kind = format!("Widget{s}");
    k.ok(
        &["apply", "-f", "-"],
        Some(&crd_yaml(&group, &plural, &kind)),
    )
    .await;
    k.wait_established(&format!("{plural}.{group}")).await;
    let cr = format!(
        "apiVersion: {group}/v1\nkind: {kind}\nmetadata:\n  name: w\n  namespace: {ns}\n  finalizers: [plainname]\n"
    );
    let o = k.run(&["apply", "-f", "-"], Some(&cr)).await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "Warning: metadata.finalizers: \"plainname\": prefer a domain-qualified finalizer name"
        ),
        "{}",
        o.stderr
    );
    k.ok(
        &[
            "patch",
            &plural,
            "w",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
        None,
    )
    .await;
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_applies_a_list_file() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let group = format!("l{s}.lethe.test");
    let plural = format!("item{s}s");
    let kind = format!("Item{s}");
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("kl-{s}")}},
            {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": format!("{plural}.{group}")},
             "spec": {"group": group, "scope": "Namespaced",
                      "names": {"plural": plural, "kind": kind},
                      "versions": [{"name": "v1", "served": true, "storage": true,
                                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                        "spec": {"type": "object", "properties": {
                                            "displayName": {"type": "string", "description": "The name people see."}}}}}}}]}},
        ],
    });
    let out = k.ok(&["apply", "-f", "-"], Some(&list.to_string())).await;
    assert!(out.contains(&format!("namespace/kl-{s} created")), "{out}");
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io"),
        "{out}"
    );
    k.wait_established(&format!("{plural}.{group}")).await;
    k.delete_crd(&format!("{plural}.{group}")).await;
    k.ok(
        &["delete", "namespace", &format!("kl-{s}"), "--wait=false"],
        None,
    )
    .await;
    k.shutdown().await;
}

async fn get_json(k: &Kubectl, kind: &str, name: &str, ns: &str) -> serde_json::Value {
    let out = k
        .ok(&["get", kind, name, "-n", ns, "-o", "json"], None)
        .await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{kind}/{name}: {e}: {out}"))
}

/// `kubectl create clusterrole --aggregation-rule` sends protobuf; the embedded cluster runs no
/// aggregation controller, so it refuses the rule rather than keep a role nothing fills.
#[tokio::test]
async fn kubectl_create_clusterrole_with_an_aggregation_rule_is_refused() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    if k.server.is_none() {
        eprintln!("skipped: a real cluster aggregates ClusterRoles");
        return;
    }
    let s = suffix();
    let o = k
        .run(
            &[
                "create",
                "clusterrole",
                &format!("agg-{s}"),
                &format!("--aggregation-rule=team-{s}=a"),
            ],
            None,
        )
        .await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains(
            "aggregationRule: Forbidden: this cluster runs no ClusterRole aggregation controller"
        ),
        "{}",
        o.stderr
    );
    k.shutdown().await;
}

#[tokio::test]
async fn built_in_kinds_drop_unknown_fields_or_refuse_them_under_strict_validation() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("ku-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    let bad = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: odd, namespace: {ns}}}\ndata: {{a: b}}\ncolour: red\n"
    );
    // kubectl asks for strict field validation by default, as against a real API server.
    let o = k.run(&["apply", "-f", "-"], Some(&bad)).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr
            .contains(r#"strict decoding error: unknown field "colour""#),
        "{}",
        o.stderr
    );
    let o = k
        .run(&["apply", "--validate=false", "-f", "-"], Some(&bad))
        .await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    let stored = get_json(&k, "configmap", "odd", &ns).await;
    assert!(stored.get("colour").is_none(), "dropped: {stored}");
    assert_eq!(stored["data"]["a"], "b");
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn fields_of_the_wrong_type_are_refused_by_the_decoder() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("kt-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    let cron = |schedule: &str| {
        format!(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: typed, namespace: {ns}}}\n\
             spec:\n  schedule: {schedule}\n  jobTemplate:\n    spec:\n      template:\n        spec:\n\
             \x20         restartPolicy: Never\n          containers: [{{name: c, image: busybox}}]\n"
        )
    };
    let o = k.run(&["create", "-f", "-"], Some(&cron("5"))).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("Error from server (BadRequest)")
            && o.stderr.contains(
                "CronJob in version \"v1\" cannot be handled as a CronJob: json: cannot unmarshal number into Go struct field CronJobSpec.spec.schedule of type string"
            ),
        "{}",
        o.stderr
    );
    // The same object with a string schedule is taken.
    k.ok(&["create", "-f", "-"], Some(&cron("'*/5 * * * *'")))
        .await;
    // A patch that leaves a field of the wrong type fails when the result is decoded: 422 on
    // `patch`, naming the patched object (merge) or the patch as Go prints it (strategic).
    let decode = "json: cannot unmarshal number into Go struct field CronJobSpec.spec.schedule of type string";
    for (kind, shown) in [
        ("merge", "\\\"schedule\\\":5"),
        ("strategic", "map[spec:map[schedule:5]]"),
    ] {
        let o = k
            .run(
                &[
                    "patch",
                    "cronjob",
                    "typed",
                    "-n",
                    &ns,
                    "--type",
                    kind,
                    "-p",
                    r#"{"spec":{"schedule":5}}"#,
                ],
                None,
            )
            .await;
        assert_ne!(o.code, 0, "{kind}");
        assert!(
            o.stderr.contains(decode)
                && o.stderr.contains("patch: Invalid value: ")
                && o.stderr.contains(shown),
            "{kind}: {}",
            o.stderr
        );
    }
    // Server-side apply decodes the applied configuration first, whether the object exists or
    // not, and fails as the typed patch object it could not make.
    for name in ["typed", "fresh"] {
        let applied = cron("5").replace("name: typed", &format!("name: {name}"));
        let o = k
            .run(&["apply", "--server-side", "-f", "-"], Some(&applied))
            .await;
        assert_ne!(o.code, 0, "{name}");
        assert!(
            o.stderr.contains(&format!(
                "failed to create typed patch object ({ns}/{name}; batch/v1, Kind=CronJob): {decode}"
            )),
            "{name}: {}",
            o.stderr
        );
    }
    // A field the kind does not have fails kubectl's strict field validation.
    let undeclared = cron("'*/5 * * * *'").replacen("spec:\n", "spec:\n  bogus: 1\n", 1);
    let o = k
        .run(&["apply", "--server-side", "-f", "-"], Some(&undeclared))
        .await;
    assert!(
        o.stderr.contains(r#"unknown field "spec.bogus""#),
        "{}",
        o.stderr
    );
    let schedule = k
        .ok(
            &[
                "get",
                "cronjob",
                "typed",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.schedule}",
            ],
            None,
        )
        .await;
    assert_eq!(schedule, "*/5 * * * *");
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn every_new_namespace_gets_a_default_service_account() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("ksa-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    // The service-account controller acts on its own schedule, as a real one does.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let o = k
            .run(
                &["get", "serviceaccount", "default", "-n", &ns, "-o", "name"],
                None,
            )
            .await;
        if o.code == 0 {
            assert_eq!(o.stdout.trim(), "serviceaccount/default");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no default ServiceAccount: {}",
            o.stderr
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    k.ok(
        &["delete", "namespace", &ns, "--wait=true", "--timeout=20s"],
        None,
    )
    .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_create_token_authenticates_as_the_service_account() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("ktk-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    k.ok(&["create", "serviceaccount", "robot", "-n", &ns], None)
        .await;
    let token = k
        .ok(&["create", "token", "robot", "-n", &ns], None)
        .await
        .trim()
        .to_string();
    let whoami = k
        .ok(&["--token", &token, "auth", "whoami", "-o", "json"], None)
        .await;
    let review: serde_json::Value = serde_json::from_str(&whoami).expect("json");
    assert_eq!(
        review["status"]["userInfo"]["username"],
        format!("system:serviceaccount:{ns}:robot")
    );
    let groups = review["status"]["userInfo"]["groups"].to_string();
    assert!(
        groups.contains(&format!("system:serviceaccounts:{ns}")),
        "{groups}"
    );
    // RBAC binds service accounts by subject kind ServiceAccount.
    let before = k
        .run(
            &[
                "--token",
                &token,
                "auth",
                "can-i",
                "list",
                "configmaps",
                "-n",
                &ns,
            ],
            None,
        )
        .await;
    assert_eq!(before.stdout.trim(), "no", "{}", before.stderr);
    k.ok(
        &[
            "create",
            "rolebinding",
            "robot-view",
            "-n",
            &ns,
            "--clusterrole=view",
            &format!("--serviceaccount={ns}:robot"),
        ],
        None,
    )
    .await;
    let after = k
        .run(
            &[
                "--token",
                &token,
                "auth",
                "can-i",
                "list",
                "configmaps",
                "-n",
                &ns,
            ],
            None,
        )
        .await;
    assert_eq!(after.stdout.trim(), "yes", "{}", after.stderr);
    // As the real server: no token shorter than ten minutes, none for a missing account.
    let short = k
        .run(
            &["create", "token", "robot", "-n", &ns, "--duration=1m"],
            None,
        )
        .await;
    assert!(
        short
            .stderr
            .contains("may not specify a duration less than 10 minutes"),
        "{}",
        short.stderr
    );
    let missing = k.run(&["create", "token", "nobody", "-n", &ns], None).await;
    assert!(missing.stderr.contains("not found"), "{}", missing.stderr);
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

fn jwt_claims(token: &str) -> serde_json::Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("claims")
}

#[tokio::test]
async fn kubectl_create_token_issues_signed_jwts_bound_to_the_account() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("kjw-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    k.ok(&["create", "serviceaccount", "robot", "-n", &ns], None)
        .await;
    let sa = get_json(&k, "serviceaccount", "robot", &ns).await;
    let token = k
        .ok(&["create", "token", "robot", "-n", &ns], None)
        .await
        .trim()
        .to_string();
    let claims = jwt_claims(&token);
    assert_eq!(
        claims["sub"],
        serde_json::json!(format!("system:serviceaccount:{ns}:robot"))
    );
    assert_eq!(claims["kubernetes.io"]["namespace"], serde_json::json!(ns));
    assert_eq!(
        claims["kubernetes.io"]["serviceaccount"]["uid"],
        sa["metadata"]["uid"]
    );
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3600
    );
    assert!(claims["aud"].as_array().is_some_and(|a| !a.is_empty()));
    assert!(
        claims["iss"].is_string() && claims["nbf"].is_i64(),
        "{claims}"
    );
    // A token for another audience is not for the API server.
    let vault = k
        .ok(
            &["create", "token", "robot", "-n", &ns, "--audience=vault"],
            None,
        )
        .await
        .trim()
        .to_string();
    assert_eq!(jwt_claims(&vault)["aud"], serde_json::json!(["vault"]));
    let refused = k.run(&["--token", &vault, "auth", "whoami"], None).await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("Unauthorized"),
        "{}",
        refused.stderr
    );
    // Bound to an object: a real cluster binds it; the embedded one refuses.
    if k.server.is_some() {
        let o = k
            .run(
                &[
                    "create",
                    "token",
                    "robot",
                    "-n",
                    &ns,
                    "--bound-object-kind=Secret",
                    "--bound-object-name=anchor",
                ],
                None,
            )
            .await;
        assert_ne!(o.code, 0);
        assert!(
            o.stderr.contains("binds no TokenRequest to an object"),
            "{}",
            o.stderr
        );
    }
    // The account deleted and created again: its old tokens are void.
    k.ok(&["--token", &token, "auth", "whoami"], None).await;
    k.ok(&["delete", "serviceaccount", "robot", "-n", &ns], None)
        .await;
    k.ok(&["create", "serviceaccount", "robot", "-n", &ns], None)
        .await;
    let stale = k.run(&["--token", &token, "auth", "whoami"], None).await;
    assert!(stale.stderr.contains("Unauthorized"), "{}", stale.stderr);
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_service_names_ports_and_selectors_are_validated_like_a_real_cluster() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("ksv-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    // A Service's name becomes a DNS name, so it must start with a letter (DNS-1035).
    let yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: 1abc\n  namespace: {ns}\nspec:\n  ports:\n  - port: 80\n"
    );
    let o = k.run(&["create", "-f", "-"], Some(&yaml)).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("The Service \"1abc\" is invalid: metadata.name: Invalid value: \"1abc\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character"),
        "{}",
        o.stderr
    );
    // `kubectl create service` sends protobuf, which this cluster decodes only for the kinds of
    // the flows lethe documents.
    let o = k
        .run(
            &[
                "create",
                "service",
                "clusterip",
                "s1",
                "--tcp=80",
                "-n",
                &ns,
            ],
            None,
        )
        .await;
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("send JSON"), "{}", o.stderr);
    let yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: sel\n  namespace: {ns}\nspec:\n  selector:\n    app: -web\n  ports:\n  - port: 80\n    name: web\n  - port: 81\n"
    );
    let o = k.run(&["create", "-f", "-"], Some(&yaml)).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains(
            "The Service \"sel\" is invalid: \n* spec.ports[1].name: Required value\n* spec.selector: Invalid value: \"-web\": a valid label must be an empty string or consist of alphanumeric characters"
        ),
        "{}",
        o.stderr
    );
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_get_columns_and_field_selectors_match_a_real_cluster() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("kgc-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    k.ok(
        &[
            "create",
            "configmap",
            "cm1",
            "--from-literal=a=b",
            "-n",
            &ns,
        ],
        None,
    )
    .await;
    // Only the fields a kind registers may be selected on; the rest are refused, not ignored.
    let o = k
        .run(&["get", "cm", "--field-selector", "x=y", "-n", &ns], None)
        .await;
    assert_ne!(o.code, 0);
    assert_eq!(
        o.stderr.trim(),
        "Error from server (BadRequest): Unable to find \"/v1, Resource=configmaps\" that match label selector \"\", field selector \"x=y\": \"x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    let out = k
        .ok(
            &[
                "get",
                "cm",
                "--field-selector",
                "metadata.name=cm1",
                "-n",
                &ns,
                "-o",
                "name",
            ],
            None,
        )
        .await;
    assert_eq!(out.trim(), "configmap/cm1");
    k.ok(
        &[
            "create",
            "secret",
            "generic",
            "s1",
            "--from-literal=pw=x",
            "-n",
            &ns,
        ],
        None,
    )
    .await;
    let out = k
        .ok(
            &[
                "get",
                "secret",
                "--field-selector",
                "type=Opaque",
                "-n",
                &ns,
                "-o",
                "name",
            ],
            None,
        )
        .await;
    assert_eq!(out.trim(), "secret/s1");
    let out = k.ok(&["get", "sa", "-n", &ns], None).await;
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "SECRETS", "AGE"], "{out}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().take(2).eq(["default", "0"])),
        "{out}"
    );
    // As JSON: `kubectl create cronjob` sends protobuf, which this server decodes only for kinds
    // without a pod template.
    let cron_job = format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: c1, namespace: {ns}}}\n\
         spec:\n  schedule: \"*/5 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          \
         restartPolicy: OnFailure\n          containers: [{{name: c1, image: busybox}}]\n"
    );
    k.ok(&["create", "-f", "-"], Some(&cron_job)).await;
    let out = k
        .ok(&["get", "cronjobs", "-o", "wide", "-n", &ns], None)
        .await;
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // A real cluster adds the wide CONTAINERS, IMAGES and SELECTOR; the embedded one does not.
    assert_eq!(
        header[..8],
        [
            "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"
        ],
        "{out}"
    );
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row[..6], ["c1", "*/5", "*", "*", "*", "*"], "{out}");
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

fn words(line: Option<&str>) -> Vec<String> {
    line.unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// `kubectl get events` prints the real printer's columns, narrow and wide, for a core Event
/// about an object (the Event names its object; nothing checks that the object exists).
#[tokio::test]
async fn kubectl_shows_events_like_a_cluster() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("kpod-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    let events = format!(
        r#"apiVersion: v1
kind: Event
metadata:
  name: web.1
  namespace: {ns}
involvedObject:
  kind: Pod
  name: web
  namespace: {ns}
reason: Scheduled
type: Normal
message: "Successfully assigned {ns}/web to node-1 "
source:
  component: default-scheduler
firstTimestamp: "2020-01-01T00:00:00Z"
lastTimestamp: "2020-01-01T00:00:00Z"
count: 1
"#
    );
    k.ok(&["apply", "-f", "-"], Some(&events)).await;
    let out = k.ok(&["get", "events", "-n", &ns], None).await;
    let mut lines = out.lines();
    assert_eq!(
        words(lines.next()),
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{out}"
    );
    let row = words(lines.next());
    assert_eq!(row[1..4], ["Normal", "Scheduled", "pod/web"], "{out}");
    assert!(row[0].ends_with('y') || row[0].contains('y'), "{out}");
    assert_eq!(
        row[4..].join(" "),
        format!("Successfully assigned {ns}/web to node-1"),
        "{out}"
    );
    // A real cluster adds the wide SUBOBJECT, SOURCE, FIRST SEEN, COUNT and NAME; the embedded
    // one does not.
    let out = k
        .ok(&["get", "events", "-o", "wide", "-n", &ns], None)
        .await;
    assert_eq!(
        words(out.lines().next())[..5],
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT"],
        "{out}"
    );
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_reports_bad_selectors_and_generate_names_like_a_cluster() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("ksel-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    for (sel, msg) in [
        (
            "a b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "a in (b",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ] {
        let o = k.run(&["get", "cm", "-n", &ns, "-l", sel], None).await;
        assert_ne!(o.code, 0, "{sel}: {}", o.stdout);
        assert!(o.stderr.contains("(BadRequest)"), "{sel}: {}", o.stderr);
        assert!(o.stderr.trim_end().ends_with(msg), "{sel}: {}", o.stderr);
    }
    let bad = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: Bad_\n  namespace: {ns}\n"
    );
    let o = k.run(&["create", "-f", "-"], Some(&bad)).await;
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert!(
        o.stderr.contains(
            "* metadata.generateName: Invalid value: \"Bad_\": a lowercase RFC 1123 subdomain"
        ),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("* metadata.name: Invalid value: \"Bad_"),
        "{}",
        o.stderr
    );
    let good = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: ok-\n  namespace: {ns}\n"
    );
    let out = k
        .ok(&["create", "-f", "-", "-o", "name"], Some(&good))
        .await;
    assert!(out.trim().starts_with("configmap/ok-"), "{out}");
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

#[tokio::test]
async fn kubectl_selects_custom_resources_on_their_selectable_fields() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let group = format!("sel{s}.example.com");
    let ns = format!("kcrsel-{s}");
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: gadgets, singular: gadget, kind: Gadget}}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields:
    - jsonPath: .spec.color
    - jsonPath: .spec.size
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {{type: string}}
              size: {{type: integer}}
              note: {{type: string}}
"#
    );
    k.ok(&["apply", "-f", "-"], Some(&crd)).await;
    k.ok(&["create", "namespace", &ns], None).await;
    let mut objs = String::new();
    for (name, color, size) in [("g1", "red", 1), ("g2", "blue", 2), ("g3", "red", 3)] {
        objs.push_str(&format!(
            "---\napiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  color: {color}\n  size: {size}\n  note: x\n"
        ));
    }
    // The CRD's API may take a moment to be served after it is established.
    let mut o = k.run(&["apply", "-f", "-"], Some(&objs)).await;
    for _ in 0..20 {
        if o.code == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        o = k.run(&["apply", "-f", "-"], Some(&objs)).await;
    }
    assert_eq!(o.code, 0, "{}", o.stderr);
    let resource = format!("gadgets.{group}");
    let names = |out: String| -> Vec<String> { out.lines().map(str::to_string).collect() };
    let get = |sel: &str| {
        vec![
            "get".to_string(),
            resource.clone(),
            "-n".into(),
            ns.clone(),
            "--field-selector".into(),
            sel.to_string(),
            "-o".into(),
            "name".into(),
        ]
    };
    let args = get("spec.color=red");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(
        names(k.ok(&args, None).await),
        [
            "gadget.".to_string() + &group + "/g1",
            "gadget.".to_string() + &group + "/g3"
        ]
    );
    let args = get("spec.color=red,spec.size!=1,metadata.name=g3");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(
        names(k.ok(&args, None).await),
        ["gadget.".to_string() + &group + "/g3"]
    );
    let args = get(&format!("metadata.namespace={ns},spec.size=2"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(
        names(k.ok(&args, None).await),
        ["gadget.".to_string() + &group + "/g2"]
    );
    let args = get("spec.note=x");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = k.run(&args, None).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("(BadRequest)")
            && o.stderr
                .trim_end()
                .ends_with("field label not supported: spec.note"),
        "{}",
        o.stderr
    );
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.delete_crd(&resource).await;
    k.shutdown().await;
}

/// Moving an object from client-side to server-side apply: kubectl hands the client-side
/// manager's fields to its server-side one and applies again; nothing it still applies is lost.
#[tokio::test]
async fn kubectl_moves_an_object_from_client_side_to_server_side_apply() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("ssa-move-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    let cm = |a: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: moved, namespace: {ns}}}\ndata: {{a: '{a}', b: '2'}}\n"
        )
    };
    k.ok(&["apply", "-f", "-"], Some(&cm("1"))).await;
    k.ok(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&cm("3")),
    )
    .await;
    let data = k
        .ok(
            &[
                "get",
                "configmap",
                "moved",
                "-n",
                &ns,
                "-o",
                "jsonpath={.data}",
            ],
            None,
        )
        .await;
    let data: serde_json::Value = serde_json::from_str(&data).unwrap();
    assert_eq!(data, serde_json::json!({"a": "3", "b": "2"}));
    let managers = k
        .ok(
            &[
                "get",
                "configmap",
                "moved",
                "-n",
                &ns,
                "--show-managed-fields",
                "-o",
                "jsonpath={.metadata.managedFields[*].manager}",
            ],
            None,
        )
        .await;
    assert!(
        managers.split_whitespace().any(|m| m == "kubectl"),
        "{managers}"
    );
    assert!(
        !managers.contains("kubectl-client-side-apply"),
        "{managers}"
    );
    k.shutdown().await;
}

/// `kubectl get --sort-by` asks for whole objects in the Table's rows and sorts by their fields.
#[tokio::test]
async fn kubectl_get_sorts_by_a_field_of_the_objects() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let ns = format!("ksort-{}", suffix());
    k.ok(&["create", "namespace", &ns], None).await;
    for (name, value) in [("first", "b"), ("second", "a")] {
        k.ok(
            &[
                "create",
                "configmap",
                name,
                &format!("--from-literal=a={value}"),
                "-n",
                &ns,
            ],
            None,
        )
        .await;
    }
    let out = k
        .ok(
            &["get", "cm", "-l", "!x", "--sort-by=.data.a", "-n", &ns],
            None,
        )
        .await;
    let names: Vec<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "kube-root-ca.crt")
        .collect();
    assert_eq!(names, ["second", "first"], "{out}");
    k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
    k.shutdown().await;
}

/// A CRD with CEL rules (`x-kubernetes-validations`) is refused, naming the rule list: this
/// server does not evaluate them, so it stores no CRD whose objects would go unchecked.
#[tokio::test]
async fn kubectl_is_refused_a_crd_with_cel_rules() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let group = format!("r{s}.lethe.test");
    let plural = format!("range{s}s");
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: {plural}, kind: Range{s}}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.low <= self.high"
            properties:
              low: {{type: integer}}
              high: {{type: integer}}
"#
    );
    let o = k.run(&["apply", "-f", "-"], Some(&crd)).await;
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations: \
             Forbidden: CEL validation rules are not supported by this server"
        ),
        "{}",
        o.stderr
    );
    let o = k
        .run(&["get", "crd", &format!("{plural}.{group}")], None)
        .await;
    assert_ne!(o.code, 0, "a refused CRD was stored");
    k.shutdown().await;
}

/// A request to a deprecated version of a CRD carries the deprecation warning kubectl prints.
#[tokio::test]
async fn kubectl_warns_about_deprecated_crd_versions() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    let s = suffix();
    let group = format!("d{s}.lethe.test");
    let plural = format!("dial{s}s");
    let kind = format!("Dial{s}");
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: {plural}, kind: {kind}}}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    deprecated: true
    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
  - name: v1
    served: true
    storage: true
    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"#
    );
    k.ok(&["apply", "-f", "-"], Some(&crd)).await;
    k.wait_established(&format!("{plural}.{group}")).await;
    let o = k
        .run(&["get", &format!("{plural}.v1alpha1.{group}"), "-A"], None)
        .await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "Warning: {group}/v1alpha1 {kind} is deprecated; use {group}/v1 {kind}"
        )),
        "{}",
        o.stderr
    );
    k.shutdown().await;
}

/// The admin endpoints read the body a client sends before they answer: a server that answered
/// first and closed the connection would break the pipe of kubectl, still writing its `-f -`.
#[tokio::test]
async fn kubectl_posts_a_body_to_the_admin_endpoints() {
    let Some(k) = Kubectl::new().await else {
        return;
    };
    if k.server.is_none() {
        eprintln!("skipped: only the embedded cluster has the /lethe/ endpoints");
        return;
    }
    let body = serde_json::json!({ "padding": "x".repeat(2 << 20) }).to_string();
    for path in ["/lethe/drop-watches", "/lethe/compact"] {
        for _ in 0..3 {
            let out = k
                .ok(&["create", "--raw", path, "-f", "-"], Some(&body))
                .await;
            assert!(out.contains('{'), "{path}: {out}");
        }
    }
}
