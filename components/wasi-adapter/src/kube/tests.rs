//! The client end to end against a scripted API server.

use std::collections::VecDeque;

use super::*;
use crate::kube::retry::{Reach, TransportError};

const CORE: &str = r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[
    {"name":"configmaps","namespaced":true,"kind":"ConfigMap"},
    {"name":"namespaces","namespaced":false,"kind":"Namespace"},
    {"name":"pods","namespaced":true,"kind":"Pod"},
    {"name":"pods/status","namespaced":true,"kind":"Pod"}]}"#;
const BATCH: &str = r#"{"kind":"APIResourceList","groupVersion":"batch/v1","resources":[
    {"name":"cronjobs","namespaced":true,"kind":"CronJob"},
    {"name":"cronjobs/status","namespaced":true,"kind":"CronJob"}]}"#;

/// A scripted API server: discovery documents are served on their own; every other request
/// takes the next scripted attempt (a 500 when the script runs out).
#[derive(Default)]
struct Fake {
    script: RefCell<VecDeque<Attempt>>,
    requests: RefCell<Vec<Request>>,
    sleeps: RefCell<Vec<Duration>>,
    clock: Cell<Duration>,
}

impl Fake {
    fn with(script: Vec<Attempt>) -> Rc<Fake> {
        let fake = Rc::new(Fake::default());
        fake.script.borrow_mut().extend(script);
        fake
    }

    fn paths(&self) -> Vec<String> {
        self.requests
            .borrow()
            .iter()
            .map(|r| format!("{:?} {}", r.method, r.path_with_query))
            .collect()
    }

    fn last(&self) -> Request {
        self.requests.borrow().last().cloned().expect("a request")
    }
}

impl Transport for Rc<Fake> {
    fn send(&self, request: &Request) -> Attempt {
        self.requests.borrow_mut().push(request.clone());
        let path = request
            .path_with_query
            .strip_prefix("/prefix")
            .unwrap_or(&request.path_with_query);
        match path {
            "/api/v1" => return ok(200, CORE),
            "/apis/batch/v1" => return ok(200, BATCH),
            _ => {}
        }
        self.script
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| fail(500, ""))
    }

    fn sleep(&self, delay: Duration) {
        self.sleeps.borrow_mut().push(delay);
        self.clock.set(self.clock.get() + delay);
    }

    fn random(&self) -> u64 {
        0x9e37_79b9_7f4a_7c15
    }

    fn now(&self) -> Duration {
        self.clock.get()
    }
}

fn ok(code: u16, body: &str) -> Attempt {
    Attempt::Done(Answer {
        code,
        body: body.as_bytes().to_vec(),
    })
}

fn fail(code: u16, body: &str) -> Attempt {
    Attempt::Failed {
        code,
        body: body.as_bytes().to_vec(),
        retry_after: None,
    }
}

fn broken(reach: Reach, timeout: bool) -> Attempt {
    Attempt::Transport(TransportError {
        reach,
        timeout,
        message: "boom".into(),
    })
}

fn client(fake: &Rc<Fake>) -> Client<Rc<Fake>> {
    let url = ClusterUrl::parse("https://k8s.example:6443/prefix/").unwrap();
    Client::new(
        fake.clone(),
        url,
        "s3cr3t".into(),
        Rc::new(RefCell::new(DiscoveryCache::default())),
    )
}

fn cm(namespace: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: namespace.map(str::to_owned),
        name: name.into(),
    }
}

fn no_list_options() -> ListOptions {
    ListOptions {
        label_selector: None,
        field_selector: None,
        limit: None,
        continue_token: None,
    }
}

const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"5"}}"#;
const NOT_FOUND: &str = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","message":"configmaps \"a\" not found","code":404}"#;

fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

#[test]
fn credentials_come_from_identity_and_environment() {
    let env = env_of(&[
        ("LETHE_KUBE_URL", "https://k8s:6443"),
        ("LETHE_KUBE_TOKEN", "priv-token\n"),
    ]);
    let (url, token) = credentials(&Identity::Caller("abc".into()), &env).unwrap();
    assert_eq!(url.authority, "k8s:6443");
    assert_eq!(token, "abc");
    let (_, token) = credentials(&Identity::Privileged, &env).unwrap();
    assert_eq!(token, "priv-token");

    for bad in ["", "  ", "a\r\nx-evil: 1", "tök"] {
        let e = credentials(&Identity::Caller(bad.into()), &env).unwrap_err();
        assert!(
            matches!(e, Error::Unauthorized(ref s) if s.code == 401),
            "{bad:?}"
        );
    }

    let no_token = env_of(&[("LETHE_KUBE_URL", "https://k8s:6443")]);
    let Err(Error::Forbidden(s)) = credentials(&Identity::Privileged, &no_token) else {
        panic!("privileged without a token is forbidden");
    };
    assert!(s.message.contains("no privileged identity is configured"));
    assert!(s.message.contains("LETHE_KUBE_TOKEN"));

    let no_url = env_of(&[("LETHE_KUBE_TOKEN", "priv-token")]);
    let Err(Error::Unavailable(m)) = credentials(&Identity::Caller("abc".into()), &no_url) else {
        panic!("no cluster is unavailable");
    };
    assert!(m.contains("LETHE_KUBE_URL"));
    let bad_url = env_of(&[
        ("LETHE_KUBE_URL", "k8s:6443"),
        ("LETHE_KUBE_TOKEN", "priv-token"),
    ]);
    let Err(Error::Unavailable(m)) = credentials(&Identity::Privileged, &bad_url) else {
        panic!("a bad URL is unavailable");
    };
    assert!(m.contains("http://") && !m.contains("priv-token"));
}

#[test]
fn get_resolves_through_discovery_once_and_sends_credentials() {
    let fake = Fake::with(vec![ok(200, CM), ok(200, CM)]);
    let c = client(&fake);
    let o = c.get(&cm(Some("ns"), "a")).unwrap();
    assert_eq!(o.json, CM);
    assert_eq!(o.metadata.uid, "u1");
    assert_eq!(o.target, cm(Some("ns"), "a"));
    c.get(&cm(Some("ns"), "a")).unwrap();
    assert_eq!(
        fake.paths(),
        [
            "Get /prefix/api/v1",
            "Get /prefix/api/v1/namespaces/ns/configmaps/a",
            "Get /prefix/api/v1/namespaces/ns/configmaps/a",
        ]
    );
    let r = fake.last();
    assert_eq!(r.scheme, Scheme::Https);
    assert_eq!(r.authority, "k8s.example:6443");
    assert_eq!(r.header("authorization"), Some(&b"Bearer s3cr3t"[..]));
    assert_eq!(r.header("accept"), Some(&b"application/json"[..]));
    assert_eq!(r.body, None);
    assert_eq!(r.header("content-type"), None);
    // Neither the request's nor the client's Debug shows the token.
    assert!(!format!("{r:?} {c:?}").contains("s3cr3t"));
}

#[test]
fn discovery_is_shared_between_clients() {
    let fake = Fake::with(vec![ok(200, CM), ok(200, CM)]);
    let cache = Rc::new(RefCell::new(DiscoveryCache::default()));
    let url = ClusterUrl::parse("https://k8s.example").unwrap();
    let a = Client::new(fake.clone(), url.clone(), "a".into(), cache.clone());
    let b = Client::new(fake.clone(), url, "b".into(), cache);
    a.get(&cm(Some("ns"), "a")).unwrap();
    b.get(&cm(Some("ns"), "a")).unwrap();
    assert_eq!(
        fake.paths().iter().filter(|p| *p == "Get /api/v1").count(),
        1
    );
}

#[test]
fn unknown_kinds_and_versions_are_not_found() {
    let fake = Fake::with(vec![fail(404, NOT_FOUND)]);
    let c = client(&fake);
    let mut target = cm(Some("ns"), "a");
    target.kind = "Secretish".into();
    let Err(Error::NotFound(s)) = c.get(&target) else {
        panic!("unknown kind");
    };
    assert_eq!(s.message, "kind Secretish is not served in apiVersion v1");
    target.api_version = "nope.dev/v1".into();
    let Err(Error::NotFound(s)) = c.get(&target) else {
        panic!("unknown group version");
    };
    assert_eq!(
        s.message,
        "apiVersion nope.dev/v1 is not served by the cluster"
    );
    assert_eq!(fake.last().path_with_query, "/prefix/apis/nope.dev/v1");
    // A subresource is not a kind.
    assert!(c.resolve("v1", "Pod").is_ok());
    assert!(matches!(c.resolve("v1", ""), Err(Error::Invalid(_))));
    assert!(matches!(c.resolve("a/b/c", "X"), Err(Error::Invalid(_))));
}

#[test]
fn addresses_are_checked_and_encoded() {
    let fake = Fake::with(vec![fail(404, NOT_FOUND), ok(200, CM)]);
    let c = client(&fake);
    assert!(matches!(c.get(&cm(None, "a")), Err(Error::Invalid(_))));
    assert!(matches!(
        c.get(&cm(Some("ns"), "../x")),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        c.get(&cm(Some("n/s"), "x")),
        Err(Error::Invalid(_))
    ));
    let Err(Error::NotFound(s)) = c.get(&cm(Some("ns"), "a")) else {
        panic!("404 is not-found");
    };
    assert_eq!(s.reason, "NotFound");
    let ns = ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: Some("ignored".into()),
        name: "team:a".into(),
    };
    c.get(&ns).unwrap();
    assert_eq!(
        fake.last().path_with_query,
        "/prefix/api/v1/namespaces/team%3Aa"
    );
}

#[test]
fn list_sends_the_query_and_fills_targets() {
    let page = r#"{"kind":"CronJobList","apiVersion":"batch/v1","metadata":{"resourceVersion":"99","continue":"next+1"},
        "items":[{"metadata":{"name":"c1","namespace":"ns"}},{"metadata":{"name":"c2","namespace":"other"}}]}"#;
    let fake = Fake::with(vec![
        ok(200, page),
        ok(200, r#"{"metadata":{"continue":""},"items":[]}"#),
    ]);
    let c = client(&fake);
    let options = ListOptions {
        label_selector: Some("app=web,tier notin (db)".into()),
        field_selector: Some("metadata.name=c1".into()),
        limit: Some(2),
        continue_token: Some("prev".into()),
    };
    let list = c.list("batch/v1", "CronJob", Some("ns"), &options).unwrap();
    assert_eq!(
        fake.last().path_with_query,
        "/prefix/apis/batch/v1/namespaces/ns/cronjobs?labelSelector=app%3Dweb%2Ctier%20notin%20%28db%29&fieldSelector=metadata.name%3Dc1&limit=2&continue=prev"
    );
    assert_eq!(list.resource_version, "99");
    assert_eq!(list.continue_token.as_deref(), Some("next+1"));
    assert_eq!(list.items.len(), 2);
    assert_eq!(list.items[1].target.namespace.as_deref(), Some("other"));
    assert_eq!(list.items[1].target.kind, "CronJob");
    assert_eq!(list.items[1].target.api_version, "batch/v1");
    let last = c
        .list("batch/v1", "CronJob", None, &no_list_options())
        .unwrap();
    assert_eq!(
        fake.last().path_with_query,
        "/prefix/apis/batch/v1/cronjobs"
    );
    assert_eq!(last.continue_token, None);
    assert!(last.items.is_empty());
}

#[test]
fn an_expired_continue_token_is_gone() {
    let fake = Fake::with(vec![fail(
        410,
        r#"{"kind":"Status","apiVersion":"v1","reason":"Expired","message":"too old","code":410}"#,
    )]);
    let c = client(&fake);
    let mut options = no_list_options();
    options.continue_token = Some("old".into());
    assert!(matches!(
        c.list("v1", "ConfigMap", None, &options),
        Err(Error::Gone(s)) if s.reason == "Expired"
    ));
}

#[test]
fn changes_start_from_a_list_and_come_from_one_bounded_watch() {
    let stream = concat!(
        r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"11"}}}"#,
        "\n",
        r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12"}}}"#,
        "\n",
        r#"{"type":"DELETED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"ns","resourceVersion":"13"}}}"#,
        "\n",
    );
    let fake = Fake::with(vec![
        ok(200, r#"{"metadata":{"resourceVersion":"10"},"items":[]}"#),
        ok(200, stream),
        ok(200, stream),
    ]);
    let c = client(&fake);
    let collection = Collection {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("ns".into()),
        label_selector: Some("app=j".into()),
    };
    let start = c.changes(&collection, None, 10).unwrap();
    assert_eq!(
        fake.last().path_with_query,
        "/prefix/api/v1/namespaces/ns/configmaps?labelSelector=app%3Dj&limit=1"
    );
    assert_eq!((start.bookmark.as_str(), start.changes.len()), ("rv:10", 0));
    let all = c.changes(&collection, Some(&start.bookmark), 10).unwrap();
    assert_eq!(
        fake.last().path_with_query,
        "/prefix/api/v1/namespaces/ns/configmaps?watch=1&resourceVersion=10&allowWatchBookmarks=true&timeoutSeconds=1&labelSelector=app%3Dj"
    );
    let names: Vec<_> = all
        .changes
        .iter()
        .map(|c| (c.change_type, c.object.target.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (lethe_kube_model::ChangeType::Added, "a"),
            (lethe_kube_model::ChangeType::Deleted, "b")
        ]
    );
    assert_eq!((all.bookmark.as_str(), all.more), ("rv:13", false));
    // A batch cut at `max` ends before the first change it leaves out (a bookmark in between
    // moves it on).
    let one = c.changes(&collection, Some("rv:10"), 1).unwrap();
    assert_eq!(one.changes.len(), 1);
    assert_eq!((one.bookmark.as_str(), one.more), ("rv:12", true));
}

#[test]
fn an_expired_or_foreign_bookmark_is_gone() {
    let expired = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 2 (9)","reason":"Expired","code":410}}"#;
    let fake = Fake::with(vec![ok(200, expired)]);
    let c = client(&fake);
    let collection = Collection {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        label_selector: None,
    };
    assert!(matches!(
        c.changes(&collection, Some("rv:2"), 10),
        Err(Error::Gone(s)) if s.message.contains("too old")
    ));
    let requests = fake.requests.borrow().len();
    assert!(matches!(
        c.changes(&collection, Some("w:abc.3"), 10),
        Err(Error::Gone(_))
    ));
    assert_eq!(
        fake.requests.borrow().len(),
        requests,
        "no request for a foreign bookmark"
    );
}

#[test]
fn create_posts_to_the_bodys_collection() {
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}}"#;
    let fake = Fake::with(vec![ok(201, CM)]);
    let c = client(&fake);
    let o = c.create(body).unwrap();
    assert_eq!(o.metadata.resource_version, "5");
    let r = fake.last();
    assert_eq!(r.method, Method::Post);
    assert_eq!(r.path_with_query, "/prefix/api/v1/namespaces/ns/configmaps");
    assert_eq!(r.body.as_deref(), Some(body.as_bytes()));
    assert_eq!(r.header("content-type"), Some(&b"application/json"[..]));
    assert_eq!(
        r.header("content-length"),
        Some(body.len().to_string().as_bytes())
    );

    for bad in [
        "nope",
        r#"{"kind":"ConfigMap"}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
    ] {
        assert!(matches!(c.create(bad), Err(Error::Invalid(_))), "{bad}");
    }
    let ns = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","namespace":"x"}}"#;
    fake.script.borrow_mut().push_back(ok(201, ns));
    c.create(ns).unwrap();
    assert_eq!(fake.last().path_with_query, "/prefix/api/v1/namespaces");
    fake.script.borrow_mut().push_back(fail(
        409,
        r#"{"kind":"Status","apiVersion":"v1","reason":"AlreadyExists","message":"exists","code":409}"#,
    ));
    assert!(matches!(c.create(ns), Err(Error::Conflict(s)) if s.reason == "AlreadyExists"));
}

#[test]
fn create_is_repeated_only_when_provably_not_applied() {
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}}"#;
    let posts = |fake: &Fake| {
        fake.paths()
            .iter()
            .filter(|p| p.starts_with("Post"))
            .count()
    };

    // 429 with Retry-After, then a refused connection, then success.
    let fake = Fake::with(vec![
        Attempt::Failed {
            code: 429,
            body: Vec::new(),
            retry_after: Some(Duration::from_secs(2)),
        },
        broken(Reach::NotSent, false),
        ok(201, CM),
    ]);
    client(&fake).create(body).unwrap();
    assert_eq!(posts(&fake), 3);
    assert_eq!(fake.sleeps.borrow()[0], Duration::from_secs(2));

    // A 5xx, a dropped connection or a response timeout: the outcome is unknown.
    for attempt in [
        fail(503, ""),
        fail(500, ""),
        broken(Reach::Lost, false),
        broken(Reach::Lost, true),
    ] {
        let fake = Fake::with(vec![attempt.clone(), ok(201, CM)]);
        let e = client(&fake).create(body).unwrap_err();
        assert!(
            matches!(&e, Error::Unavailable(m) | Error::Timeout(m) if m.contains("outcome unknown")),
            "{attempt:?}: {e:?}"
        );
        assert_eq!(posts(&fake), 1, "{attempt:?}");
        assert!(fake.sleeps.borrow().is_empty());
    }
    let fake = Fake::with(vec![broken(Reach::Lost, true)]);
    assert!(matches!(client(&fake).create(body), Err(Error::Timeout(_))));
}

#[test]
fn reads_are_retried_with_bounded_backoff() {
    let fake = Fake::with(vec![fail(503, ""), broken(Reach::Lost, false), ok(200, CM)]);
    client(&fake).get(&cm(Some("ns"), "a")).unwrap();
    assert_eq!(fake.sleeps.borrow().len(), 2);

    let fake = Fake::with(vec![]);
    let e = client(&fake).get(&cm(Some("ns"), "a")).unwrap_err();
    assert_eq!(
        e,
        Error::Unavailable(
            "500 InternalServerError: the server answered 500 (gave up after 4 attempts)".into()
        )
    );
    let sleeps = fake.sleeps.borrow();
    assert_eq!(sleeps.len(), 3);
    for (i, d) in sleeps.iter().enumerate() {
        assert!(*d <= retry::POLICY.ceiling(i as u32 + 1));
    }

    let fake = Fake::with(vec![broken(Reach::Lost, true); 4]);
    let e = client(&fake).get(&cm(Some("ns"), "a")).unwrap_err();
    assert!(matches!(e, Error::Timeout(m) if m.ends_with("(gave up after 4 attempts)")));

    let fake = Fake::with(vec![broken(Reach::Fatal, false)]);
    assert!(matches!(
        client(&fake).get(&cm(Some("ns"), "a")),
        Err(Error::Unavailable(_))
    ));
    assert!(fake.sleeps.borrow().is_empty());
}

#[test]
fn replace_is_repeated_only_when_guarded() {
    let guarded = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}}"#;
    let unguarded =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}}"#;
    let fake = Fake::with(vec![fail(503, ""), ok(200, CM)]);
    client(&fake)
        .replace(&cm(Some("ns"), "a"), guarded)
        .unwrap();
    let r = fake.last();
    assert_eq!(r.method, Method::Put);
    assert_eq!(
        r.path_with_query,
        "/prefix/api/v1/namespaces/ns/configmaps/a"
    );
    assert_eq!(r.body.as_deref(), Some(guarded.as_bytes()));

    let fake = Fake::with(vec![fail(503, ""), ok(200, CM)]);
    assert!(matches!(
        client(&fake).replace(&cm(Some("ns"), "a"), unguarded),
        Err(Error::Unavailable(m)) if m.contains("outcome unknown")
    ));
    let fake = Fake::with(vec![fail(
        409,
        r#"{"kind":"Status","apiVersion":"v1","reason":"Conflict","message":"stale","code":409}"#,
    )]);
    assert!(matches!(
        client(&fake).replace(&cm(Some("ns"), "a"), guarded),
        Err(Error::Conflict(_))
    ));
    assert!(matches!(
        client(&fake).replace(&cm(Some("ns"), "a"), "[]"),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn patch_kinds_subresources_and_safety() {
    let fake = Fake::with(vec![ok(200, CM), ok(200, CM), ok(200, CM)]);
    let c = client(&fake);
    c.patch(
        &cm(Some("ns"), "a"),
        PatchKind::Merge,
        r#"{"data":{"k":"v"}}"#,
        None,
    )
    .unwrap();
    let r = fake.last();
    assert_eq!(r.method, Method::Patch);
    assert_eq!(
        r.path_with_query,
        "/prefix/api/v1/namespaces/ns/configmaps/a"
    );
    assert_eq!(
        r.header("content-type"),
        Some(&b"application/merge-patch+json"[..])
    );
    let pod = ObjectRef {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some("ns".into()),
        name: "p".into(),
    };
    c.patch(
        &pod,
        PatchKind::StrategicMerge,
        r#"{"status":{}}"#,
        Some("status"),
    )
    .unwrap();
    let r = fake.last();
    assert_eq!(
        r.path_with_query,
        "/prefix/api/v1/namespaces/ns/pods/p/status"
    );
    assert_eq!(
        r.header("content-type"),
        Some(&b"application/strategic-merge-patch+json"[..])
    );
    let ops = r#"[{"op":"replace","path":"/data/k","value":"w"}]"#;
    c.patch(&cm(Some("ns"), "a"), PatchKind::Json, ops, None)
        .unwrap();
    assert_eq!(
        fake.last().header("content-type"),
        Some(&b"application/json-patch+json"[..])
    );

    assert_eq!(patch_safety(PatchKind::Merge, "{}"), Ok(Safety::Repeatable));
    assert_eq!(patch_safety(PatchKind::Json, ops), Ok(Safety::Unsafe));
    assert_eq!(
        patch_safety(
            PatchKind::Json,
            r#"[{"op":"test","path":"/metadata/uid","value":"u"},{"op":"remove","path":"/x"}]"#
        ),
        Ok(Safety::Repeatable)
    );
    for (kind, bad) in [
        (PatchKind::Merge, "[]"),
        (PatchKind::Merge, "{"),
        (PatchKind::Json, "{}"),
        (PatchKind::Json, r#"[{"path":"/x"}]"#),
    ] {
        assert!(
            matches!(patch_safety(kind, bad), Err(Error::Invalid(_))),
            "{bad}"
        );
    }
    assert!(matches!(
        c.patch(
            &cm(Some("ns"), "a"),
            PatchKind::Merge,
            "{}",
            Some("st/atus")
        ),
        Err(Error::Invalid(_))
    ));

    // An unguarded JSON patch is not repeated after a 5xx; a merge patch is.
    let fake = Fake::with(vec![fail(502, ""), ok(200, CM)]);
    assert!(
        client(&fake)
            .patch(&cm(Some("ns"), "a"), PatchKind::Json, ops, None)
            .is_err()
    );
    let fake = Fake::with(vec![fail(502, ""), ok(200, CM)]);
    assert!(
        client(&fake)
            .patch(&cm(Some("ns"), "a"), PatchKind::Merge, "{}", None)
            .is_ok()
    );
}

#[test]
fn delete_sends_options_and_reports_the_outcome() {
    let status = r#"{"kind":"Status","apiVersion":"v1","status":"Success","details":{"name":"a"}}"#;
    let pending = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","deletionTimestamp":"2024-01-01T00:00:00Z","finalizers":["lethe.dev/x"]}}"#;
    let fake = Fake::with(vec![
        ok(200, status),
        ok(202, pending),
        ok(200, CM),
        fail(404, NOT_FOUND),
    ]);
    let c = client(&fake);
    let options = DeleteOptions {
        propagation_policy: Some(PropagationPolicy::Foreground),
        precondition_uid: Some("u1".into()),
        precondition_resource_version: Some("5".into()),
    };
    assert_eq!(
        c.delete(&cm(Some("ns"), "a"), &options),
        Ok(DeleteOutcome::Deleted)
    );
    let r = fake.last();
    assert_eq!(r.method, Method::Delete);
    assert_eq!(
        r.path_with_query,
        "/prefix/api/v1/namespaces/ns/configmaps/a"
    );
    let sent: Json = serde_json::from_slice(r.body.as_deref().unwrap()).unwrap();
    assert_eq!(
        sent,
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Foreground",
            "preconditions": {"uid": "u1", "resourceVersion": "5"}
        })
    );
    let Ok(DeleteOutcome::Pending(o)) = c.delete(&cm(Some("ns"), "a"), &options) else {
        panic!("finalizers pending");
    };
    assert_eq!(o.metadata.finalizers, ["lethe.dev/x"]);
    assert_eq!(o.json, pending);
    // The object's last state, without a deletionTimestamp: gone.
    assert_eq!(
        c.delete(&cm(Some("ns"), "a"), &options),
        Ok(DeleteOutcome::Deleted)
    );
    assert!(matches!(
        c.delete(&cm(Some("ns"), "a"), &options),
        Err(Error::NotFound(_))
    ));

    let plain = DeleteOptions {
        propagation_policy: None,
        precondition_uid: None,
        precondition_resource_version: None,
    };
    assert_eq!(
        delete_options_body(&plain),
        br#"{"apiVersion":"v1","kind":"DeleteOptions"}"#
    );
    // Deletes are repeated like reads.
    let fake = Fake::with(vec![fail(503, ""), ok(200, status)]);
    assert_eq!(
        client(&fake).delete(&cm(Some("ns"), "a"), &plain),
        Ok(DeleteOutcome::Deleted)
    );
}

#[test]
fn authenticate_reviews_the_token() {
    let review = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview","status":{"userInfo":{"username":"u"}}}"#;
    let fake = Fake::with(vec![ok(201, review), ok(201, review)]);
    let c = client(&fake);
    c.authenticate().unwrap();
    let r = fake.last();
    assert_eq!(r.method, Method::Post);
    assert_eq!(
        r.path_with_query,
        "/prefix/apis/authentication.k8s.io/v1/selfsubjectreviews"
    );
    assert_eq!(
        r.body.as_deref(),
        Some(&br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#[..])
    );
    // Remembered briefly, then checked again.
    c.authenticate().unwrap();
    assert_eq!(fake.requests.borrow().len(), 1);
    fake.clock.set(AUTHENTICATION_TTL);
    c.authenticate().unwrap();
    assert_eq!(fake.requests.borrow().len(), 2);

    let unauthorized = r#"{"kind":"Status","apiVersion":"v1","reason":"Unauthorized","message":"Unauthorized","code":401}"#;
    let fake = Fake::with(vec![fail(401, unauthorized), fail(401, unauthorized)]);
    let c = client(&fake);
    assert!(matches!(c.authenticate(), Err(Error::Unauthorized(_))));
    // A rejection is not remembered.
    assert!(matches!(c.authenticate(), Err(Error::Unauthorized(_))));

    let fake = Fake::with(vec![fail(403, "")]);
    assert_eq!(client(&fake).authenticate(), Ok(()));

    // An API server without SelfSubjectReview: a one-item namespace list instead.
    let fake = Fake::with(vec![fail(404, ""), fail(403, "")]);
    assert_eq!(client(&fake).authenticate(), Ok(()));
    assert_eq!(
        fake.last().path_with_query,
        "/prefix/api/v1/namespaces?limit=1"
    );
    let fake = Fake::with(vec![fail(404, ""), fail(401, unauthorized)]);
    assert!(matches!(
        client(&fake).authenticate(),
        Err(Error::Unauthorized(_))
    ));
}

#[test]
fn bad_server_answers_are_unavailable() {
    for body in ["", "<html>", "[1]", "null"] {
        let fake = Fake::with(vec![ok(200, body)]);
        assert!(
            matches!(
                client(&fake).get(&cm(Some("ns"), "a")),
                Err(Error::Unavailable(_))
            ),
            "{body:?}"
        );
    }
    let fake = Fake::with(vec![Attempt::Done(Answer {
        code: 200,
        body: vec![0xff, 0xfe],
    })]);
    assert!(matches!(
        client(&fake).get(&cm(Some("ns"), "a")),
        Err(Error::Unavailable(m)) if m.contains("UTF-8")
    ));
    let fake = Fake::with(vec![ok(200, "{\"items\":{}}")]);
    assert!(matches!(
        client(&fake).list("v1", "ConfigMap", None, &no_list_options()),
        Err(Error::Unavailable(_))
    ));
}

#[test]
fn malformed_discovery_is_unavailable() {
    struct Broken;
    impl Transport for Broken {
        fn send(&self, _: &Request) -> Attempt {
            ok(200, "<html>login</html>")
        }
        fn sleep(&self, _: Duration) {}
        fn random(&self) -> u64 {
            0
        }
        fn now(&self) -> Duration {
            Duration::ZERO
        }
    }
    let c = Client::new(
        Broken,
        ClusterUrl::parse("http://proxy").unwrap(),
        "t".into(),
        Rc::default(),
    );
    assert!(matches!(
        c.get(&cm(Some("ns"), "a")),
        Err(Error::Unavailable(m)) if m.contains("malformed discovery document")
    ));
}
