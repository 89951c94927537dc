//! Fault injection: latency, error rates (500, 503, 429 with Retry-After), dropped connections,
//! stale reads, and the admin-only `/lethe/faults` endpoint.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{TestCluster, raw_request};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use lethe_apiserver::{ApiServerConfig, FaultConfig, RunningApiServer, start};
use serde_json::json;
use std::time::{Duration, Instant};

async fn server(faults: FaultConfig) -> RunningApiServer {
    start(ApiServerConfig {
        faults,
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn get_ns(s: &RunningApiServer) -> Result<common::RawResponse, String> {
    raw_request(
        s.url(),
        "GET",
        "/api/v1/namespaces/default",
        Some(s.admin_token()),
        None,
    )
    .await
}

#[tokio::test]
async fn latency_delays_every_response() {
    let s = server(FaultConfig {
        latency_ms: 300,
        ..Default::default()
    })
    .await;
    let t = Instant::now();
    assert_eq!(get_ns(&s).await.unwrap().status, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    s.set_faults(FaultConfig::default());
    let t = Instant::now();
    get_ns(&s).await.unwrap();
    assert!(t.elapsed() < Duration::from_millis(300));
    s.shutdown().await;
}

#[tokio::test]
async fn error_rate_answers_500_internal_error() {
    let s = server(FaultConfig {
        error_rate: 1.0,
        error_status: 500,
        ..Default::default()
    })
    .await;
    let r = get_ns(&s).await.unwrap();
    assert_eq!(r.status, 500);
    let body = r.json();
    assert_eq!(
        (
            body["kind"].as_str(),
            body["reason"].as_str(),
            body["code"].as_u64()
        ),
        (Some("Status"), Some("InternalError"), Some(500))
    );
    s.shutdown().await;
}

#[tokio::test]
async fn error_rate_answers_503_service_unavailable() {
    let s = server(FaultConfig {
        error_rate: 1.0,
        error_status: 503,
        ..Default::default()
    })
    .await;
    let r = get_ns(&s).await.unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["reason"], "ServiceUnavailable");
    s.shutdown().await;
}

#[tokio::test]
async fn error_rate_answers_429_with_retry_after() {
    let s = server(FaultConfig {
        error_rate: 1.0,
        error_status: 429,
        retry_after_seconds: 7,
        ..Default::default()
    })
    .await;
    let r = get_ns(&s).await.unwrap();
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("7"));
    let body = r.json();
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["details"]["retryAfterSeconds"], 7);
    s.shutdown().await;
}

#[tokio::test]
async fn a_partial_error_rate_fails_some_requests_only() {
    let s = server(FaultConfig {
        error_rate: 0.5,
        error_status: 503,
        ..Default::default()
    })
    .await;
    let mut codes = vec![];
    for _ in 0..60 {
        codes.push(get_ns(&s).await.unwrap().status);
    }
    assert!(codes.contains(&200) && codes.contains(&503), "{codes:?}");
    s.shutdown().await;
}

#[tokio::test]
async fn error_and_throttle_rates_add_up_to_a_mixed_storm() {
    let s = server(FaultConfig {
        error_rate: 0.3,
        error_status: 503,
        throttle_rate: 0.3,
        ..Default::default()
    })
    .await;
    let mut codes = vec![];
    for _ in 0..100 {
        codes.push(get_ns(&s).await.unwrap().status);
    }
    for code in [200, 429, 503] {
        assert!(codes.contains(&code), "no {code} in {codes:?}");
    }
    let ok = codes.iter().filter(|c| **c == 200).count();
    // 40 % expected; far outside that means the rates do not add up.
    assert!((15..=65).contains(&ok), "{ok} of 100 succeeded: {codes:?}");
    s.shutdown().await;
}

#[tokio::test]
async fn drop_rate_closes_connections_without_a_response() {
    let s = server(FaultConfig {
        drop_rate: 1.0,
        ..Default::default()
    })
    .await;
    let e = get_ns(&s).await.unwrap_err();
    assert!(e.contains("closed") || e.contains("reset"), "{e}");
    // The kube client sees a transport error, not an API status.
    let c = common::config_from_yaml(&s.kubeconfig_yaml()).await;
    let mut c = c;
    c.default_retry = false;
    let client = kube::Client::try_from(c).unwrap();
    let err = Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
    s.shutdown().await;
}

#[tokio::test]
async fn stale_reads_hide_a_fresh_deletion_timestamp_for_a_while() {
    let c = TestCluster::embedded(ApiServerConfig::default()).await;
    let s = c.server.as_ref().unwrap();
    s.set_faults(FaultConfig {
        stale_read_ms: 1500,
        ..Default::default()
    });
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "racy", "finalizers": ["a.test/hold"]}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let deleting = api
        .delete("racy", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(
        deleting.metadata.deletion_timestamp.is_some(),
        "the DELETE response itself is fresh"
    );
    let first = api.get("racy").await.unwrap();
    assert!(
        first.metadata.deletion_timestamp.is_none(),
        "the first read is stale"
    );
    let listed = api
        .list(&ListParams::default().fields("metadata.name=racy"))
        .await
        .unwrap();
    assert!(
        listed.items[0].metadata.deletion_timestamp.is_none(),
        "lists are stale too"
    );
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let later = api.get("racy").await.unwrap();
    assert!(
        later.metadata.deletion_timestamp.is_some(),
        "fresh again after the window"
    );
    s.set_faults(FaultConfig::default());
    let fresh: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "fresh"}})).unwrap();
    api.create(&PostParams::default(), &fresh).await.unwrap();
    assert!(api.get("fresh").await.is_ok(), "no staleness once disabled");
    c.shutdown().await;
}

#[tokio::test]
async fn stale_reads_hide_a_fresh_create() {
    let s = server(FaultConfig {
        stale_read_ms: 60_000,
        ..Default::default()
    })
    .await;
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}}).to_string();
    let r = raw_request(
        s.url(),
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(s.admin_token()),
        Some(&body),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201);
    let r = raw_request(
        s.url(),
        "GET",
        "/api/v1/namespaces/default/configmaps/new",
        Some(s.admin_token()),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 404, "the object is not visible yet");
    s.shutdown().await;
}

#[tokio::test]
async fn the_faults_endpoint_is_admin_only_and_never_faulted() {
    let s = server(FaultConfig {
        error_rate: 1.0,
        error_status: 503,
        ..Default::default()
    })
    .await;
    s.add_token("user-token", "someone", "u1", &["devs"]);
    let r = raw_request(s.url(), "GET", "/lethe/faults", None, None)
        .await
        .unwrap();
    assert_eq!(r.status, 401);
    let r = raw_request(s.url(), "GET", "/lethe/faults", Some("user-token"), None)
        .await
        .unwrap();
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["reason"], "Forbidden");
    let r = raw_request(s.url(), "GET", "/lethe/faults", Some(s.admin_token()), None)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "faults never apply to the faults endpoint");
    assert_eq!(r.json()["error_rate"], 1.0);
    let body = json!({"latency_ms": 0, "error_rate": 0.0}).to_string();
    let r = raw_request(
        s.url(),
        "PUT",
        "/lethe/faults",
        Some("user-token"),
        Some(&body),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 403);
    let r = raw_request(
        s.url(),
        "PUT",
        "/lethe/faults",
        Some(s.admin_token()),
        Some(&body),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        get_ns(&s).await.unwrap().status,
        200,
        "faults are off again"
    );
    let bad = json!({"error_rate": 2.0}).to_string();
    let r = raw_request(
        s.url(),
        "PUT",
        "/lethe/faults",
        Some(s.admin_token()),
        Some(&bad),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400);
    s.shutdown().await;
}
