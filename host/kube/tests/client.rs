//! The Kubernetes capability against a scripted fake API server.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{FakeApi, HOST_TOKEN, Reply, fast, status_body, widget};
use lethe_kube::{
    ClusterOptions, DeleteOptions, DeleteOutcome, Identity, KubeError, ListOptions, ObjectRef,
    PatchKind, PropagationPolicy, RetryPolicy,
};

const W1: &str = "/apis/example.com/v1/namespaces/ns/widgets/w1";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/ns/widgets";

fn w1() -> ObjectRef {
    ObjectRef::namespaced("example.com/v1", "Widget", "ns", "w1")
}

#[tokio::test]
async fn get_returns_served_json_and_parsed_metadata_and_caches_discovery() {
    let fake = FakeApi::start().await;
    let served = widget("ns", "w1", serde_json::json!({"finalizers": ["a/b", "c"]}));
    fake.script("GET", W1, vec![Reply::Json(200, served.clone())]);
    let client = fake.cluster(fast(3)).privileged();
    let obj = client.get(&w1()).await.unwrap();
    assert_eq!(obj.json, served);
    assert_eq!(obj.target, w1());
    let m = &obj.metadata;
    assert_eq!(m.uid, "uid-w1");
    assert_eq!(m.resource_version, "42");
    assert_eq!(m.generation, Some(3));
    assert_eq!(
        m.creation_timestamp.as_deref(),
        Some("2024-01-02T03:04:05Z")
    );
    assert_eq!(m.deletion_timestamp, None);
    assert_eq!(m.finalizers, ["a/b", "c"]);
    assert_eq!(
        m.labels,
        [
            ("app".to_owned(), "web".to_owned()),
            ("tier".to_owned(), "front".to_owned())
        ]
    );
    assert_eq!(m.annotations, [("note".to_owned(), "x".to_owned())]);
    client.get(&w1()).await.unwrap();
    assert_eq!(
        fake.count("GET", "/apis/example.com/v1"),
        1,
        "discovery is cached"
    );
    assert_eq!(fake.count("GET", W1), 2);
}

#[tokio::test]
async fn too_many_requests_honours_retry_after() {
    let fake = FakeApi::start().await;
    fake.script(
        "GET",
        W1,
        vec![Reply::Json(200, widget("ns", "w1", serde_json::json!({})))],
    );
    let client = fake.cluster(fast(3)).privileged();
    client.get(&w1()).await.unwrap(); // warm discovery
    fake.script(
        "GET",
        W1,
        vec![
            Reply::WithHeader(
                429,
                "retry-after",
                "1".into(),
                status_body(429, "TooManyRequests", "slow down"),
            ),
            Reply::Json(200, widget("ns", "w1", serde_json::json!({}))),
        ],
    );
    let started = Instant::now();
    client.get(&w1()).await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(950),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "waited {waited:?}");
    assert_eq!(fake.count("GET", W1), 3);
}

#[tokio::test]
async fn retry_after_is_capped_by_max_delay() {
    let fake = FakeApi::start().await;
    fake.script(
        "GET",
        W1,
        vec![
            Reply::WithHeader(
                429,
                "retry-after",
                "3600".into(),
                status_body(429, "TooManyRequests", ""),
            ),
            Reply::Json(200, widget("ns", "w1", serde_json::json!({}))),
        ],
    );
    let policy = RetryPolicy {
        max_delay: Duration::from_millis(50),
        ..fast(3)
    };
    let started = Instant::now();
    fake.cluster(policy).privileged().get(&w1()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn service_unavailable_twice_then_ok() {
    let fake = FakeApi::start().await;
    let unavailable = Reply::Json(503, status_body(503, "ServiceUnavailable", "etcd is busy"));
    fake.script(
        "GET",
        W1,
        vec![
            unavailable.clone(),
            unavailable,
            Reply::Json(200, widget("ns", "w1", serde_json::json!({}))),
        ],
    );
    let cluster = fake.cluster(fast(5));
    let obj = cluster.privileged().get(&w1()).await.unwrap();
    assert_eq!(obj.metadata.uid, "uid-w1");
    assert_eq!(fake.count("GET", W1), 3);
    assert_eq!(cluster.stats().retries, 2);
}

#[tokio::test]
async fn persistent_server_errors_give_unavailable_after_all_attempts() {
    let fake = FakeApi::start().await;
    fake.script(
        "GET",
        W1,
        vec![Reply::Json(500, status_body(500, "InternalError", "boom"))],
    );
    let err = fake
        .cluster(fast(4))
        .privileged()
        .get(&w1())
        .await
        .unwrap_err();
    match &err {
        KubeError::Unavailable(m) => assert!(m.contains("boom") && m.contains("4 attempts"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.count("GET", W1), 4);
}

#[tokio::test]
async fn create_failing_with_500_is_not_retried() {
    let fake = FakeApi::start().await;
    fake.script(
        "POST",
        WIDGETS,
        vec![Reply::Json(500, status_body(500, "InternalError", "boom"))],
    );
    let cluster = fake.cluster(fast(5));
    let err = cluster
        .privileged()
        .create(&widget("ns", "w1", serde_json::json!({})))
        .await
        .unwrap_err();
    match &err {
        KubeError::Unavailable(m) => assert!(m.contains("outcome unknown"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.count("POST", WIDGETS), 1, "exactly one create request");
    assert_eq!(cluster.stats().retries, 0);
}

#[tokio::test]
async fn create_is_retried_on_429_and_returns_the_created_object() {
    let fake = FakeApi::start().await;
    let created = widget("ns", "w1", serde_json::json!({}));
    fake.script(
        "POST",
        WIDGETS,
        vec![
            Reply::WithHeader(
                429,
                "retry-after",
                "0".into(),
                status_body(429, "TooManyRequests", ""),
            ),
            Reply::Json(201, created.clone()),
        ],
    );
    let body = r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"ns"}}"#;
    let cluster = fake.cluster(fast(3));
    let obj = cluster.privileged().create(body).await.unwrap();
    assert_eq!(obj.json, created);
    assert_eq!(cluster.stats().throttled, 1, "the 429 is counted");
    assert_eq!(cluster.stats().retries, 1);
    let posts = fake.requests_to("POST", WIDGETS);
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[1].body, body, "the body is sent as given");
}

#[tokio::test]
async fn create_whose_connection_drops_is_not_retried() {
    let fake = FakeApi::start().await;
    fake.script("POST", WIDGETS, vec![Reply::Drop]);
    let err = fake
        .cluster(fast(5))
        .privileged()
        .create(&widget("ns", "w1", serde_json::json!({})))
        .await
        .unwrap_err();
    match &err {
        KubeError::Unavailable(m) => assert!(m.contains("outcome unknown"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.count("POST", WIDGETS), 1);
}

#[tokio::test]
async fn create_is_retried_while_the_server_refuses_connections() {
    let fake = FakeApi::start().await;
    let addr = fake.addr;
    let policy = RetryPolicy {
        max_attempts: 20,
        max_throttled: 20,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
    };
    let client = fake.cluster(policy).privileged();
    client
        .list(
            "example.com/v1",
            "Widget",
            Some("ns"),
            &ListOptions::default(),
        )
        .await
        .ok(); // warm discovery
    fake.shutdown().await;
    // The server comes back shortly; meanwhile every connection is refused.
    let created = widget("ns", "w1", serde_json::json!({}));
    let body = created.clone();
    let restarted = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let fake = FakeApi::start_on(addr).await;
        fake.script("POST", WIDGETS, vec![Reply::Json(201, body)]);
        fake
    });
    let obj = client.create(&created).await.unwrap();
    assert_eq!(obj.metadata.uid, "uid-w1");
    let fake = restarted.await.unwrap();
    assert_eq!(
        fake.count("POST", WIDGETS),
        1,
        "exactly one create reached the server"
    );
}

#[tokio::test]
async fn refused_connections_are_retried_then_unavailable() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    config.auth_info.token = Some(HOST_TOKEN.to_owned().into());
    let cluster = lethe_kube::Cluster::from_config_with(
        config,
        lethe_kube::ClusterOptions {
            retry: fast(3),
            ..Default::default()
        },
    )
    .unwrap();
    // Discovery is a read; it is retried and then reports the server unreachable.
    let err = cluster.privileged().get(&w1()).await.unwrap_err();
    match &err {
        KubeError::Unavailable(m) => {
            assert!(
                m.contains("cannot reach") && m.contains("3 attempts"),
                "{m}"
            );
            assert!(!m.contains(HOST_TOKEN));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn guarded_delete_is_retried_after_a_dropped_connection() {
    let fake = FakeApi::start().await;
    fake.script(
        "DELETE",
        W1,
        vec![Reply::Drop, Reply::Json(200, status_body(200, "", ""))],
    );
    let options = DeleteOptions {
        propagation_policy: Some(PropagationPolicy::Foreground),
        precondition_uid: Some("uid-w1".into()),
        precondition_resource_version: None,
    };
    let out = fake
        .cluster(fast(5))
        .privileged()
        .delete(&w1(), &options)
        .await
        .unwrap();
    assert_eq!(out, DeleteOutcome::Deleted);
    let deletes = fake.requests_to("DELETE", W1);
    assert_eq!(deletes.len(), 2);
    let body: serde_json::Value = serde_json::from_str(&deletes[1].body).unwrap();
    assert_eq!(body["propagationPolicy"], "Foreground");
    assert_eq!(body["preconditions"]["uid"], "uid-w1");
}

#[tokio::test]
async fn delete_with_pending_finalizers_returns_the_object() {
    let fake = FakeApi::start().await;
    let pending = widget(
        "ns",
        "w1",
        serde_json::json!({"deletionTimestamp": "2024-05-06T07:08:09Z", "finalizers": ["lethe.dev/cleanup"]}),
    );
    fake.script("DELETE", W1, vec![Reply::Json(200, pending.clone())]);
    match fake
        .cluster(fast(2))
        .privileged()
        .delete(&w1(), &DeleteOptions::default())
        .await
        .unwrap()
    {
        DeleteOutcome::Pending(obj) => {
            assert_eq!(obj.json, pending);
            assert_eq!(
                obj.metadata.deletion_timestamp.as_deref(),
                Some("2024-05-06T07:08:09Z")
            );
            assert_eq!(obj.metadata.finalizers, ["lethe.dev/cleanup"]);
        }
        other => panic!("{other:?}"),
    }
    let body: serde_json::Value =
        serde_json::from_str(&fake.requests_to("DELETE", W1)[0].body).unwrap();
    assert!(body.get("preconditions").is_none());
}

#[tokio::test]
async fn error_statuses_map_to_typed_errors() {
    let fake = FakeApi::start().await;
    let client = fake.cluster(fast(2)).privileged();
    type Check = fn(&KubeError) -> bool;
    let cases: Vec<(u16, &str, Check)> = vec![
        (404, "NotFound", |e| matches!(e, KubeError::NotFound(_))),
        (409, "Conflict", |e| matches!(e, KubeError::Conflict(_))),
        (403, "Forbidden", |e| matches!(e, KubeError::Forbidden(_))),
        (401, "Unauthorized", |e| {
            matches!(e, KubeError::Unauthorized(_))
        }),
        (422, "Invalid", |e| matches!(e, KubeError::Invalid(_))),
        (400, "BadRequest", |e| matches!(e, KubeError::Invalid(_))),
        (410, "Expired", |e| matches!(e, KubeError::Gone(_))),
        (504, "Timeout", |e| matches!(e, KubeError::Timeout(_))),
    ];
    for (code, reason, check) in cases {
        let message = format!("message for {code}");
        fake.script(
            "GET",
            W1,
            vec![Reply::Json(code, status_body(code, reason, &message))],
        );
        let err = client.get(&w1()).await.unwrap_err();
        assert!(check(&err), "{code}: {err:?}");
        if let Some(status) = err.status() {
            assert_eq!(status.code, code);
            assert_eq!(status.reason, reason);
            assert_eq!(status.message, message);
        }
    }
    // AlreadyExists on create is a Conflict, not retried.
    fake.script(
        "POST",
        WIDGETS,
        vec![Reply::Json(
            409,
            status_body(409, "AlreadyExists", "widgets \"w1\" already exists"),
        )],
    );
    let err = client
        .create(&widget("ns", "w1", serde_json::json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, KubeError::Conflict(s) if s.reason == "AlreadyExists"),
        "{err:?}"
    );
    assert_eq!(fake.count("POST", WIDGETS), 1);
    // A non-Status error body still gives a status.
    fake.script("GET", W1, vec![Reply::Json(403, "<html>no</html>".into())]);
    match client.get(&w1()).await.unwrap_err() {
        KubeError::Forbidden(s) => {
            assert_eq!(s.reason, "Forbidden");
            assert_eq!(s.message, "<html>no</html>");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn caller_token_is_passed_through_and_privileged_uses_the_host_token() {
    let fake = FakeApi::start().await;
    fake.script(
        "GET",
        W1,
        vec![Reply::Json(200, widget("ns", "w1", serde_json::json!({})))],
    );
    let cluster = fake.cluster(fast(2));
    let caller_token = "caller-secret-token-xyz";
    let caller = cluster
        .client(&Identity::Caller(caller_token.into()))
        .unwrap();
    caller.get(&w1()).await.unwrap();
    cluster
        .client(&Identity::Privileged)
        .unwrap()
        .get(&w1())
        .await
        .unwrap();
    // A second client for the same token (cached) sends the same header.
    cluster
        .client(&Identity::Caller(caller_token.into()))
        .unwrap()
        .get(&w1())
        .await
        .unwrap();
    let gets = fake.requests_to("GET", W1);
    assert_eq!(
        gets[0].authorization.as_deref(),
        Some("Bearer caller-secret-token-xyz")
    );
    assert_eq!(
        gets[1].authorization.as_deref(),
        Some(format!("Bearer {HOST_TOKEN}").as_str())
    );
    assert_eq!(
        gets[2].authorization.as_deref(),
        Some("Bearer caller-secret-token-xyz")
    );
    // Discovery always runs as the host.
    for d in fake.requests_to("GET", "/apis/example.com/v1") {
        assert_eq!(
            d.authorization.as_deref(),
            Some(format!("Bearer {HOST_TOKEN}").as_str())
        );
    }
    // Tokens never show in Debug output.
    let identity = Identity::Caller(caller_token.into());
    for text in [
        format!("{identity:?}"),
        format!("{caller:?}"),
        format!("{cluster:?}"),
    ] {
        assert!(!text.contains(caller_token), "{text}");
        assert!(!text.contains(HOST_TOKEN), "{text}");
    }
    // Nor in errors.
    fake.script(
        "GET",
        W1,
        vec![Reply::Json(
            401,
            status_body(401, "Unauthorized", "Unauthorized"),
        )],
    );
    let err = caller.get(&w1()).await.unwrap_err();
    assert!(matches!(err, KubeError::Unauthorized(_)));
    assert!(!format!("{err:?} {err}").contains(caller_token));
}

#[tokio::test]
async fn empty_or_malformed_caller_tokens_are_unauthorized() {
    let fake = FakeApi::start().await;
    let cluster = fake.cluster(fast(2));
    for token in ["", "   ", "bad\ntoken"] {
        match cluster.client(&Identity::Caller(token.into())) {
            Err(KubeError::Unauthorized(s)) => assert_eq!(s.code, 401),
            other => panic!("{token:?}: {other:?}"),
        }
    }
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn list_passes_options_and_types_items() {
    let fake = FakeApi::start().await;
    let page = serde_json::json!({
        "kind": "WidgetList", "apiVersion": "example.com/v1",
        "metadata": {"resourceVersion": "99", "continue": "next-page"},
        "items": [
            {"metadata": {"name": "a", "namespace": "ns", "uid": "ua", "resourceVersion": "5"}},
            {"metadata": {"name": "b", "namespace": "ns", "uid": "ub", "resourceVersion": "6", "deletionTimestamp": "2024-01-01T00:00:00Z"}}
        ]
    });
    fake.script("GET", WIDGETS, vec![Reply::Json(200, page.to_string())]);
    let client = fake.cluster(fast(2)).privileged();
    let options = ListOptions {
        label_selector: Some("app=web,tier notin (db)".into()),
        field_selector: Some("metadata.name=a".into()),
        limit: Some(2),
        continue_token: Some("prev".into()),
    };
    let list = client
        .list("example.com/v1", "Widget", Some("ns"), &options)
        .await
        .unwrap();
    assert_eq!(list.resource_version, "99");
    assert_eq!(list.continue_token.as_deref(), Some("next-page"));
    assert_eq!(list.items.len(), 2);
    assert_eq!(
        list.items[0].target,
        ObjectRef::namespaced("example.com/v1", "Widget", "ns", "a")
    );
    assert_eq!(
        list.items[1].metadata.deletion_timestamp.as_deref(),
        Some("2024-01-01T00:00:00Z")
    );
    let item: serde_json::Value = serde_json::from_str(&list.items[0].json).unwrap();
    assert_eq!(item["kind"], "Widget");
    assert_eq!(item["apiVersion"], "example.com/v1");
    let query = fake.requests_to("GET", WIDGETS)[0]
        .query
        .clone()
        .unwrap_or_default();
    for expected in [
        "labelSelector=app%3Dweb%2Ctier+notin+%28db%29",
        "fieldSelector=metadata.name%3Da",
        "limit=2",
        "continue=prev",
    ] {
        assert!(query.contains(expected), "{expected} not in {query}");
    }
    // All namespaces, and a cluster-scoped kind ignores the namespace.
    fake.script(
        "GET",
        "/apis/example.com/v1/widgets",
        vec![Reply::Json(200, r#"{"metadata":{},"items":[]}"#.into())],
    );
    let all = client
        .list("example.com/v1", "Widget", None, &ListOptions::default())
        .await
        .unwrap();
    assert!(all.items.is_empty() && all.continue_token.is_none());
    fake.script(
        "GET",
        "/apis/example.com/v1/gadgets",
        vec![Reply::Json(
            200,
            r#"{"metadata":{"resourceVersion":"1"},"items":[]}"#.into(),
        )],
    );
    client
        .list(
            "example.com/v1",
            "Gadget",
            Some("ns"),
            &ListOptions::default(),
        )
        .await
        .unwrap();
    // An expired continue token.
    fake.script(
        "GET",
        WIDGETS,
        vec![Reply::Json(
            410,
            status_body(410, "Expired", "continue token expired"),
        )],
    );
    let err = client
        .list("example.com/v1", "Widget", Some("ns"), &options)
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Gone(_)), "{err:?}");
}

#[tokio::test]
async fn patches_use_the_right_content_type_path_and_retry_rule() {
    let fake = FakeApi::start().await;
    let client = fake.cluster(fast(3)).privileged();
    let ok = Reply::Json(200, widget("ns", "w1", serde_json::json!({})));
    let unavailable = Reply::Json(503, status_body(503, "ServiceUnavailable", "busy"));

    // Merge patch on the status subresource: repeatable.
    fake.script(
        "PATCH",
        &format!("{W1}/status"),
        vec![unavailable.clone(), ok.clone()],
    );
    client
        .patch(
            &w1(),
            PatchKind::Merge,
            r#"{"status":{"ready":true}}"#,
            Some("status"),
        )
        .await
        .unwrap();
    let sent = fake.requests_to("PATCH", &format!("{W1}/status"));
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(sent[0].body, r#"{"status":{"ready":true}}"#);

    // A JSON patch without `test` is unguarded: not retried on 503.
    fake.script("PATCH", W1, vec![unavailable.clone(), ok.clone()]);
    let err = client
        .patch(
            &w1(),
            PatchKind::Json,
            r#"[{"op":"add","path":"/metadata/finalizers/-","value":"x"}]"#,
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, KubeError::Unavailable(m) if m.contains("outcome unknown")),
        "{err:?}"
    );
    assert_eq!(fake.count("PATCH", W1), 1);

    // With a `test` operation it is guarded: retried.
    fake.script("PATCH", W1, vec![unavailable.clone(), ok.clone()]);
    client
        .patch(
            &w1(),
            PatchKind::Json,
            r#"[{"op":"test","path":"/metadata/uid","value":"uid-w1"},{"op":"remove","path":"/metadata/finalizers/0"}]"#,
            None,
        )
        .await
        .unwrap();
    let sent = fake.requests_to("PATCH", W1);
    assert_eq!(sent.len(), 3);
    assert_eq!(
        sent[2].content_type.as_deref(),
        Some("application/json-patch+json")
    );

    // Strategic merge content type.
    fake.script("PATCH", W1, vec![ok]);
    client
        .patch(&w1(), PatchKind::StrategicMerge, "{}", None)
        .await
        .unwrap();
    assert_eq!(
        fake.requests_to("PATCH", W1)
            .last()
            .unwrap()
            .content_type
            .as_deref(),
        Some("application/strategic-merge-patch+json")
    );

    // Malformed patches never reach the server.
    let before = fake.requests().len();
    for (kind, body) in [
        (PatchKind::Merge, "[1]"),
        (PatchKind::Json, "{}"),
        (PatchKind::Json, "[{}]"),
        (PatchKind::Merge, "nope"),
    ] {
        let err = client.patch(&w1(), kind, body, None).await.unwrap_err();
        assert!(matches!(err, KubeError::Invalid(_)), "{body}: {err:?}");
    }
    let err = client
        .patch(&w1(), PatchKind::Merge, "{}", Some("../x"))
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Invalid(_)));
    assert_eq!(fake.requests().len(), before);
}

#[tokio::test]
async fn replace_is_retried_only_when_guarded_by_resource_version() {
    let fake = FakeApi::start().await;
    let client = fake.cluster(fast(3)).privileged();
    let failing = Reply::Json(500, status_body(500, "InternalError", "boom"));
    let ok = Reply::Json(200, widget("ns", "w1", serde_json::json!({})));

    fake.script("PUT", W1, vec![failing.clone(), ok.clone()]);
    let guarded = widget("ns", "w1", serde_json::json!({"resourceVersion": "42"}));
    client.replace(&w1(), &guarded).await.unwrap();
    assert_eq!(fake.count("PUT", W1), 2);

    fake.script("PUT", W1, vec![failing, ok]);
    let unguarded = widget("ns", "w1", serde_json::json!({"resourceVersion": ""}));
    let err = client.replace(&w1(), &unguarded).await.unwrap_err();
    assert!(
        matches!(&err, KubeError::Unavailable(m) if m.contains("outcome unknown")),
        "{err:?}"
    );
    assert_eq!(fake.count("PUT", W1), 3);
}

#[tokio::test]
async fn per_call_timeout_retries_reads_but_not_creates() {
    let fake = FakeApi::start().await;
    let body = widget("ns", "w1", serde_json::json!({}));
    let client = fake
        .cluster_with(ClusterOptions {
            retry: fast(3),
            attempt_timeout: Duration::from_millis(200),
            ..ClusterOptions::default()
        })
        .privileged();
    client
        .list(
            "example.com/v1",
            "Widget",
            Some("ns"),
            &ListOptions::default(),
        )
        .await
        .ok(); // warm discovery
    fake.script(
        "GET",
        W1,
        vec![
            Reply::Hang(Duration::from_secs(2), body.clone()),
            Reply::Json(200, body.clone()),
        ],
    );
    client.get(&w1()).await.unwrap();
    assert_eq!(fake.count("GET", W1), 2);

    fake.script(
        "GET",
        W1,
        vec![Reply::Hang(Duration::from_secs(2), body.clone())],
    );
    let err = client.get(&w1()).await.unwrap_err();
    assert!(
        matches!(&err, KubeError::Timeout(m) if m.contains("3 attempts")),
        "{err:?}"
    );

    fake.script(
        "POST",
        WIDGETS,
        vec![Reply::Hang(Duration::from_secs(2), body.clone())],
    );
    let err = client.create(&body).await.unwrap_err();
    assert!(
        matches!(&err, KubeError::Timeout(m) if m.contains("outcome unknown")),
        "{err:?}"
    );
    assert_eq!(fake.count("POST", WIDGETS), 1);
}

#[tokio::test]
async fn discovery_resolves_scope_and_refreshes_on_a_miss() {
    let fake = FakeApi::start().await;
    let client = fake.cluster(fast(2)).privileged();
    let thing = ObjectRef::namespaced("example.com/v1", "Thing", "ns", "t1");
    let err = client.get(&thing).await.unwrap_err();
    assert!(
        matches!(&err, KubeError::NotFound(s) if s.message.contains("Thing")),
        "{err:?}"
    );
    // The CRD appears later.
    fake.script(
        "GET",
        "/apis/example.com/v1",
        vec![Reply::Json(200, common::example_discovery(true))],
    );
    fake.script(
        "GET",
        "/apis/example.com/v1/namespaces/ns/things/t1",
        vec![Reply::Json(200, r#"{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t1","namespace":"ns","uid":"t"}}"#.into())],
    );
    assert_eq!(client.get(&thing).await.unwrap().metadata.uid, "t");

    // Cluster-scoped kinds ignore the namespace; core kinds live under /api.
    fake.script(
        "GET",
        "/apis/example.com/v1/gadgets/g1",
        vec![Reply::Json(
            200,
            r#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g1"}}"#.into(),
        )],
    );
    let g = client
        .get(&ObjectRef::namespaced(
            "example.com/v1",
            "Gadget",
            "ignored",
            "g1",
        ))
        .await
        .unwrap();
    assert_eq!(g.target.namespace, None);
    fake.script(
        "GET",
        "/api/v1/namespaces/ns/configmaps/c",
        vec![Reply::Json(
            200,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}"#
                .into(),
        )],
    );
    client
        .get(&ObjectRef::namespaced("v1", "ConfigMap", "ns", "c"))
        .await
        .unwrap();

    // Unknown group versions, missing namespaces and bad names fail clearly.
    let err = client
        .get(&ObjectRef::namespaced("nope.io/v9", "X", "ns", "x"))
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::NotFound(_)), "{err:?}");
    let err = client
        .get(&ObjectRef::cluster("example.com/v1", "Widget", "w1"))
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
    let err = client
        .get(&ObjectRef::namespaced(
            "example.com/v1",
            "Widget",
            "ns",
            "a/b",
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
    let err = client
        .create(r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"x"}}"#)
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
    let err = client.create("not json").await.unwrap_err();
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[tokio::test]
async fn cluster_from_kubeconfig_uses_its_token() {
    let fake = FakeApi::start().await;
    fake.script(
        "GET",
        W1,
        vec![Reply::Json(200, widget("ns", "w1", serde_json::json!({})))],
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: http://{}
users:
- name: host
  user:
    token: {HOST_TOKEN}
contexts:
- name: fake
  context:
    cluster: fake
    user: host
current-context: fake
",
            fake.addr
        ),
    )
    .unwrap();
    let cluster =
        lethe_kube::Cluster::from_kubeconfig(&path, lethe_kube::ClusterOptions::default())
            .await
            .unwrap();
    assert_eq!(cluster.url(), format!("http://{}/", fake.addr));
    cluster.privileged().get(&w1()).await.unwrap();
    assert_eq!(
        fake.requests_to("GET", W1)[0].authorization.as_deref(),
        Some(format!("Bearer {HOST_TOKEN}").as_str())
    );
    let missing =
        lethe_kube::Cluster::from_kubeconfig(&dir.path().join("nope"), Default::default()).await;
    assert!(matches!(missing, Err(KubeError::Unavailable(_))));
}

#[tokio::test]
async fn authenticate_checks_a_caller_token_once_per_ttl_and_never_caches_rejection() {
    let fake = FakeApi::start().await;
    let list = serde_json::json!({"apiVersion": "v1", "kind": "NamespaceList", "metadata": {"resourceVersion": "1"}, "items": []});
    fake.script(
        "GET",
        "/api/v1/namespaces",
        vec![Reply::Json(200, list.to_string())],
    );
    let cluster = fake.cluster(fast(2));
    cluster
        .client(&Identity::Privileged)
        .unwrap()
        .authenticate()
        .await
        .unwrap();
    assert_eq!(
        fake.count("GET", "/api/v1/namespaces"),
        0,
        "the host's own identity needs no check"
    );
    let caller = cluster
        .client(&Identity::Caller("good-token".into()))
        .unwrap();
    caller.authenticate().await.unwrap();
    cluster
        .client(&Identity::Caller("good-token".into()))
        .unwrap()
        .authenticate()
        .await
        .unwrap();
    assert_eq!(
        fake.count("GET", "/api/v1/namespaces"),
        1,
        "a recent acceptance is remembered"
    );
    // A caller who may not list namespaces is still authenticated (403 is not 401).
    fake.script(
        "GET",
        "/api/v1/namespaces",
        vec![Reply::Json(403, status_body(403, "Forbidden", "no"))],
    );
    cluster
        .client(&Identity::Caller("other-token".into()))
        .unwrap()
        .authenticate()
        .await
        .unwrap();
    fake.script(
        "GET",
        "/api/v1/namespaces",
        vec![Reply::Json(
            401,
            status_body(401, "Unauthorized", "Unauthorized"),
        )],
    );
    let bad = cluster
        .client(&Identity::Caller("bad-token".into()))
        .unwrap();
    assert!(matches!(
        bad.authenticate().await,
        Err(KubeError::Unauthorized(_))
    ));
    assert!(matches!(
        bad.authenticate().await,
        Err(KubeError::Unauthorized(_))
    ));
    assert_eq!(
        fake.count("GET", "/api/v1/namespaces"),
        4,
        "rejections are checked every time"
    );
}

#[tokio::test]
async fn throttling_is_waited_out_apart_from_the_failure_budget() {
    let fake = FakeApi::start().await;
    let throttled = Reply::WithHeader(
        429,
        "retry-after",
        "0".into(),
        status_body(429, "TooManyRequests", ""),
    );
    let unavailable = Reply::Json(503, status_body(503, "ServiceUnavailable", "busy"));
    fake.script(
        "GET",
        W1,
        vec![
            unavailable.clone(),
            throttled.clone(),
            throttled.clone(),
            throttled.clone(),
            Reply::Json(200, widget("ns", "w1", serde_json::json!({}))),
        ],
    );
    // Two failures allowed: one 503 and three 429s still end in the object.
    let policy = RetryPolicy {
        max_throttled: 5,
        ..fast(2)
    };
    let cluster = fake.cluster(policy);
    let obj = cluster.privileged().get(&w1()).await.unwrap();
    assert_eq!(obj.metadata.uid, "uid-w1");
    assert_eq!(cluster.stats().throttled, 3);

    // Past `max_throttled` 429s, the call gives up and says how often it tried.
    fake.script(
        "GET",
        W1,
        vec![throttled.clone(), throttled.clone(), throttled],
    );
    let policy = RetryPolicy {
        max_throttled: 2,
        ..fast(5)
    };
    let err = fake
        .cluster(policy)
        .privileged()
        .get(&w1())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, KubeError::Unavailable(m) if m.contains("429") && m.contains("gave up after 2 attempts")),
        "{err:?}"
    );
}

#[tokio::test]
async fn no_retry_is_started_that_would_end_past_the_deadline() {
    let fake = FakeApi::start().await;
    let policy = RetryPolicy {
        max_attempts: 20,
        max_throttled: 20,
        base_delay: Duration::from_millis(200),
        max_delay: Duration::from_secs(2),
    };
    let client = fake.cluster(policy).privileged();
    // Warm discovery, so the deadline bounds the GET alone.
    fake.script(
        "GET",
        W1,
        vec![Reply::Json(200, widget("ns", "w1", serde_json::json!({})))],
    );
    client.get(&w1()).await.unwrap();
    fake.script(
        "GET",
        W1,
        vec![Reply::Json(503, status_body(503, "ServiceUnavailable", "busy")); 20],
    );
    let started = Instant::now();
    let err = client
        .with_deadline(started + Duration::from_millis(300))
        .get(&w1())
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Unavailable(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(350),
        "gave up only after {:?}",
        started.elapsed()
    );
    assert!(fake.count("GET", W1) < 20, "it did not give up early");
}

#[tokio::test]
async fn a_call_whose_time_ran_out_is_not_sent() {
    let fake = FakeApi::start().await;
    let client = fake.cluster(RetryPolicy::default()).privileged();
    fake.script(
        "GET",
        W1,
        vec![Reply::Json(200, widget("ns", "w1", serde_json::json!({})))],
    );
    client.get(&w1()).await.unwrap();
    let sent = fake.count("GET", W1);
    let err = client
        .with_deadline(Instant::now())
        .get(&w1())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, KubeError::Timeout(m) if m.contains("ran out before it was sent")),
        "{err:?}"
    );
    assert_eq!(fake.count("GET", W1), sent, "nothing was sent");
}
