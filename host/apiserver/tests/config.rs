//! Configuration and lifecycle of the embedded server.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use lethe_apiserver::{ApiServerConfig, FaultConfig, start};

#[test]
fn defaults_are_in_memory_loopback_plain_http_without_faults() {
    let c = ApiServerConfig::default();
    assert_eq!(c.data_dir, None);
    assert_eq!(c.listen.to_string(), "127.0.0.1:0");
    assert!(!c.tls);
    assert_eq!(c.faults, FaultConfig::default());
    let f = FaultConfig::default();
    assert_eq!(
        (f.latency_ms, f.error_rate, f.drop_rate, f.stale_read_ms),
        (0, 0.0, 0.0, 0)
    );
}

#[test]
fn fault_config_deserializes_partial_json() {
    let f: FaultConfig =
        serde_json::from_str(r#"{"error_rate": 0.5, "error_status": 429}"#).unwrap();
    assert_eq!(f.error_rate, 0.5);
    assert_eq!(f.error_status, 429);
    assert_eq!(f.latency_ms, 0);
}

#[tokio::test]
async fn an_in_memory_server_writes_a_temporary_kubeconfig_and_removes_it() {
    let s = start(ApiServerConfig::default()).await.unwrap();
    let path = s.kubeconfig_path().unwrap().to_path_buf();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, s.kubeconfig_yaml());
    assert!(text.contains(s.url()) && text.contains(s.admin_token()));
    s.shutdown().await;
    assert!(!path.exists());
}

#[tokio::test]
async fn listening_on_all_interfaces_advertises_loopback() {
    let s = start(ApiServerConfig {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(s.url().starts_with("http://127.0.0.1:"), "{}", s.url());
    s.shutdown().await;
}

#[tokio::test]
async fn the_data_dir_holds_the_database_tokens_and_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(ApiServerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        tls: true,
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(s.url().starts_with("https://"));
    for f in ["cluster.db", "tokens.csv", "kubeconfig", "ca.crt"] {
        assert!(dir.path().join(f).exists(), "{f} missing");
    }
    let tokens = std::fs::read_to_string(dir.path().join("tokens.csv")).unwrap();
    assert_eq!(
        tokens.trim(),
        format!("{},admin,admin,\"system:masters\"", s.admin_token())
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("kubeconfig"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the kubeconfig holds the admin token");
    }
    s.shutdown().await;
}

#[tokio::test]
async fn the_server_handle_is_send_and_sync_and_start_can_be_spawned() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    let s = tokio::spawn(start(ApiServerConfig::default()))
        .await
        .unwrap()
        .unwrap();
    assert_send_sync(&s);
    let shared = std::sync::Arc::new(s);
    let url = tokio::spawn({
        let shared = shared.clone();
        async move { shared.url().to_string() }
    })
    .await
    .unwrap();
    assert!(url.starts_with("http://"));
    if let Ok(s) = std::sync::Arc::try_unwrap(shared) {
        s.shutdown().await;
    }
}
