//! The smoke twins: `smoke` (Rust) and `smoke-py` (Python, built with componentize-py) served
//! side by side by `lethe up` from `components/smoke-py/spin.toml`, and held to one end-to-end
//! test: the same answers, byte for byte where the envelope is concerned, for SQL, Kubernetes as
//! the caller, configuration and cron.

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Lethe, get, request};

const ALICE: &str = "alice-token-0123456789";

fn twins_manifest() -> std::path::PathBuf {
    support::repo_root().join("components/smoke-py/spin.toml")
}

/// Everything one twin must do, below its route `prefix` (`/smoke` or `/smoke-py`).
fn exercise(lethe: &Lethe, prefix: &str) {
    let url = |path: &str| format!("{}{prefix}{path}", lethe.url);
    let put = |path: &str, body: &str| request("PUT", &url(path), Some(body), &[]);

    // SQL: notes.
    let created = put("/notes/first", "remember me");
    assert_eq!(created.status, 201, "{prefix}: {}", created.body);
    assert_eq!(created.json()["name"], "first");
    let replaced = put("/notes/first", "changed");
    assert_eq!(replaced.status, 200, "{prefix}: {}", replaced.body);
    let read = get(&url("/notes/first"));
    assert_eq!(read.status, 200, "{prefix}");
    assert_eq!(read.json()["body"], "changed", "{prefix}");
    assert_eq!(
        read.header("content-type"),
        Some("application/json"),
        "{prefix}"
    );
    let list = get(&url("/notes"));
    assert_eq!(
        list.json()["resources"],
        serde_json::json!([{ "name": "first", "body": "changed" }]),
        "{prefix}"
    );
    let cases: [(&str, &str, Option<&str>, u16, i64); 7] = [
        ("GET", "/notes/absent", None, 404, 10010),
        ("PUT", "/notes/bad%20name", Some("x"), 422, 10008),
        ("PUT", "/notes/empty", Some(""), 422, 10008),
        ("PUT", "/notes/nul", Some("a\u{0}b"), 422, 10008),
        ("DELETE", "/notes", None, 405, 10000),
        ("GET", "/elsewhere", None, 404, 10010),
        ("GET", "/notes/a/b", None, 404, 10010),
    ];
    for (method, path, body, status, code) in cases {
        let got = request(method, &url(path), body, &[]);
        assert_eq!(
            got.status, status,
            "{prefix}: {method} {path}: {}",
            got.body
        );
        assert_eq!(got.cf_code(), code, "{prefix}: {method} {path}");
    }
    let too_big = request("PUT", &url("/notes/big"), Some(&"a".repeat(1_100_000)), &[]);
    assert_eq!(too_big.status, 413, "{prefix}: {}", too_big.body);

    // Configuration.
    let greeting = get(&url("/greeting"));
    assert_eq!(greeting.json()["greeting"], "hello from lethe", "{prefix}");

    // Kubernetes, as the caller: only what the caller's own token may read.
    let admin = format!("Bearer {}", lethe.admin_token());
    let alice = format!("Bearer {ALICE}");
    let as_who = |who: Option<&str>, name: &str| {
        let headers: Vec<(&str, &str)> = who.map(|w| ("authorization", w)).into_iter().collect();
        request("GET", &url(&format!("/namespaces/{name}")), None, &headers)
    };
    let seen = as_who(Some(&admin), "default");
    assert_eq!(seen.status, 200, "{prefix}: {}", seen.body);
    assert_eq!(
        seen.json(),
        serde_json::json!({ "name": "default", "phase": "Active" }),
        "{prefix}"
    );
    let cases: [(Option<&str>, &str, u16, i64); 7] = [
        (Some(&admin), "no-such-namespace", 404, 10010),
        (Some(&admin), "Not_A_Name", 404, 10010),
        (None, "default", 401, 10002),
        (Some("Bearer"), "default", 401, 1000),
        (Some("Bearer not-a-known-token"), "default", 401, 1000),
        // Alice has no rights: refused alike whether the namespace exists or not.
        (Some(&alice), "default", 403, 10003),
        (Some(&alice), "no-such-namespace", 403, 10003),
    ];
    for (who, name, status, code) in cases {
        let got = as_who(who, name);
        assert_eq!(got.status, status, "{prefix}: {who:?} {name}: {}", got.body);
        assert_eq!(got.cf_code(), code, "{prefix}: {who:?} {name}");
    }

    // Cron: a tick every second is recorded.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut count = 0;
    while Instant::now() < deadline && count < 2 {
        count = get(&url("/ticks")).json()["count"].as_i64().unwrap_or(0);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        count >= 2,
        "{prefix}: two ticks recorded, got {count}\n{}",
        lethe.log()
    );
}

#[test]
fn the_rust_and_python_smoke_twins_pass_the_same_test() {
    const TEST: &str = "the_rust_and_python_smoke_twins_pass_the_same_test";
    if !support::python_components_built(TEST) || support::skip_without_test_users(TEST) {
        return;
    }
    let lethe = Lethe::up_app_at(&twins_manifest(), &[(ALICE, "alice", &[])], &[]);
    exercise(&lethe, "/smoke");
    exercise(&lethe, "/smoke-py");
}

#[test]
fn a_python_component_is_held_to_its_grants() {
    const TEST: &str = "a_python_component_is_held_to_its_grants";
    if !support::python_components_built(TEST) {
        return;
    }
    // The twins' manifest with the Python component's `kube` grant taken away.
    let text = std::fs::read_to_string(twins_manifest()).expect("twins manifest");
    let stanza = "[component.smoke-py.tool.lethe]\ncapabilities = [\"kube\", \"sql\", \"log\", \"config\"]\nkube_identities = [\"caller\"]";
    assert!(
        text.contains(stanza),
        "the twins' manifest grants smoke-py kube"
    );
    let ungranted = text.replace(
        stanza,
        "[component.smoke-py.tool.lethe]\ncapabilities = [\"sql\", \"log\", \"config\"]",
    );
    // Written elsewhere, so its paths, relative to `components/smoke-py/`, are made absolute.
    let root = support::repo_root().display().to_string();
    let ungranted = ungranted
        .replace("\"../../", &format!("\"{root}/"))
        .replace("\"../smoke/", &format!("\"{root}/components/smoke/"))
        .replace(
            "\"migrations\"",
            &format!("\"{root}/components/smoke-py/migrations\""),
        );
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("spin.toml");
    std::fs::write(&manifest, ungranted).expect("write manifest");
    let mut child = Command::new(support::lethe_bin())
        .args([
            "up",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--manifest",
        ])
        .arg(&manifest)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lethe up");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("lethe up kept running with an ungranted import");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().expect("output");
    let log = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(!status.success(), "{log}");
    assert!(log.contains("component `smoke-py`"), "{log}");
    assert!(log.contains("lethe:platform/kube"), "{log}");
}

#[test]
fn the_python_logic_passes_its_unit_tests_under_cpython() {
    let dir = support::repo_root().join("components/smoke-py");
    let run = Command::new("python3")
        .args(["-B", "-m", "unittest", "-v"])
        .env(
            "PYTHONPATH",
            support::repo_root().join("components/guest-py"),
        )
        .current_dir(&dir)
        .output();
    let out = match run {
        Ok(out) => out,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("python3 is needed for the Python component's unit tests: {e}")
        }
        Err(e) => {
            eprintln!("skipping: python3 cannot be run ({e})");
            return;
        }
    };
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("\nOK"), "{log}");
}
