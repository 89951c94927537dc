//! Change delivery and the client-side rate limit against the embedded cluster, whose watch,
//! compaction and dropped watches behave as kube-apiserver's do.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lethe_kube::{
    ChangeBatch, ChangeType, Cluster, Collection, Identity, KubeError, RateLimit, RateLimitOptions,
    Waited,
};

async fn embedded() -> (lethe_apiserver::RunningApiServer, Cluster) {
    let server = lethe_apiserver::start(lethe_apiserver::ApiServerConfig::default())
        .await
        .expect("the embedded cluster starts");
    let path = server
        .kubeconfig_path()
        .expect("a kubeconfig")
        .to_path_buf();
    let cluster = Cluster::from_kubeconfig(&path, Default::default())
        .await
        .expect("cluster");
    (server, cluster)
}

fn config_maps() -> Collection {
    Collection {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("default".into()),
        label_selector: Some("app=feed".into()),
    }
}

async fn create(cluster: &Cluster, name: &str, app: &str) {
    let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}}});
    cluster
        .privileged()
        .create(&body.to_string())
        .await
        .expect("create");
}

/// Asks for changes from `bookmark` until `want` of them came (bounded polling: the watch
/// delivers them shortly after the writes), and returns them with the last bookmark.
async fn collect(
    cluster: &Cluster,
    bookmark: &str,
    want: usize,
) -> (Vec<(ChangeType, String)>, String) {
    let client = cluster.privileged();
    let mut seen = Vec::new();
    let mut bookmark = bookmark.to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < want {
        assert!(Instant::now() < deadline, "only {seen:?} came");
        let ChangeBatch {
            changes,
            bookmark: next,
            ..
        } = client
            .changes(&config_maps(), Some(&bookmark), 100)
            .await
            .expect("changes");
        seen.extend(
            changes
                .into_iter()
                .map(|c| (c.change_type, c.object.target.name)),
        );
        bookmark = next;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (seen, bookmark)
}

#[tokio::test]
async fn changes_survive_dropped_watches_and_an_expired_version_makes_followers_relist() {
    let (server, cluster) = embedded().await;
    let client = cluster.privileged();
    let start = client
        .changes(&config_maps(), None, 100)
        .await
        .expect("start");
    assert!(start.changes.is_empty());
    assert_eq!(cluster.stats().followed, 1);
    create(&cluster, "a", "feed").await;
    create(&cluster, "ignored", "other").await;
    create(&cluster, "b", "feed").await;
    let (seen, bookmark) = collect(&cluster, &start.bookmark, 2).await;
    assert_eq!(
        seen,
        [
            (ChangeType::Added, "a".into()),
            (ChangeType::Added, "b".into())
        ],
        "in order, and only what the selector matches"
    );

    // A dropped watch is resumed from the last version: nothing is lost, the bookmark holds.
    server.drop_watches();
    create(&cluster, "c", "feed").await;
    let (seen, bookmark) = collect(&cluster, &bookmark, 1).await;
    assert_eq!(seen, [(ChangeType::Added, "c".into())]);

    // The feed's version compacted away (a write it did not follow moved the store on) and its
    // watch dropped: the watch from that version is 410, so the feed lists again, and a
    // follower's bookmark is gone, so it relists too.
    create(&cluster, "unfollowed", "other").await;
    server.compact();
    server.drop_watches();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.changes(&config_maps(), Some(&bookmark), 100).await {
            Err(KubeError::Gone(status)) => {
                assert!(
                    status.message.contains("list the collection again"),
                    "{status:?}"
                );
                break;
            }
            Ok(_) => {}
            Err(other) => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "the bookmark never went");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = client
        .changes(&config_maps(), None, 100)
        .await
        .expect("restart");
    create(&cluster, "e", "feed").await;
    let (seen, _) = collect(&cluster, &again.bookmark, 1).await;
    assert_eq!(seen, [(ChangeType::Added, "e".into())]);
    assert_eq!(
        cluster.stats().followed,
        1,
        "one watch for the collection throughout"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_caller_who_may_not_list_is_refused_changes() {
    let (server, cluster) = embedded().await;
    server.add_token(
        "nobody-token",
        "nobody",
        "u-nobody",
        &["system:authenticated"],
    );
    let caller = cluster
        .client(&Identity::Caller("nobody-token".into()))
        .expect("client");
    let refused = caller.changes(&config_maps(), None, 10).await;
    assert!(
        matches!(refused, Err(KubeError::Forbidden(_))),
        "{refused:?}"
    );
    server.shutdown().await;
}

/// A rate limit that lets one call go, then none for 100 s.
fn one_call_then_a_long_wait() -> Arc<RateLimit> {
    Arc::new(
        RateLimit::new(RateLimitOptions {
            qps: 0.01,
            burst: 1,
        })
        .expect("limit"),
    )
}

#[tokio::test]
async fn every_call_waits_for_the_rate_limit_and_the_wait_is_counted() {
    let (server, cluster) = embedded().await;
    let limit = Arc::new(
        RateLimit::new(RateLimitOptions {
            qps: 20.0,
            burst: 1,
        })
        .expect("limit"),
    );
    let waited = Arc::new(Waited::default());
    let client = cluster
        .privileged()
        .with_rate_limit(limit.clone(), waited.clone());
    for _ in 0..4 {
        client.server_version().await.expect("version");
    }
    assert!(
        waited.total() > Duration::ZERO,
        "calls past the burst waited"
    );
    assert_eq!(limit.waited(), waited.total());
    // A call whose wait would pass its deadline fails at once rather than waiting.
    let slow = one_call_then_a_long_wait();
    let client = cluster
        .privileged()
        .with_rate_limit(slow, Arc::default())
        .with_deadline(Instant::now() + Duration::from_secs(2));
    client.server_version().await.expect("the burst");
    assert!(matches!(
        client.server_version().await,
        Err(KubeError::Timeout(_))
    ));
    server.shutdown().await;
}

#[tokio::test]
async fn the_privileged_identitys_events_do_not_wait_for_its_other_calls() {
    let (server, cluster) = embedded().await;
    let slow = one_call_then_a_long_wait();
    let client = cluster
        .privileged()
        .with_rate_limit(slow, Arc::default())
        .with_deadline(Instant::now() + Duration::from_secs(5));
    // Discovery draws from the privileged bucket like any other call: done before, unlimited.
    cluster
        .privileged()
        .list("v1", "Event", Some("default"), &Default::default())
        .await
        .expect("discovery");
    client.server_version().await.expect("the burst");
    let event = serde_json::json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "told.1", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Namespace", "name": "default"},
        "reason": "Told", "message": "an Event past the reconciler's burst", "type": "Normal",
    });
    client
        .create(&event.to_string())
        .await
        .expect("the recorder's bucket is its own");
    assert!(
        matches!(client.server_version().await, Err(KubeError::Timeout(_))),
        "the other calls' bucket is still spent"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_follower_with_a_waker_is_woken_by_a_change_and_not_by_its_own_asking() {
    let (_server, cluster) = embedded().await;
    let waker = Arc::new(tokio::sync::Notify::new());
    let client = cluster.privileged().with_waker(waker.clone());
    let start = client
        .changes(&config_maps(), None, 100)
        .await
        .expect("start");
    // Asking again, with nothing new, does not ring.
    let quiet = client
        .changes(&config_maps(), Some(&start.bookmark), 100)
        .await
        .expect("changes");
    assert!(quiet.changes.is_empty());
    assert!(
        tokio::time::timeout(Duration::from_millis(300), waker.notified())
            .await
            .is_err(),
        "woken with nothing new"
    );
    // A change to an object of another collection does not ring either; one of this does.
    create(&cluster, "elsewhere", "other").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), waker.notified())
            .await
            .is_err(),
        "woken by a collection it does not follow"
    );
    create(&cluster, "here", "feed").await;
    tokio::time::timeout(Duration::from_secs(10), waker.notified())
        .await
        .expect("woken by the change");
    let (seen, _) = collect(&cluster, &quiet.bookmark, 1).await;
    assert_eq!(seen, [(ChangeType::Added, "here".into())]);
}
