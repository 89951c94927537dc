//! `lethe new` end to end, as a plugin author runs it: generate each template into an empty
//! application directory, run the generated test unchanged, `lethe build`, then `lethe up` and
//! call the new routes.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{Lethe, get, request};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";

/// Runs `program args` in `dir`, panicking with its output when it fails; returns stdout.
fn run(dir: &Path, program: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut command = Command::new(program);
    command.args(args).current_dir(dir);
    for (key, value) in env {
        command.env(key, value);
    }
    // The outer `cargo test`'s settings are for this workspace, not for the generated crate.
    for var in ["CARGO_TARGET_DIR", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"] {
        command.env_remove(var);
    }
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?} in {} failed:\n{stdout}\n{}",
        program.display(),
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn lethe(dir: &Path, args: &[&str]) -> String {
    run(dir, &support::lethe_bin(), args, &[])
}

/// `lethe new <args>` in `app` (a Rust template), its `tests` generated tests run unchanged,
/// then `lethe build`; returns the crate's directory.
fn new_rust_component(app: &Path, args: &[&str], tests: usize) -> std::path::PathBuf {
    let mut new = vec!["new"];
    new.extend_from_slice(args);
    let printed = lethe(app, &new);
    assert!(printed.contains("lethe build"), "{printed}");
    let crate_dir = app.join("components").join(args[1]);
    share_dependencies_build(&crate_dir);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let tested = run(&crate_dir, Path::new(&cargo), &["test"], &[]);
    assert!(
        tested.contains(&format!("{tests} passed; 0 failed")),
        "the generated tests ran:\n{tested}"
    );
    lethe(app, &["build"]);
    crate_dir
}

/// Makes the crate's `target/` a link to one directory that every generated crate of this test
/// run shares, as a user's `CARGO_TARGET_DIR` would: each template's crate is its own workspace
/// with lethe's `Cargo.lock`, so the dependencies (wit-bindgen, serde, lethe-guest) are built once
/// for the host and once for wasm instead of for each crate; cargo's lock on the directory orders
/// builds that run at once. The manifest's `source` still finds the component through the link.
fn share_dependencies_build(crate_dir: &Path) {
    let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffold-target");
    std::fs::create_dir_all(&shared).expect("the shared target dir");
    std::os::unix::fs::symlink(&shared, crate_dir.join("target")).expect("link target/");
}

/// The routes every `http` template serves, whatever its language.
fn exercise_http(lethe: &Lethe, name: &str) {
    let url = |path: &str| format!("{}/{name}{path}", lethe.url);
    let created = request("PUT", &url("/items/first"), Some("hello"), &[]);
    assert_eq!(created.status, 201, "{name}: {}", created.body);
    let replaced = request("PUT", &url("/items/first"), Some("again"), &[]);
    assert_eq!(replaced.status, 200, "{name}: {}", replaced.body);
    assert_eq!(
        get(&url("/items")).json()["resources"],
        serde_json::json!([{ "key": "first", "body": "again" }]),
        "{name}"
    );
    let empty = request("PUT", &url("/items/empty"), Some(""), &[]);
    assert_eq!((empty.status, empty.cf_code()), (422, 10008), "{name}");
    let missing = get(&url("/items/absent"));
    assert_eq!((missing.status, missing.cf_code()), (404, 10010), "{name}");

    let admin = format!("Bearer {}", lethe.admin_token());
    let listed = request(
        "GET",
        &url("/configmaps/default"),
        None,
        &[("authorization", &admin)],
    );
    assert_eq!(listed.status, 200, "{name}: {}", listed.body);
    assert_eq!(listed.json()["namespace"], "default", "{name}");
    assert!(
        listed.json()["configmaps"].is_array(),
        "{name}: {}",
        listed.body
    );
    let alice = format!("Bearer {ALICE}");
    let refused = request(
        "GET",
        &url("/configmaps/default"),
        None,
        &[("authorization", &alice)],
    );
    assert_eq!((refused.status, refused.cf_code()), (403, 10003), "{name}");
    let anonymous = get(&url("/configmaps/default"));
    assert_eq!(
        (anonymous.status, anonymous.cf_code()),
        (401, 10002),
        "{name}"
    );
}

#[test]
fn the_rust_http_template_builds_passes_its_test_and_serves() {
    const TEST: &str = "the_rust_http_template_builds_passes_its_test_and_serves";
    if support::skip_without_test_users(TEST) {
        return;
    }
    let app = tempfile::tempdir().expect("tempdir");
    let crate_dir = new_rust_component(app.path(), &["http", "hello"], 3);
    let lethe = Lethe::up_app_at(
        &app.path().join("spin.toml"),
        &[(ALICE, "alice", &[])],
        &["--watch"],
    );
    exercise_http(&lethe, "hello");

    // `--watch`: an edit is built and served from the next request on...
    let source = crate_dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&source).expect("lib.rs");
    let edited = text.replace("\"Item not found\"", "\"No such item\"");
    assert_ne!(edited, text, "the template says \"Item not found\"");
    std::fs::write(&source, &edited).expect("edit");
    let detail =
        || get(&format!("{}/hello/items/absent", lethe.url)).json()["errors"][0]["detail"].clone();
    let deadline = Instant::now() + Duration::from_secs(120);
    while detail() != "No such item" {
        assert!(
            Instant::now() < deadline,
            "the edit was never served:\n{}",
            lethe.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // ...and a broken edit leaves the last good build serving, with the compiler's error shown.
    std::fs::write(&source, format!("{edited}\nfn broken(")).expect("break");
    assert!(
        lethe.wait_for_log(
            "still serving the previous build of `hello`",
            Duration::from_secs(120)
        ),
        "{}",
        lethe.log()
    );
    assert!(
        lethe.log().contains("unclosed delimiter"),
        "{}",
        lethe.log()
    );
    assert_eq!(detail(), "No such item");
}

#[test]
fn the_python_http_template_builds_passes_its_test_and_serves() {
    const TEST: &str = "the_python_http_template_builds_passes_its_test_and_serves";
    if !support::python_components_built(TEST) || support::skip_without_test_users(TEST) {
        return;
    }
    let app = tempfile::tempdir().expect("tempdir");
    lethe(app.path(), &["new", "http", "hello-py", "--lang", "python"]);
    let package = app.path().join("components/hello-py");
    let sdk = support::repo_root().join("components/guest-py");
    let tested = Command::new("python3")
        .args(["-B", "-m", "unittest"])
        .env("PYTHONPATH", &sdk)
        .current_dir(&package)
        .output()
        .expect("python3");
    let log = String::from_utf8_lossy(&tested.stderr);
    assert!(
        tested.status.success() && log.contains("Ran 3 tests"),
        "{log}"
    );
    lethe(app.path(), &["build"]);
    let lethe = Lethe::up_app_at(&app.path().join("spin.toml"), &[(ALICE, "alice", &[])], &[]);
    exercise_http(&lethe, "hello-py");
}

#[test]
fn the_job_status_template_follows_a_real_deletion_as_the_caller_sees_it() {
    const TEST: &str = "the_job_status_template_follows_a_real_deletion_as_the_caller_sees_it";
    if support::skip_without_test_users(TEST) {
        return;
    }
    let app = tempfile::tempdir().expect("tempdir");
    new_rust_component(
        app.path(),
        &["job-status", "cm-jobs", "--kind", "v1/ConfigMap"],
        3,
    );
    let lethe = Lethe::up_app_at(
        &app.path().join("spin.toml"),
        &[(ALICE, "alice", &[]), (BOB, "bob", &[])],
        &[],
    );

    // Alice may read ConfigMaps in her namespace; bob may not. One ConfigMap waits for a
    // finalizer when deleted.
    let ns = format!("jobs-{}", std::process::id());
    lethe.kubectl_ok(&["create", "namespace", &ns]);
    lethe.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "role",
        "read",
        "--verb=get",
        "--resource=configmaps",
    ]);
    lethe.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "rolebinding",
        "alice-reads",
        "--role=read",
        "--user=alice",
    ]);
    let held = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "settings", "namespace": ns, "finalizers": ["example.com/hold"] },
    });
    let manifest = app.path().join("held.json");
    std::fs::write(&manifest, held.to_string()).expect("write");
    lethe.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);

    let poll = |token: &str| {
        let url = format!("{}/cm-jobs/jobs/configmap.delete~{ns}~settings", lethe.url);
        request(
            "GET",
            &url,
            None,
            &[("authorization", &format!("Bearer {token}"))],
        )
    };
    assert_eq!(poll(ALICE).status, 404, "not being deleted: no job");
    lethe.kubectl_ok(&["-n", &ns, "delete", "configmap", "settings", "--wait=false"]);
    let processing = poll(ALICE);
    assert_eq!(processing.status, 200, "{}", processing.body);
    assert_eq!(processing.json()["state"], "PROCESSING");
    assert_eq!(
        (poll(BOB).status, poll(BOB).cf_code()),
        (404, 10010),
        "bob learns nothing"
    );
    lethe.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "settings",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = poll(ALICE).json()["state"].clone();
        if state == "COMPLETE" {
            break;
        }
        assert!(Instant::now() < deadline, "never COMPLETE, last {state}");
        std::thread::sleep(Duration::from_millis(200));
    }
    lethe.kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

#[test]
fn the_reconciler_template_makes_and_deletes_real_objects_as_its_own_service_account() {
    const TEST: &str =
        "the_reconciler_template_makes_and_deletes_real_objects_as_its_own_service_account";
    if support::skip_without_test_users(TEST) {
        return;
    }
    // The application is a Cargo workspace that also holds a job-status component, as a team's
    // would: building the whole workspace enables both of the SDK's handler worlds in one build
    // of it (Cargo unifies features), and each component must still export exactly its world.
    let app = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        app.path().join("Cargo.toml"),
        "[workspace]\nresolver = \"2\"\nmembers = []\n",
    )
    .expect("workspace");
    std::fs::copy(
        support::repo_root().join("Cargo.lock"),
        app.path().join("Cargo.lock"),
    )
    .expect("lock");
    lethe(
        app.path(),
        &["new", "job-status", "cm-jobs", "--kind", "v1/ConfigMap"],
    );
    lethe(
        app.path(),
        &["new", "reconciler", "cm-keeper", "--kind", "v1/ConfigMap"],
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let tested = run(app.path(), Path::new(&cargo), &["test"], &[]);
    for passed in ["3 passed; 0 failed", "4 passed; 0 failed"] {
        assert!(
            tested.contains(passed),
            "the generated tests ran:\n{tested}"
        );
    }
    run(
        app.path(),
        Path::new(&cargo),
        &["build", "--release", "--target", "wasm32-wasip2"],
        &[],
    );

    // Each component's configuration check is exported and called at start.
    let manifest = std::fs::read_to_string(app.path().join("spin.toml")).expect("manifest");
    for (component, edit) in [
        (
            "cm-jobs",
            (
                "deletion_timeout_seconds = \"120\"",
                "deletion_timeout_seconds = \"0\"",
            ),
        ),
        (
            "cm-keeper",
            (
                "full_resync_seconds = \"600\"",
                "full_resync_seconds = \"0\"",
            ),
        ),
    ] {
        assert!(manifest.contains(edit.0), "{manifest}");
        let broken = app.path().join(format!("broken-{component}.toml"));
        std::fs::write(&broken, manifest.replacen(edit.0, edit.1, 1)).expect("write");
        let refused = match Lethe::try_up_app_at(&broken) {
            Ok(_) => panic!("lethe served with {component}'s configuration broken"),
            Err(failure) => failure.log,
        };
        assert!(
            refused.contains(&format!("component `{component}`")),
            "{refused}"
        );
    }

    let lethe = Lethe::up_app_at(
        &app.path().join("spin.toml"),
        &[(ALICE, "alice", &[]), (BOB, "bob", &[])],
        &[],
    );
    // The pass runs as the reconciler's own ServiceAccount, which the generated
    // kubernetes/rbac.json binds, on any cluster; on the embedded one the host itself is lethe's
    // account, not an admin (elsewhere whoever LETHE_TEST_HOST_KUBECONFIG names: README, "Testing").
    let log = lethe.log();
    assert!(
        log.contains(
            "component `cm-keeper` acts as system:serviceaccount:lethe-system:lethe-cm-keeper"
        ),
        "{log}"
    );
    assert!(
        support::external_kubeconfig().is_some()
            || log.contains("host identity: system:serviceaccount:lethe-system:lethe"),
        "{log}"
    );

    // Alice may manage ConfigMaps in her namespace; bob may not.
    let ns = format!("keep-{}", std::process::id());
    lethe.kubectl_ok(&["create", "namespace", &ns]);
    lethe.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "role",
        "configmaps",
        "--verb=get,list,create,update,delete",
        "--resource=configmaps",
    ]);
    lethe.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "rolebinding",
        "alice-configmaps",
        "--role=configmaps",
        "--user=alice",
    ]);
    let url = |path: &str| format!("{}/cm-keeper{path}", lethe.url);
    let as_user = |method: &str, path: &str, body: Option<&str>, token: &str| {
        request(
            method,
            &url(path),
            body,
            &[("authorization", &format!("Bearer {token}"))],
        )
    };
    let object = format!("/objects/{ns}/settings");
    let job_of_settings = format!("{}/cm-jobs/jobs/configmap.delete~{ns}~settings", lethe.url);
    let refused = as_user("PUT", &object, Some(r#"{"data":{"greeting":"hi"}}"#), BOB);
    assert_eq!(
        (refused.status, refused.cf_code()),
        (403, 10003),
        "{}",
        refused.body
    );
    let put = as_user(
        "PUT",
        &object,
        Some(r#"{"data":{"greeting":"hello"}}"#),
        ALICE,
    );
    assert_eq!(put.status, 201, "{}", put.body);

    // The API's write wakes the pass, which makes the ConfigMap with lethe's marks.
    let deadline = Instant::now() + Duration::from_secs(60);
    let made = loop {
        let (found, out, _) =
            lethe.kubectl(&["-n", &ns, "get", "configmap", "settings", "-o", "json"]);
        if found {
            break serde_json::from_str::<serde_json::Value>(&out).expect("json");
        }
        assert!(Instant::now() < deadline, "never made:\n{}", lethe.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(made["data"]["greeting"], "hello");
    assert_eq!(
        made["metadata"]["labels"]["lethe.dev/reconciler"],
        "cm-keeper"
    );
    assert_eq!(
        made["metadata"]["finalizers"],
        serde_json::json!(["lethe.dev/cm-keeper"])
    );

    // The job-status component serves from the same workspace: no job for an object that is
    // not being deleted.
    let no_job = request(
        "GET",
        &job_of_settings,
        None,
        &[("authorization", &format!("Bearer {ALICE}"))],
    );
    assert_eq!(
        (no_job.status, no_job.cf_code()),
        (404, 10010),
        "{}",
        no_job.body
    );

    // Drift on the live object is put back.
    lethe.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "settings",
        "--type=merge",
        "-p",
        r#"{"data":{"greeting":"edited"}}"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let greeting = lethe.kubectl_ok(&[
            "-n",
            &ns,
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.greeting}",
        ]);
        if greeting == "hello" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "drift never put back:\n{}",
            lethe.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // A DELETE answers with a job, which reaches COMPLETE once the ConfigMap is gone; bob,
    // who may not read it, learns nothing.
    let deleted = as_user("DELETE", &object, None, ALICE);
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let location = deleted.header("location").expect("Location").to_string();
    assert!(location.starts_with("http"), "absolute: {location}");
    let poll = |token: &str| {
        request(
            "GET",
            &location,
            None,
            &[("authorization", &format!("Bearer {token}"))],
        )
    };
    let first = poll(ALICE);
    assert_eq!(
        first.status, 200,
        "the first poll never 404s: {}",
        first.body
    );
    assert_eq!((poll(BOB).status, poll(BOB).cf_code()), (404, 10010));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = poll(ALICE).json()["state"].clone();
        if state == "COMPLETE" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never COMPLETE, last {state}:\n{}",
            lethe.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (still_there, _, _) = lethe.kubectl(&["-n", &ns, "get", "configmap", "settings"]);
    assert!(!still_there, "COMPLETE only once the ConfigMap is gone");
    lethe.kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}
