//! What controllers built on the `kube` crate rely on: the runtime watcher in its three list
//! modes, watch expiry and relisting, paginated lists, optimistic concurrency, the finalizer
//! helper, status subresources and discovery. Runs against `KUBECONFIG` when set, else the
//! embedded server.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{TestCluster, api_error, eventually, suffix};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::watcher;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

const OURS: &str = "lethe-kube-client=yes";

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"lethe-kube-client": "yes"}},
        "data": {"k": "v"},
    }))
    .unwrap()
}

/// Creates a namespaced CRD (status subresource on) with a unique group; waits until served.
async fn make_crd(c: &TestCluster) -> ApiResource {
    let s = suffix();
    let group = format!("k{s}.lethe.test");
    let kind = format!("Gizmo{s}");
    let plural = format!("gizmo{s}s");
    create_crd(c, &group, &kind, &plural).await;
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", &kind), &plural)
}

async fn create_crd(c: &TestCluster, group: &str, kind: &str, plural: &str) {
    create_crd_version(
        c,
        group,
        kind,
        plural,
        json!({
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        }),
    )
    .await;
}

/// Creates a namespaced CRD whose one version `v1` is served and stored with `version`'s
/// subresources and schema; waits until it is served.
async fn create_crd_version(
    c: &TestCluster,
    group: &str,
    kind: &str,
    plural: &str,
    version: Value,
) {
    let mut version = version;
    version["name"] = json!("v1");
    version["served"] = json!(true);
    version["storage"] = json!(true);
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [version],
        },
    }))
    .unwrap();
    match Api::<CustomResourceDefinition>::all(c.client.clone())
        .create(&PostParams::default(), &crd)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("CRD not created: {e}"),
    }
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
    let probe: Api<DynamicObject> = Api::all_with(c.client.clone(), &ar);
    eventually(20, || {
        let probe = probe.clone();
        async move { probe.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// The next watcher event, or a panic after a generous bound.
async fn next<S, T>(s: &mut S) -> T
where
    S: futures::Stream<Item = T> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(30), s.next())
        .await
        .expect("an event within 30s")
        .expect("the stream goes on")
}

fn describe(ev: &watcher::Event<ConfigMap>) -> String {
    let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
    match ev {
        watcher::Event::Init => "Init".into(),
        watcher::Event::InitApply(o) => format!("InitApply {}", name(o)),
        watcher::Event::InitDone => "InitDone".into(),
        watcher::Event::Apply(o) => format!("Apply {}", name(o)),
        watcher::Event::Delete(o) => format!("Delete {}", name(o)),
    }
}

/// Runs a watcher with `cfg` over a namespace holding `a` and `b`, and checks the initial
/// sync then a live add, modify and delete.
async fn watcher_sees_init_then_changes(cfg: watcher::Config) {
    let c = TestCluster::new().await;
    let ns = c.namespace("kw").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for n in ["a", "b"] {
        api.create(&PostParams::default(), &cm(n)).await.unwrap();
    }
    let mut events = watcher(api.clone(), cfg.labels(OURS)).boxed();
    let mut got = vec![];
    loop {
        let ev = next(&mut events).await.expect("no watcher error");
        let d = describe(&ev);
        got.push(d.clone());
        if d == "InitDone" {
            break;
        }
    }
    assert_eq!(got, ["Init", "InitApply a", "InitApply b", "InitDone"]);
    api.create(&PostParams::default(), &cm("c")).await.unwrap();
    assert_eq!(
        describe(&next(&mut events).await.expect("no watcher error")),
        "Apply c"
    );
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    match next(&mut events).await.expect("no watcher error") {
        watcher::Event::Apply(o) => {
            assert_eq!(o.metadata.name.as_deref(), Some("a"));
            assert_eq!(o.data.unwrap()["k"], "2");
        }
        other => panic!("expected Apply a, got {}", describe(&other)),
    }
    api.delete("b", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        describe(&next(&mut events).await.expect("no watcher error")),
        "Delete b"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn watcher_default_config_lists_then_watches() {
    watcher_sees_init_then_changes(watcher::Config::default()).await;
}

#[tokio::test]
async fn watcher_with_any_semantic_lists_at_resource_version_0() {
    watcher_sees_init_then_changes(watcher::Config::default().any_semantic()).await;
}

#[tokio::test]
async fn watcher_with_streaming_lists_uses_watch_list() {
    watcher_sees_init_then_changes(watcher::Config::default().streaming_lists()).await;
}

/// The WatchList request itself: the current objects as ADDED, then a BOOKMARK annotated
/// `k8s.io/initial-events-end`, then live events.
#[tokio::test]
async fn a_watch_list_request_ends_its_initial_events_with_an_annotated_bookmark() {
    let c = TestCluster::new().await;
    let ns = c.namespace("wl").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let created = api
        .create(&PostParams::default(), &cm("one"))
        .await
        .unwrap();
    let created_rv: u64 = created.metadata.resource_version.unwrap().parse().unwrap();
    let wp = kube::api::WatchParams::streaming_lists()
        .labels(OURS)
        .timeout(60);
    let mut stream = api.watch(&wp, "").await.unwrap().boxed();
    match next(&mut stream).await.unwrap() {
        kube::api::WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("one")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    let bookmark = match next(&mut stream).await.unwrap() {
        kube::api::WatchEvent::Bookmark(b) => b,
        other => panic!("expected the initial-events-end BOOKMARK, got {other:?}"),
    };
    assert_eq!(
        bookmark
            .metadata
            .annotations
            .get("k8s.io/initial-events-end")
            .map(String::as_str),
        Some("true")
    );
    let bookmark_rv: u64 = bookmark.metadata.resource_version.parse().unwrap();
    assert!(bookmark_rv >= created_rv, "{bookmark_rv} < {created_rv}");
    api.create(&PostParams::default(), &cm("two"))
        .await
        .unwrap();
    loop {
        match next(&mut stream).await.unwrap() {
            kube::api::WatchEvent::Bookmark(_) => continue,
            kube::api::WatchEvent::Added(o) => {
                assert_eq!(o.metadata.name.as_deref(), Some("two"));
                break;
            }
            other => panic!("expected ADDED two, got {other:?}"),
        }
    }
    c.shutdown().await;
}

/// `sendInitialEvents` needs `resourceVersionMatch=NotOlderThan` (and lists may not send it);
/// the real server refuses with a 422 about `ListOptions.meta.k8s.io`.
#[tokio::test]
async fn watch_list_options_are_validated_like_the_real_server() {
    let c = TestCluster::new().await;
    let ns = c.namespace("wlv").await;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let get = |q: String| {
        let client = c.client.clone();
        async move {
            let req = http::Request::get(q).body(Vec::new()).unwrap();
            client.request::<Value>(req).await
        }
    };
    let e = api_error(
        get(format!("{base}?watch=true&sendInitialEvents=true"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    let e = api_error(
        get(format!(
            "{base}?watch=true&resourceVersionMatch=NotOlderThan"
        ))
        .await
        .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
    );
    let e = api_error(
        get(format!(
            "{base}?sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0"
        ))
        .await
        .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
    );
    let e = api_error(
        get(format!("{base}?resourceVersionMatch=NotOlderThan"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    );
    c.shutdown().await;
}

/// `sendInitialEvents=false` starts the watch without synthetic ADDED events.
#[tokio::test]
async fn a_watch_with_send_initial_events_false_skips_the_current_state() {
    let c = TestCluster::new().await;
    let Some(s) = c.embedded_server() else {
        eprintln!("skipped: needs the raw endpoint of the embedded server");
        return;
    };
    let ns = c.namespace("wlf").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("old"))
        .await
        .unwrap();
    let r = common::raw_request(
        s.url(),
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&timeoutSeconds=1&labelSelector=lethe-kube-client%3Dyes"),
        Some(s.admin_token()),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    let body = String::from_utf8(r.body).unwrap();
    assert!(
        !body.contains("\"ADDED\""),
        "no synthetic events expected: {body}"
    );
    c.shutdown().await;
}

/// A watcher whose watch ends and resumes from a compacted resourceVersion gets 410 Expired
/// and lists again.
#[tokio::test]
async fn the_watcher_relists_after_its_resource_version_expires() {
    let c = TestCluster::new().await;
    let ns = c.namespace("relist").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("kept"))
        .await
        .unwrap();
    // No bookmarks, short watches: the watcher resumes from the list's version.
    let cfg = watcher::Config::default()
        .labels(OURS)
        .timeout(1)
        .disable_bookmarks();
    let mut events = watcher(api.clone(), cfg).boxed();
    loop {
        if let watcher::Event::InitDone = next(&mut events).await.unwrap() {
            break;
        }
    }
    // Move the store's version on (outside the watcher's selector) and compact it away.
    let mut other = cm("unwatched");
    other.metadata.labels = None;
    api.create(&PostParams::default(), &other).await.unwrap();
    if !common::compact(&c).await {
        eprintln!("skipped: this cluster cannot be made to compact on request");
        return;
    }
    let mut saw_expired = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no relist within 60s"
        );
        match next(&mut events).await {
            Err(watcher::Error::WatchError(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
                assert!(
                    s.message.starts_with("too old resource version: "),
                    "{}",
                    s.message
                );
                saw_expired = true;
            }
            Err(e) => panic!("unexpected watcher error {e}"),
            Ok(watcher::Event::Init) => break,
            Ok(_) => {}
        }
    }
    assert!(saw_expired, "the relist follows a 410");
    let mut relisted = vec![];
    loop {
        match next(&mut events).await.unwrap() {
            watcher::Event::InitApply(o) => relisted.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {}", describe(&other)),
        }
    }
    assert_eq!(relisted, ["kept"]);
    c.shutdown().await;
}

/// The 410 of a too-old watch names the oldest version still watchable, as the watch cache
/// does: a watch from that version works.
#[tokio::test]
async fn the_expired_watch_names_a_version_that_can_be_watched() {
    let c = TestCluster::new().await;
    let ns = c.namespace("oldest").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let first = api.create(&PostParams::default(), &cm("x")).await.unwrap();
    api.create(&PostParams::default(), &cm("y")).await.unwrap();
    if !common::compact(&c).await {
        eprintln!("skipped: this cluster cannot be made to compact on request");
        return;
    }
    let rv = first.metadata.resource_version.unwrap();
    let wp = kube::api::WatchParams::default().timeout(5);
    let mut s = api.watch(&wp, &rv).await.unwrap().boxed();
    let status = match next(&mut s).await.unwrap() {
        kube::api::WatchEvent::Error(st) => st,
        other => panic!("expected ERROR, got {other:?}"),
    };
    assert_eq!(status.code, 410);
    let oldest = status
        .message
        .strip_prefix(&format!("too old resource version: {rv} ("))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{}", status.message))
        .to_string();
    let mut s = api.watch(&wp, &oldest).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("z")).await.unwrap();
    match next(&mut s).await.unwrap() {
        kube::api::WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("z")),
        other => panic!("expected ADDED z, got {other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test]
async fn paginated_lists_report_the_remaining_item_count_only_without_selectors() {
    let c = TestCluster::new().await;
    let ns = c.namespace("remaining").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("r{i}")))
            .await
            .unwrap();
    }
    // Unfiltered: a real namespace also holds kube-root-ca.crt, so count what is there.
    let all = api.list(&ListParams::default()).await.unwrap().items.len() as i64;
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    assert_eq!(first.metadata.remaining_item_count, Some(all - 2));
    let token = first.metadata.continue_.clone().unwrap();
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(second.metadata.remaining_item_count, Some(all - 4));
    assert_eq!(
        second.metadata.resource_version, first.metadata.resource_version,
        "continued pages report the first page's version"
    );
    // Filtered lists cannot know: the field is left out.
    let filtered = api
        .list(&ListParams::default().labels(OURS).limit(2))
        .await
        .unwrap();
    assert!(filtered.metadata.continue_.is_some());
    assert_eq!(filtered.metadata.remaining_item_count, None);
    // The last page has neither a continue token nor a count.
    let mut lp = ListParams::default().limit(100);
    lp.continue_token = Some(token);
    let rest = api.list(&lp).await.unwrap();
    assert_eq!(rest.items.len() as i64, all - 2);
    assert_eq!(rest.metadata.continue_, None);
    assert_eq!(rest.metadata.remaining_item_count, None);
    c.shutdown().await;
}

/// An expired continue token is 410 with the real message and a fresh token (in the Status'
/// metadata) that continues the list, inconsistently, from where the old one stopped.
#[tokio::test]
async fn an_expired_continue_token_offers_one_that_continues_at_the_latest_version() {
    let c = TestCluster::new().await;
    let ns = c.namespace("cont").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for n in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(n)).await.unwrap();
    }
    let lp = ListParams::default().labels(OURS).limit(1);
    let page = api.list(&lp).await.unwrap();
    assert_eq!(page.items[0].metadata.name.as_deref(), Some("a"));
    let token = page.metadata.continue_.unwrap();
    api.create(&PostParams::default(), &cm("d")).await.unwrap();
    if !common::compact(&c).await {
        eprintln!("skipped: this cluster cannot be made to compact on request");
        return;
    }
    let e = api_error(
        api.list(&lp.clone().continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    assert_eq!(
        e.message,
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    );
    let fresh = e
        .metadata
        .and_then(|m| m.continue_)
        .expect("a token to continue with");
    let mut names = vec![];
    let mut next_token = Some(fresh);
    while let Some(t) = next_token {
        let p = api
            .list(
                &ListParams::default()
                    .labels(OURS)
                    .limit(2)
                    .continue_token(&t),
            )
            .await
            .unwrap();
        names.extend(p.items.into_iter().map(|o| o.metadata.name.unwrap()));
        next_token = p.metadata.continue_.filter(|t| !t.is_empty());
    }
    assert_eq!(names, ["b", "c", "d"]);
    c.shutdown().await;
}

#[tokio::test]
async fn a_garbage_continue_token_is_400() {
    let c = TestCluster::new().await;
    let ns = c.namespace("badcont").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let e = api_error(
        api.list(&ListParams::default().limit(1).continue_token("e30"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert!(
        e.message
            .starts_with("invalid continue token: continue key is not valid"),
        "{}",
        e.message
    );
    c.shutdown().await;
}

#[tokio::test]
async fn delete_preconditions_on_a_custom_resource_name_the_kind() {
    let c = TestCluster::new().await;
    let ns = c.namespace("cpre").await;
    let ar = make_crd(&c).await;
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    let obj = api
        .create(
            &PostParams::default(),
            &DynamicObject::new("g", &ar).data(json!({"spec": {}})),
        )
        .await
        .unwrap();
    let dp = DeleteParams::default().preconditions(kube::api::Preconditions {
        uid: obj.metadata.uid.clone(),
        resource_version: Some("1".into()),
    });
    let e = api_error(api.delete("g", &dp).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on {}.{} \"g\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({}). The object might have been modified",
            ar.kind,
            ar.group,
            obj.metadata.resource_version.as_deref().unwrap()
        )
    );
    let d = e.details.unwrap();
    assert_eq!(
        (d.kind.as_str(), d.group.as_str()),
        (ar.kind.as_str(), ar.group.as_str())
    );
    c.shutdown().await;
}

#[derive(Debug)]
struct Never;
impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}
impl std::error::Error for Never {}

/// `kube::runtime::finalizer` adds its finalizer (JSON patch with a `test` of the absent
/// list), runs cleanup once the object is deleted, then removes it so the object goes away.
#[tokio::test]
async fn the_runtime_finalizer_helper_adds_cleans_up_and_releases() {
    use kube::runtime::controller::Action;
    use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
    let c = TestCluster::new().await;
    let ns = c.namespace("fin").await;
    let ar = make_crd(&c).await;
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    api.create(
        &PostParams::default(),
        &DynamicObject::new("f", &ar).data(json!({"spec": {"n": 1}})),
    )
    .await
    .unwrap();
    let name = "lethe.test/cleanup";
    let run = |obj: DynamicObject| {
        let api = api.clone();
        async move {
            let seen = Arc::new(parking_lot_free::Seen::default());
            let s2 = seen.clone();
            finalizer(&api, name, Arc::new(obj), |ev| async move {
                s2.push(match ev {
                    FinalizerEvent::Apply(_) => "apply",
                    FinalizerEvent::Cleanup(_) => "cleanup",
                });
                Ok::<_, Never>(Action::await_change())
            })
            .await
            .map_err(|e| e.to_string())?;
            Ok::<_, String>(seen.take())
        }
    };
    // First pass: only adds the finalizer.
    assert_eq!(
        run(api.get("f").await.unwrap()).await.unwrap(),
        Vec::<&str>::new()
    );
    let got = api.get("f").await.unwrap();
    assert_eq!(got.metadata.finalizers, Some(vec![name.to_string()]));
    // Second pass: reconciles.
    assert_eq!(run(got).await.unwrap(), ["apply"]);
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("f").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(run(deleting).await.unwrap(), ["cleanup"]);
    eventually(20, || {
        let api = api.clone();
        async move {
            match api.get("f").await {
                Err(kube::Error::Api(s)) if s.code == 404 => Some(()),
                _ => None,
            }
        }
    })
    .await;
    c.shutdown().await;
}

/// A tiny thread-safe log without extra dependencies.
mod parking_lot_free {
    #[derive(Default)]
    pub struct Seen(std::sync::Mutex<Vec<&'static str>>);
    impl Seen {
        pub fn push(&self, s: &'static str) {
            self.0.lock().unwrap().push(s);
        }
        pub fn take(&self) -> Vec<&'static str> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }
}

#[tokio::test]
async fn status_subresource_get_patch_replace_and_stale_conflicts() {
    let c = TestCluster::new().await;
    let ns = c.namespace("st").await;
    let ar = make_crd(&c).await;
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    api.create(
        &PostParams::default(),
        &DynamicObject::new("s", &ar).data(json!({"spec": {"n": 1}})),
    )
    .await
    .unwrap();
    let patched = api
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "A"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["phase"], "A");
    let mut cur = api.get_status("s").await.unwrap();
    assert_eq!(cur.data["status"]["phase"], "A");
    let stale = cur.clone();
    cur.data["status"] = json!({"phase": "B"});
    cur.data["spec"] = json!({"n": 99});
    let replaced = api
        .replace_status("s", &PostParams::default(), &cur)
        .await
        .unwrap();
    assert_eq!(replaced.data["status"]["phase"], "B");
    assert_eq!(replaced.data["spec"]["n"], 1, "/status ignores spec");
    // The old resourceVersion no longer matches, on /status and on the main resource.
    let want = format!(
        "Operation cannot be fulfilled on {}.{} \"s\": the object has been modified; please apply your changes to the latest version and try again",
        ar.plural, ar.group
    );
    let e = api_error(
        api.replace_status("s", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (409, "Conflict", want.as_str())
    );
    let e = api_error(
        api.replace("s", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.message.as_str()), (409, want.as_str()));
    c.shutdown().await;
}

#[tokio::test]
async fn the_entry_api_creates_modifies_and_detects_concurrent_writes() {
    let c = TestCluster::new().await;
    let ns = c.namespace("entry").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.entry("e")
        .await
        .unwrap()
        .or_insert(|| cm("e"))
        .commit(&PostParams::default())
        .await
        .unwrap();
    let kube::api::entry::Entry::Occupied(entry) = api.entry("e").await.unwrap() else {
        panic!("the entry exists");
    };
    let mut entry = entry.and_modify(|o| {
        o.data
            .get_or_insert_default()
            .insert("k".into(), "entry".into());
    });
    // Someone else writes in between: the commit's replace carries a stale resourceVersion.
    api.patch(
        "e",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"other": "x"}})),
    )
    .await
    .unwrap();
    match entry.commit(&PostParams::default()).await {
        Err(kube::api::entry::CommitError::Save(kube::Error::Api(s))) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert_eq!(
                s.message,
                "Operation cannot be fulfilled on configmaps \"e\": the object has been modified; please apply your changes to the latest version and try again"
            );
        }
        other => panic!("expected a 409 Conflict, got {other:?}"),
    }
    // Fresh entry: applies.
    api.entry("e")
        .await
        .unwrap()
        .and_modify(|o| {
            o.data
                .get_or_insert_default()
                .insert("k".into(), "entry".into());
        })
        .or_insert(|| panic!("the entry exists"))
        .commit(&PostParams::default())
        .await
        .unwrap();
    let got = api.get("e").await.unwrap().data.unwrap();
    assert_eq!((got["k"].as_str(), got["other"].as_str()), ("entry", "x"));
    c.shutdown().await;
}

/// A typed custom resource, as `#[derive(CustomResource)]` would make it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Sprocket {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Value,
}

impl kube::Resource for Sprocket {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "Sprocket".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "sprockets.lethe.test".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "sprockets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[tokio::test]
async fn discovery_resolves_an_erased_custom_resource() {
    let c = TestCluster::new().await;
    create_crd(&c, "sprockets.lethe.test", "Sprocket", "sprockets").await;
    let erased = ApiResource::erase::<Sprocket>(&());
    let gvk = GroupVersionKind::gvk(&erased.group, &erased.version, &erased.kind);
    for aggregated in [false, true] {
        let d = kube::discovery::Discovery::new(c.client.clone());
        let d = if aggregated {
            d.run_aggregated().await.unwrap()
        } else {
            d.run().await.unwrap()
        };
        let (ar, caps) = d
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("{gvk:?} not discovered (aggregated: {aggregated})"));
        assert_eq!(ar, erased, "aggregated: {aggregated}");
        assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
        assert!(
            caps.subresources
                .iter()
                .any(|(r, _)| r.plural == "sprockets/status" || r.plural == "status"),
            "status subresource missing: {:?}",
            caps.subresources
                .iter()
                .map(|(r, _)| r.plural.clone())
                .collect::<Vec<_>>()
        );
        for verb in [
            "get",
            "list",
            "watch",
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
        ] {
            assert!(
                caps.supports_operation(verb),
                "{verb} (aggregated: {aggregated})"
            );
        }
    }
    // The typed API works with what discovery found.
    let ns = c.namespace("erase").await;
    let api: Api<Sprocket> = Api::namespaced(c.client.clone(), &ns);
    let s: Sprocket = serde_json::from_value(json!({
        "apiVersion": "sprockets.lethe.test/v1", "kind": "Sprocket",
        "metadata": {"name": "s1"}, "spec": {"teeth": 12},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &s).await.unwrap();
    assert_eq!(created.spec["teeth"], 12);
    let listed: Vec<_> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| o.metadata.name.unwrap())
        .collect();
    assert_eq!(listed, ["s1"]);
    c.shutdown().await;
}

/// The aggregated discovery document: the media type the client asked for comes back in
/// Content-Type, and a custom resource appears with its scope, verbs and status subresource.
#[tokio::test]
async fn aggregated_discovery_answers_with_the_negotiated_media_type() {
    let c = TestCluster::new().await;
    let ar = make_crd(&c).await;
    let req = http::Request::get("/apis")
        .header(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let res = c
        .client
        .send(req.map(kube::client::Body::from))
        .await
        .unwrap();
    assert_eq!(
        res.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    );
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes();
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
    let group = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == ar.group.as_str())
        .expect("the CRD's group");
    let res = &group["versions"][0]["resources"][0];
    assert_eq!(res["resource"], ar.plural.as_str());
    assert_eq!(res["scope"], "Namespaced");
    assert_eq!(res["responseKind"]["kind"], ar.kind.as_str());
    assert_eq!(res["subresources"][0]["subresource"], "status");
    c.shutdown().await;
}

/// kube-rs's event `Recorder` writes through `events.k8s.io/v1` (create, then a merge patch of
/// the series for a repeat); the same Events read back through core `v1`, as `kubectl get
/// events` and `kubectl describe` read them.
#[tokio::test]
async fn the_event_recorder_publishes_events_seen_through_both_event_apis() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as NewEvent;
    use kube::Resource as _;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let c = TestCluster::new().await;
    let ns = c.namespace("recorder").await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let target = cms
        .create(&PostParams::default(), &cm("watched"))
        .await
        .unwrap();
    let recorder = Recorder::new(
        c.client.clone(),
        Reporter {
            controller: "lethe.test/recorder".into(),
            instance: Some("recorder-0".into()),
        },
    );
    let event = Event {
        type_: EventType::Warning,
        reason: "Drifted".into(),
        note: Some("the data changed behind our back".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = target.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();

    let new_api: Api<NewEvent> = Api::namespaced(c.client.clone(), &ns);
    let ours =
        |e: &NewEvent| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("watched");
    let published: Vec<NewEvent> = new_api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(ours)
        .collect();
    assert_eq!(published.len(), 1, "{published:?}");
    let e = &published[0];
    assert_eq!(e.reason.as_deref(), Some("Drifted"));
    assert_eq!(e.note.as_deref(), Some("the data changed behind our back"));
    assert_eq!(
        e.reporting_controller.as_deref(),
        Some("lethe.test/recorder")
    );
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(2));

    let core_api: Api<CoreEvent> = Api::namespaced(c.client.clone(), &ns);
    let core = core_api
        .get(e.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(core.involved_object.uid, target.metadata.uid);
    assert_eq!(
        core.message.as_deref(),
        Some("the data changed behind our back")
    );
    assert_eq!(
        core.reporting_component.as_deref(),
        Some("lethe.test/recorder")
    );
    assert_eq!(core.type_.as_deref(), Some("Warning"));
    c.shutdown().await;
}

/// An `events.k8s.io/v1` Event must say who reported what, and when; errors name that API.
#[tokio::test]
async fn an_incomplete_new_style_event_is_invalid_and_a_missing_one_not_found() {
    use k8s_openapi::api::events::v1::Event as NewEvent;
    let c = TestCluster::new().await;
    let ns = c.namespace("events-v1").await;
    let api: Api<NewEvent> = Api::namespaced(c.client.clone(), &ns);
    let incomplete: NewEvent = serde_json::from_value(json!({
        "metadata": {"name": "bare"},
        "type": "Normal",
    }))
    .unwrap();
    let e = api_error(
        api.create(&PostParams::default(), &incomplete)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .starts_with("Event.events.k8s.io \"bare\" is invalid: ["),
        "{}",
        e.message
    );
    for field in [
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
        "eventTime",
    ] {
        assert!(
            e.message.contains(&format!("{field}: Required value")),
            "{field}: {}",
            e.message
        );
    }
    let e = api_error(api.get("absent").await.unwrap_err());
    assert_eq!(e.code, 404);
    assert_eq!(e.message, "events.events.k8s.io \"absent\" not found");
    c.shutdown().await;
}

/// A TokenRequest's `expirationSeconds` must be a whole number of at least ten minutes: other
/// JSON is refused by the decoder (400), too short a duration by validation (422).
#[tokio::test]
async fn a_token_request_with_a_malformed_or_short_duration_is_refused() {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let c = TestCluster::new().await;
    let ns = c.namespace("tokens").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(c.client.clone(), &ns);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let ask = |seconds: Value| {
        let accounts = accounts.clone();
        async move {
            let body = json!({
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds},
            });
            accounts
                .create_subresource::<Value, TokenRequest>(
                    "token",
                    "robot",
                    &PostParams::default(),
                    &body,
                )
                .await
        }
    };
    for (seconds, found) in [
        (json!("3600"), "string"),
        (json!(3600.5), "number 3600.5"),
        (json!(true), "bool"),
    ] {
        let e = api_error(ask(seconds).await.unwrap_err());
        assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
        assert!(
            e.message.ends_with(&format!(
                "json: cannot unmarshal {found} into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64"
            )),
            "{}",
            e.message
        );
    }
    let e = api_error(ask(json!(60)).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let granted = ask(json!(3600)).await.unwrap();
    assert_eq!(granted.spec.and_then(|s| s.expiration_seconds), Some(3600));
    c.shutdown().await;
}

/// `fieldManager` is at most 128 printable bytes, for every kind of write.
#[tokio::test]
async fn an_overlong_or_unprintable_field_manager_is_refused() {
    let c = TestCluster::new().await;
    let ns = c.namespace("managers").await;
    let long = "m".repeat(129);
    let cases = [
        (
            "POST",
            format!("/api/v1/namespaces/{ns}/configmaps?fieldManager={long}"),
            "CreateOptions",
            "fieldManager: Too long: may not be more than 128 bytes",
        ),
        (
            "POST",
            format!("/api/v1/namespaces/{ns}/configmaps?fieldManager=a%07b"),
            "CreateOptions",
            "fieldManager: Invalid value: \"a\\ab\": invalid character U+0007 (at position 1)",
        ),
        (
            "PATCH",
            format!("/api/v1/namespaces/{ns}/configmaps/x?fieldManager={long}"),
            "PatchOptions",
            "Too long",
        ),
        (
            "PUT",
            format!("/api/v1/namespaces/{ns}/configmaps/x?fieldManager={long}"),
            "UpdateOptions",
            "Too long",
        ),
    ];
    for (method, path, kind, message) in cases {
        let body = serde_json::to_vec(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        )
        .unwrap();
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(
                "content-type",
                if method == "PATCH" {
                    "application/merge-patch+json"
                } else {
                    "application/json"
                },
            )
            .body(body)
            .unwrap();
        let e = match c.client.request_text(req).await {
            Err(kube::Error::Api(s)) => s,
            other => panic!("{method}: expected a Status, got {other:?}"),
        };
        assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{method}");
        assert!(
            e.message
                .starts_with(&format!("{kind}.meta.k8s.io \"\" is invalid: ")),
            "{}",
            e.message
        );
        assert!(e.message.contains(message), "{}", e.message);
    }
    c.shutdown().await;
}

/// Server-side apply on a custom resource whose schema marks associative lists: two managers'
/// items merge, each owns its own, a dropped item goes, and a shared field conflicts by key.
#[tokio::test]
async fn server_side_apply_merges_associative_lists_by_key() {
    let c = TestCluster::new().await;
    let s = suffix();
    let (group, kind, plural) = (
        format!("al{s}.lethe.test"),
        format!("Route{s}"),
        format!("route{s}s"),
    );
    create_crd_version(
        &c,
        &group,
        &kind,
        &plural,
        json!({"schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {
            "backends": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "weight": {"type": "integer"}}}},
            "hosts": {"type": "array", "x-kubernetes-list-type": "set",
                "items": {"type": "string"}},
        }}}}}}),
    )
    .await;
    let ns = c.namespace("lists").await;
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", &kind), &plural);
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    let route = |backends: Value, hosts: Value| {
        json!({"apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {"name": "r"},
            "spec": {"backends": backends, "hosts": hosts}})
    };
    let apply = |manager: &'static str, body: Value| {
        let api = api.clone();
        async move {
            api.patch("r", &PatchParams::apply(manager), &Patch::Apply(body))
                .await
        }
    };
    apply(
        "team-blue",
        route(json!([{"name": "blue", "weight": 1}]), json!(["a.test"])),
    )
    .await
    .unwrap();
    let both = apply(
        "team-green",
        route(json!([{"name": "green", "weight": 2}]), json!(["b.test"])),
    )
    .await
    .unwrap();
    assert_eq!(
        both.data["spec"],
        json!({"backends": [{"name": "blue", "weight": 1}, {"name": "green", "weight": 2}],
            "hosts": ["a.test", "b.test"]})
    );
    let left = apply("team-blue", route(json!([]), json!([])))
        .await
        .unwrap();
    assert_eq!(
        left.data["spec"],
        json!({"backends": [{"name": "green", "weight": 2}], "hosts": ["b.test"]})
    );
    c.shutdown().await;
}

/// A kube-rs `Controller` over a custom resource that owns ConfigMaps, as controllers are
/// written: it creates its child with server-side apply, follows spec changes, recreates a child
/// deleted behind its back (through the owner reference), and the garbage collector removes
/// the child with its owner.
#[tokio::test]
async fn a_kube_runtime_controller_reconciles_owned_children() {
    use kube::Resource as _;
    use kube::runtime::controller::{Action, Controller};
    let c = TestCluster::new().await;
    let ar = make_crd(&c).await;
    let ns = c.namespace("controller").await;
    let parents: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    let children: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);

    struct Ctx {
        children: Api<ConfigMap>,
        ar: ApiResource,
    }
    async fn reconcile(parent: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
        if parent.metadata.deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let name = format!(
            "{}-child",
            parent.metadata.name.as_deref().unwrap_or_default()
        );
        let owner = parent.controller_owner_ref(&ctx.ar);
        let child = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "ownerReferences": [owner]},
            "data": {"value": parent.data["spec"]["value"].as_str().unwrap_or_default()},
        });
        ctx.children
            .patch(
                &name,
                &PatchParams::apply("parent-controller").force(),
                &Patch::Apply(child),
            )
            .await?;
        Ok(Action::await_change())
    }
    let controller = tokio::spawn(
        Controller::new_with(parents.clone(), watcher::Config::default(), ar.clone())
            .owns(children.clone(), watcher::Config::default())
            .run(
                reconcile,
                |_, _, _| Action::requeue(Duration::from_millis(200)),
                Arc::new(Ctx {
                    children: children.clone(),
                    ar: ar.clone(),
                }),
            )
            .for_each(|_| futures::future::ready(())),
    );
    let value_of = |expected: &'static str| {
        let children = children.clone();
        async move {
            let cm = children.get_opt("p-child").await.ok().flatten()?;
            (cm.data?.get("value")? == expected).then_some(cm.metadata.uid)
        }
    };
    let parent: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": {"name": "p"}, "spec": {"value": "one"},
    }))
    .unwrap();
    parents
        .create(&PostParams::default(), &parent)
        .await
        .unwrap();
    let first = eventually(20, || value_of("one")).await;
    parents
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": "two"}})),
        )
        .await
        .unwrap();
    eventually(20, || value_of("two")).await;
    // Deleted behind the controller's back: the owner reference brings the parent back to it.
    children
        .delete("p-child", &DeleteParams::default())
        .await
        .unwrap();
    let again = eventually(20, || value_of("two")).await;
    assert_ne!(first, again, "a new ConfigMap, not the old one");
    // The owner goes; the garbage collector takes the child.
    parents
        .delete("p", &DeleteParams::background())
        .await
        .unwrap();
    eventually(20, || {
        let children = children.clone();
        async move {
            children
                .get_opt("p-child")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    controller.abort();
    c.shutdown().await;
}
