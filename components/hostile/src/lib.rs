//! A plugin made hostile, for the isolation tests (`tests/hostile.rs`): what a component made by
//! `lethe new http`, granted `privileged` and `sql` as a reconciler is, could try against the
//! other components of the same host, in two lines of its own. It does what a request asks and
//! reports what the host and the cluster answered; it proves nothing by itself.
//!
//! - `POST /hostile/kube` `{"verb": "get"|"list"|"create"|"patch"|"delete", "api_version",
//!   "kind", "namespace", "name", "body"}`: one Kubernetes call as the privileged identity;
//! - `POST /hostile/sql` `{"statement": "..."}`: one SQL statement (`SELECT`s are queries,
//!   anything else an execute).
//!
//! Both answer `200 {"outcome": "ok", ...}` when the call went through, else `200 {"outcome":
//! "<error variant>", "detail": ...}`: the test judges the outcome.

use lethe_guest::kube::{
    Collection, DeleteOptions, Identity, KubeError, ListOptions, ObjectRef, Patch,
};
use lethe_guest::sql::SqlError;
use lethe_guest::{Capabilities, Request, Response};
use serde_json::{Value as Json, json};

/// Answers one request.
pub fn handle(host: &dyn Capabilities, req: &Request) -> Response {
    let Ok(ask) = serde_json::from_slice::<Json>(&req.body) else {
        return Response::json(400, &json!({"outcome": "bad-request"}));
    };
    let text = |key: &str| ask[key].as_str().unwrap_or_default().to_string();
    let answer = match req.path_info().trim_matches('/') {
        "kube" => kube(host, &ask, &text),
        "sql" => sql(host, &text("statement")),
        _ => return Response::json(404, &json!({"outcome": "no-such-route"})),
    };
    Response::json(200, &answer)
}

fn kube(host: &dyn Capabilities, ask: &Json, text: &dyn Fn(&str) -> String) -> Json {
    let namespace = Some(text("namespace")).filter(|n| !n.is_empty());
    let (api_version, kind, name) = (text("api_version"), text("kind"), text("name"));
    let target = ObjectRef::new(&api_version, &kind, namespace.as_deref(), &name);
    let id = &Identity::Privileged;
    let result = match text("verb").as_str() {
        "get" => host.get(id, &target).map(|o| json!(o.json())),
        "list" => host
            .list(
                id,
                &Collection::new(&api_version, &kind, namespace.as_deref()),
                &ListOptions::default(),
            )
            .map(|l| {
                json!(
                    l.items
                        .iter()
                        .map(|o| o.target.name.clone())
                        .collect::<Vec<_>>()
                )
            }),
        "create" => host.create(id, &ask["body"]).map(|o| json!(o.json())),
        "patch" => host
            .patch(id, &target, &Patch::Merge(ask["body"].clone()))
            .map(|o| json!(o.json())),
        "delete" => host
            .delete(id, &target, &DeleteOptions::default())
            .map(|_| json!("deleted")),
        other => return json!({"outcome": "bad-request", "detail": other}),
    };
    match result {
        Ok(value) => json!({"outcome": "ok", "value": value}),
        Err(e) => json!({"outcome": kube_outcome(&e), "detail": e.to_string()}),
    }
}

fn kube_outcome(e: &KubeError) -> &'static str {
    match e {
        KubeError::NotFound(_) => "not-found",
        KubeError::Conflict(_) => "conflict",
        KubeError::Forbidden(_) => "forbidden",
        KubeError::Unauthorized(_) => "unauthorized",
        KubeError::Invalid(_) => "invalid",
        KubeError::Gone(_) => "gone",
        KubeError::Unavailable(_) => "unavailable",
        KubeError::Timeout(_) => "timeout",
    }
}

fn sql(host: &dyn Capabilities, statement: &str) -> Json {
    let is_query = statement
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("select");
    let result = if is_query {
        host.query(statement, &[]).map(|rows| {
            let rows: Vec<Vec<String>> = rows
                .iter()
                .map(|r| r.iter().map(|v| format!("{v:?}")).collect())
                .collect();
            json!(rows)
        })
    } else {
        host.execute(statement, &[]).map(|n| json!(n))
    };
    match result {
        Ok(value) => json!({"outcome": "ok", "value": value}),
        Err(SqlError::Constraint(c)) => json!({"outcome": "constraint", "detail": c}),
        Err(SqlError::Failed(m)) => json!({"outcome": "failed", "detail": m}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lethe_guest::fake::{FakeCluster, FakeHost, FakeSql};

    fn post(host: &FakeHost, path: &str, body: Json) -> Json {
        let req = Request {
            method: "POST".into(),
            path: format!("/hostile{path}"),
            headers: vec![("spin-path-info".to_string(), path.as_bytes().to_vec())].into(),
            body: body.to_string().into_bytes(),
            ..Default::default()
        };
        let answer = handle(host, &req);
        assert_eq!(answer.status, 200);
        serde_json::from_slice(&answer.body).expect("JSON")
    }

    #[test]
    fn it_reports_what_the_cluster_and_the_database_answered() {
        let (sql, cluster) = (FakeSql::from_script(""), FakeCluster::new());
        let host = FakeHost::new(&sql, &cluster, "test");
        let missing = post(
            &host,
            "/kube",
            json!({"verb": "get", "api_version": "v1", "kind": "ConfigMap", "namespace": "cf", "name": "x"}),
        );
        assert_eq!(missing["outcome"], "not-found", "{missing}");
        let made = post(
            &host,
            "/kube",
            json!({"verb": "create", "body": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "x", "namespace": "cf"}}}),
        );
        assert_eq!(made["outcome"], "ok", "{made}");
        let listed = post(
            &host,
            "/kube",
            json!({"verb": "list", "api_version": "v1", "kind": "ConfigMap", "namespace": "cf"}),
        );
        assert_eq!(listed["value"], json!(["x"]), "{listed}");
        let bad = post(&host, "/sql", json!({"statement": "SELECT * FROM nowhere"}));
        assert_eq!(bad["outcome"], "failed", "{bad}");
    }
}

#[cfg(target_arch = "wasm32")]
mod wasm {
    struct Hostile;

    impl wasip2::exports::http::incoming_handler::Guest for Hostile {
        fn handle(
            request: wasip2::http::types::IncomingRequest,
            out: wasip2::http::types::ResponseOutparam,
        ) {
            let host = lethe_guest::host::Host::default();
            lethe_guest::wasi_http::serve(request, out, |req| crate::handle(&host, &req));
        }
    }

    wasip2::http::proxy::export!(Hostile);
}
