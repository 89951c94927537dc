//! Routing, and the non-resource paths: `/version`, `/healthz`, discovery, OpenAPI, OIDC.

use crate::auth::{Attributes, authorize};
use crate::front::authn::authenticate;
use crate::front::resource::{ResourcePath, resource_request};
use crate::front::respond::{Body, full, header_text, respond_value, with_type};
use crate::front::shared::{Query, Shared, all_defs, decode, method_verb};
use crate::resources::{self, CRD_KEY};
use crate::status::{ApiError, Warnings};
use crate::store::Store;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, header};
use hyper::body::Incoming;
use serde_json::{Value, json};

/// The request path from its decoded segments.
fn segs_path(segs: &[String]) -> String {
    format!("/{}", segs.join("/"))
}

/// Routes one authenticated request: `/api/v1/...` and `/apis/<group>/<version>/...` to the
/// resource handler (the deprecated `/watch/` paths as watches), the rest to the non-resource
/// paths, authorized by their URL. 401 without a known token, 404 for unknown paths.
pub(crate) async fn serve(
    shared: &Shared,
    req: Request<Incoming>,
    warnings: &mut Warnings,
) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().to_string();
    let (user, impersonator) = authenticate(shared, req.headers())?;
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let query = Query::parse(req.uri().query());
    // Resource requests.
    let resource_req = match s.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => Some(("", "v1", rest)),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => Some((*g, *v, rest)),
        _ => None,
    };
    if let Some((group, version, rest)) = resource_req {
        let path = ResourcePath {
            group,
            version,
            rest,
        };
        let method = req.method().to_string();
        let answer = resource_request(shared, &user, req, path, &query, warnings).await;
        shared.audit.record(crate::front::audit::AuditEvent {
            user: user.name.clone(),
            impersonated_by: impersonator,
            method,
            path: segs_path(&segs),
            code: match &answer {
                Ok(response) => response.status().as_u16(),
                Err(e) => e.code,
            },
        });
        return answer;
    }
    // Non-resource requests.
    let attrs = Attributes {
        verb: method_verb(req.method()),
        resource_request: false,
        path: path.clone(),
        ..Default::default()
    };
    if !authorize(&shared.store, &user, &attrs) {
        let message = format!("forbidden: {}", attrs.forbidden_reason(&user.name));
        return Err(ApiError::new(403, "Forbidden", message).with_details(Default::default()));
    }
    if req.method() != Method::GET {
        return Err(ApiError::path_not_found());
    }
    let store = &shared.store;
    // Aggregated discovery, which kubectl asks for first (it falls back to the legacy form).
    if let ["api"] | ["apis"] = s.as_slice()
        && let Some(version) = aggregated_discovery_version(req.headers())
    {
        let crds = crd_values(store);
        let groups = resources::groups(&store.custom_defs(), &crds);
        let body = resources::aggregated_discovery(
            s.as_slice() == ["api"],
            &all_defs(store),
            &groups,
            &format!("apidiscovery.k8s.io/{version}"),
        );
        let mut r = respond_value(200, &body);
        if let Ok(ct) = header::HeaderValue::from_str(&format!(
            "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
        )) {
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        return Ok(r);
    }
    let body = match s.as_slice() {
        [] => {
            json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3", "/readyz", "/version"]})
        }
        ["version"] => json!({
            "major": "1", "minor": "32", "gitVersion": "v1.32.0-lethe",
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0", "compiler": "gc",
            "platform": "linux/amd64",
        }),
        ["healthz" | "livez" | "readyz", ..] => {
            return Ok(with_type("text/plain; charset=utf-8", full("ok")));
        }
        ["api"] => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.server_address}],
        }),
        ["api", "v1"] => resources::resource_list("", "v1", &all_defs(store)),
        ["apis"] => {
            let crds = crd_values(store);
            let groups: Vec<Value> = resources::groups(&store.custom_defs(), &crds)
                .iter()
                .map(resources::group_json)
                .collect();
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        ["apis", g] => {
            let crds = crd_values(store);
            let groups = resources::groups(&store.custom_defs(), &crds);
            let Some(gi) = groups.iter().find(|x| x.name == *g) else {
                return Err(ApiError::path_not_found());
            };
            let mut v = resources::group_json(gi);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        }
        ["apis", g, v] => {
            let defs = all_defs(store);
            if !defs.iter().any(|d| d.group == *g && d.version == *v) {
                return Err(ApiError::path_not_found());
            }
            resources::resource_list(g, v, &defs)
        }
        ["openapi", "v2"] => {
            // An empty Swagger 2.0 document: kubectl's client-side validation (used for `List`
            // files) then skips kinds it has no schema for, as it does on a real cluster for
            // custom resources without one.
            let wants_proto = header_text(req.headers(), header::ACCEPT).contains("protobuf");
            if wants_proto {
                let proto = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
                return Ok(with_type(proto, full(openapi_v2_protobuf())));
            }
            json!({
                "swagger": "2.0",
                "info": {"title": "Kubernetes", "version": "v1.32.0"},
                "paths": {},
                "definitions": {},
            })
        }
        ["openapi", "v3"] => resources::openapi_v3_index(&all_defs(store), store.current_rv()),
        ["openapi", "v3", "api", v] => resources::openapi_v3_doc("", v, &all_defs(store))
            .ok_or_else(ApiError::path_not_found)?,
        ["openapi", "v3", "apis", g, v] => resources::openapi_v3_doc(g, v, &all_defs(store))
            .ok_or_else(ApiError::path_not_found)?,
        _ => return Err(ApiError::path_not_found()),
    };
    Ok(respond_value(200, &body))
}

/// The protobuf (gnostic `openapi_v2.Document`) form of an empty Swagger 2.0 document:
/// `swagger: "2.0"` (field 1) and `info: {title: "Kubernetes", version: "v1.32.0"}` (field 2).
fn openapi_v2_protobuf() -> Bytes {
    fn field(num: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(num << 3) | 2, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }
    let info = [field(1, b"Kubernetes"), field(2, b"v1.32.0")].concat();
    Bytes::from([field(1, b"2.0"), field(2, &info)].concat())
}

/// The aggregated-discovery version (`v2` or `v2beta1`) the client prefers, if it asked for one
/// before any plain `application/json`.
fn aggregated_discovery_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    for media in accept.split(',') {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        if !params.contains(&"as=APIGroupDiscoveryList")
            || !params.contains(&"g=apidiscovery.k8s.io")
        {
            if params.first() == Some(&"application/json") || params.first() == Some(&"*/*") {
                return None;
            }
            continue;
        }
        if params.contains(&"v=v2") {
            return Some("v2");
        }
        if params.contains(&"v=v2beta1") {
            return Some("v2beta1");
        }
    }
    None
}

fn crd_values(store: &Store) -> Vec<Value> {
    store.read(|inner| {
        inner
            .entries(CRD_KEY)
            .map(|(_, o)| o.value.clone())
            .collect()
    })
}
