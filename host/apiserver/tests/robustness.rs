//! Bad requests get `Status` errors (never a panic or a dropped connection).

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::raw_request;
use lethe_apiserver::{ApiServerConfig, start};
use serde_json::json;

#[tokio::test]
async fn malformed_requests_get_4xx_status_bodies_and_the_server_survives() {
    let s = start(ApiServerConfig::default()).await.unwrap();
    let t = Some(s.admin_token());
    let url = s.url();
    let cm = "/api/v1/namespaces/default/configmaps";
    let ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target"}})
        .to_string();
    assert_eq!(
        raw_request(url, "POST", cm, t, Some(&ok))
            .await
            .unwrap()
            .status,
        201
    );
    let target = format!("{cm}/target");
    let cases: Vec<(&str, String, Option<String>, u16)> = vec![
        ("POST", cm.to_string(), Some("{not json".into()), 400),
        ("POST", cm.to_string(), Some("[1,2,3]".into()), 400),
        ("POST", cm.to_string(), Some("\"string\"".into()), 400),
        (
            "POST",
            cm.to_string(),
            Some(json!({"kind": "Secret", "metadata": {"name": "x"}}).to_string()),
            400,
        ),
        (
            "POST",
            cm.to_string(),
            Some(json!({"metadata": "nope"}).to_string()),
            400,
        ),
        (
            "POST",
            cm.to_string(),
            Some(json!({"metadata": {"name": "x", "namespace": "other"}}).to_string()),
            400,
        ),
        (
            "POST",
            cm.to_string(),
            Some(json!({"metadata": {"name": "x", "labels": "bad"}}).to_string()),
            400,
        ),
        (
            "PUT",
            target.clone(),
            Some(json!({"metadata": {"name": "other"}}).to_string()),
            400,
        ),
        ("PUT", target.clone(), Some("null".into()), 400),
        (
            "POST",
            cm.to_string(),
            Some(
                json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "x"}})
                    .to_string(),
            ),
            400,
        ),
        (
            "POST",
            "/api/v1/namespaces/default/secrets".into(),
            Some(json!({"metadata": {"name": "s"}, "data": {"k": "not base64!"}}).to_string()),
            400,
        ),
        ("GET", format!("{cm}?limit=abc"), None, 400),
        ("GET", format!("{cm}?limit=1&continue=garbage"), None, 400),
        ("GET", format!("{cm}?labelSelector=a%20in%20b"), None, 400),
        ("GET", format!("{cm}?fieldSelector=nonsense"), None, 400),
        (
            "GET",
            format!("{cm}?watch=true&resourceVersion=abc"),
            None,
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/nothings".into(),
            None,
            404,
        ),
        ("GET", "/apis/nope.example.com/v1/things".into(), None, 404),
        ("GET", format!("{target}/status"), None, 404),
        ("GET", format!("{target}/a/b/c"), None, 404),
        ("POST", target.clone(), Some(ok.clone()), 405),
        ("DELETE", target.clone(), Some("{bad".into()), 400),
        (
            "DELETE",
            target.clone(),
            Some(json!({"propagationPolicy": "Sideways"}).to_string()),
            422,
        ),
        (
            "GET",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".into(),
            None,
            405,
        ),
        (
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".into(),
            Some("{}".into()),
            422,
        ),
        ("GET", "/openapi/v3/api/v2".into(), None, 404),
        ("GET", "/openapi/v3/apis/nope/v1".into(), None, 404),
        ("PUT", "/lethe/faults".into(), Some("{bad".into()), 400),
        ("GET", "/lethe/unknown".into(), None, 404),
    ];
    for (method, path, body, want) in cases {
        let r = raw_request(url, method, &path, t, body.as_deref())
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        assert_eq!(
            r.status,
            want,
            "{method} {path} {body:?}: {}",
            String::from_utf8_lossy(&r.body)
        );
        if want >= 400 {
            let v = r.json();
            assert_eq!(
                (v["kind"].as_str(), v["status"].as_str()),
                (Some("Status"), Some("Failure")),
                "{v}"
            );
            assert_eq!(v["code"].as_u64(), Some(want as u64));
        }
    }
    // Patches that cannot apply.
    let patch = |ct: &'static str, body: &'static str| {
        let url = url.to_string();
        let target = target.clone();
        let token = s.admin_token().to_string();
        async move { patch_request(&url, &target, &token, ct, body).await }
    };
    assert_eq!(
        patch(
            "application/json-patch+json",
            r#"[{"op":"replace","path":"","value":1}]"#
        )
        .await,
        400
    );
    assert_eq!(
        patch(
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/nope"}]"#
        )
        .await,
        422
    );
    // A JSON patch that is not a list of operations cannot be decoded at all.
    assert_eq!(
        patch("application/json-patch+json", r#"{"op":"add"}"#).await,
        400
    );
    assert_eq!(
        patch(
            "application/json-patch+json",
            r#"[{"op":"frobnicate","path":"/a"}]"#
        )
        .await,
        422
    );
    assert_eq!(patch("application/merge-patch+json", r#"[1]"#).await, 400);
    assert_eq!(
        patch(
            "application/merge-patch+json",
            r#"{"metadata":{"name":"renamed"}}"#
        )
        .await,
        400
    );
    assert_eq!(patch("text/plain", r#"{}"#).await, 415);
    assert_eq!(
        patch(
            "application/merge-patch+json",
            r#"{"metadata":{"resourceVersion":"1"}}"#
        )
        .await,
        409
    );
    assert_eq!(
        patch(
            "application/strategic-merge-patch+json",
            r#"{"data":{"$patch":"delete"}}"#
        )
        .await,
        200
    );
    // Protobuf junk.
    let r = raw_proto(url, cm, s.admin_token(), b"k8s\x00\x0a\xff\xff").await;
    assert_eq!(r, 415);
    let r = raw_proto(url, cm, s.admin_token(), b"garbage").await;
    assert_eq!(r, 415);
    // Still serving.
    assert_eq!(
        raw_request(url, "GET", &target, t, None)
            .await
            .unwrap()
            .status,
        200
    );
    s.shutdown().await;
}

async fn patch_request(url: &str, path: &str, token: &str, ct: &str, body: &str) -> u16 {
    raw_with_content_type(url, "PATCH", path, token, ct, body.as_bytes()).await
}

async fn raw_proto(url: &str, path: &str, token: &str, body: &[u8]) -> u16 {
    raw_with_content_type(
        url,
        "POST",
        path,
        token,
        "application/vnd.kubernetes.protobuf",
        body,
    )
    .await
}

async fn raw_with_content_type(
    url: &str,
    method: &str,
    path: &str,
    token: &str,
    ct: &str,
    body: &[u8],
) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut buf = vec![];
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn health_and_version_are_public_but_nothing_else_is() {
    let s = start(ApiServerConfig::default()).await.unwrap();
    for path in ["/healthz", "/readyz", "/livez", "/version"] {
        let r = raw_request(s.url(), "GET", path, None, None).await.unwrap();
        assert_eq!(r.status, 200, "{path}");
    }
    for path in ["/api", "/apis", "/api/v1/namespaces", "/openapi/v3"] {
        let r = raw_request(s.url(), "GET", path, None, None).await.unwrap();
        assert_eq!(r.status, 403, "{path}: anonymous, and refused");
    }
    let r = raw_request(s.url(), "GET", "/healthz", Some("wrong-token"), None)
        .await
        .unwrap();
    assert_eq!(r.status, 401, "a bad token is never anonymous");
    s.shutdown().await;
}

/// Each request gets its own warnings: many requests at once, half through a deprecated CRD
/// version (warned before the body is read, across an `.await`) and half to a plain ConfigMap,
/// and every answer carries exactly the warnings of its own request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_never_lose_or_trade_warnings() {
    let s = start(ApiServerConfig::default()).await.unwrap();
    let token = s.admin_token().to_string();
    let url = s.url().to_string();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "dials.w.lethe.test"},
        "spec": {"group": "w.lethe.test", "scope": "Namespaced",
            "names": {"plural": "dials", "kind": "Dial"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "deprecated": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let created = raw_request(
        &url,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&token),
        Some(&crd.to_string()),
    )
    .await
    .unwrap();
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let dials = "/apis/w.lethe.test/v1alpha1/namespaces/default/dials";
    common::eventually(10, || async {
        raw_request(&url, "GET", dials, Some(&token), None)
            .await
            .ok()
            .filter(|r| r.status == 200)
    })
    .await;

    let requests = (0..48).map(|i| {
        let (url, token) = (url.clone(), token.clone());
        tokio::spawn(async move {
            let deprecated = i % 2 == 0;
            let (path, kind) = if deprecated {
                (dials.to_string(), "Dial")
            } else {
                (
                    "/api/v1/namespaces/default/configmaps".to_string(),
                    "ConfigMap",
                )
            };
            let body = json!({"kind": kind, "metadata": {"name": format!("w{i}")}}).to_string();
            let r = raw_request(&url, "POST", &path, Some(&token), Some(&body))
                .await
                .unwrap();
            let warnings: Vec<String> = r
                .headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case("warning"))
                .map(|(_, v)| v.clone())
                .collect();
            (deprecated, r.status, warnings)
        })
    });
    for request in requests.collect::<Vec<_>>() {
        let (deprecated, status, warnings) = request.await.unwrap();
        assert_eq!(status, 201, "{warnings:?}");
        if deprecated {
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(
                warnings[0].contains("w.lethe.test/v1alpha1 Dial is deprecated"),
                "{warnings:?}"
            );
        } else {
            assert!(warnings.is_empty(), "a ConfigMap got {warnings:?}");
        }
    }
    s.shutdown().await;
}
