//! How many requests the server answered, by verb and resource, so that a benchmark can say what
//! a client cost the cluster from the server's side (`GET /lethe/requests`,
//! [`crate::RunningApiServer::requests`]).

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// Requests answered so far, keyed `"<verb> <resource>"`: the verb is the HTTP method, or
/// `WATCH` for a watch; the resource is the plural after `/api/v1` or `/apis/<group>/<version>`
/// (and its namespace), with the subresource when there is one (`cronjobs/status`), or the path
/// itself for anything else (`/api`, `/openapi/v2`).
#[derive(Default)]
pub struct RequestCounts(Mutex<BTreeMap<String, u64>>);

impl RequestCounts {
    /// Counts one request for `path` and `query`.
    pub fn count(&self, method: &http::Method, path: &str, query: Option<&str>) {
        let watch = query.is_some_and(|q| {
            q.split('&')
                .any(|pair| matches!(pair, "watch=true" | "watch=1"))
        });
        let verb = if watch { "WATCH" } else { method.as_str() };
        let key = format!("{verb} {}", resource_of(path));
        *self.0.lock().entry(key).or_default() += 1;
    }

    /// The counts so far.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().clone()
    }
}

/// The resource a path names (see [`RequestCounts`]).
fn resource_of(path: &str) -> String {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", "v1", rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => return path.to_string(),
    };
    let rest = match rest {
        // A namespace's own subresources, not a namespaced collection.
        ["namespaces", _, sub @ ("status" | "finalize")] => {
            return format!("namespaces/{sub}");
        }
        ["namespaces", _, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    match rest {
        [] => path.to_string(),
        [plural] | [plural, _] => (*plural).to_string(),
        [plural, _, sub, ..] => format!("{plural}/{sub}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_verb_and_resource() {
        let counts = RequestCounts::default();
        let get = http::Method::GET;
        counts.count(
            &get,
            "/apis/batch/v1/namespaces/data-jobs/cronjobs",
            Some("limit=500"),
        );
        counts.count(&get, "/apis/batch/v1/namespaces/data-jobs/cronjobs/a", None);
        counts.count(
            &get,
            "/apis/batch/v1/namespaces/data-jobs/cronjobs",
            Some("watch=true&resourceVersion=5"),
        );
        counts.count(
            &http::Method::PUT,
            "/apis/batch/v1/namespaces/x/cronjobs/a/status",
            None,
        );
        counts.count(&get, "/api/v1/namespaces", None);
        counts.count(&get, "/api/v1/namespaces/data-jobs", None);
        counts.count(&get, "/api", None);
        let seen = counts.snapshot();
        assert_eq!(seen["GET cronjobs"], 2);
        assert_eq!(seen["WATCH cronjobs"], 1);
        assert_eq!(seen["PUT cronjobs/status"], 1);
        assert_eq!(seen["GET namespaces"], 2);
        assert_eq!(seen["GET /api"], 1);
    }
}
