//! The same handler in a host that has none of lethe's capabilities: `cf-api` composed at build
//! time with the `wasi-adapter` component (`kube` over `wasi:http`, `log` to stderr, `config` from
//! the environment) runs in a plain wasmtime host that links only WASI 0.2 and `wasi:http`, as
//! `wasmtime serve` and Spin do, against the embedded cluster over plain HTTP.
//!
//! Unlike the other scenario tests this one ignores `KUBECONFIG`: outgoing `wasi:http` requests
//! trust only the public web roots, which neither the embedded cluster's generated CA nor a typical
//! cluster's private CA is, so the test serves its own cluster without TLS.

use std::path::PathBuf;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::Value as Json;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// A host's per-request state with nothing but WASI and `wasi:http`.
struct Plain {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
}

impl WasiView for Plain {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Plain {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: wasmtime_wasi_http::default_hooks(),
        }
    }
}

/// What `wasmtime serve --env K=V … component.wasm` amounts to, minus the socket.
struct PlainHost {
    engine: Engine,
    pre: ProxyPre<Plain>,
    env: Vec<(String, String)>,
}

struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Json {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl PlainHost {
    fn new(component: &std::path::Path, env: Vec<(String, String)>) -> anyhow::Result<PlainHost> {
        let engine = Engine::new(Config::new().wasm_component_model(true))?;
        let component = Component::from_file(&engine, component)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        let pre = ProxyPre::new(linker.instantiate_pre(&component)?)?;
        Ok(PlainHost { engine, pre, env })
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> anyhow::Result<Answer> {
        let mut wasi = WasiCtx::builder();
        wasi.inherit_stderr();
        for (k, v) in &self.env {
            wasi.env(k, v);
        }
        let mut store = Store::new(
            &self.engine,
            Plain {
                table: ResourceTable::new(),
                wasi: wasi.build(),
                http: WasiHttpCtx::new(),
            },
        );
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("http://lethe.test{path}"))
            .header("host", "lethe.test");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default().to_string())))?;
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let incoming = store
            .data_mut()
            .http()
            .new_incoming_request(Scheme::Http, req)?;
        let out = store.data_mut().http().new_response_outparam(sender)?;
        let proxy = self.pre.instantiate_async(&mut store).await?;
        let task = tokio::spawn(async move {
            proxy
                .wasi_http_incoming_handler()
                .call_handle(&mut store, incoming, out)
                .await
        });
        let resp = match receiver.await {
            Ok(resp) => resp.map_err(|code| anyhow::anyhow!("wasi:http error {code:?}"))?,
            Err(_) => {
                task.await??;
                anyhow::bail!("the component set no response")
            }
        };
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await?.to_bytes();
        task.await??;
        Ok(Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

fn composed(name: &str) -> PathBuf {
    PathBuf::from(lethe::COMPONENTS_DIR)
        .join("foreign")
        .join(format!("{name}.wasm"))
}

#[test]
fn only_handlers_the_adapter_can_serve_are_composed() {
    let engine = Engine::new(Config::new().wasm_component_model(true)).expect("engine");
    let component = Component::from_file(&engine, composed("cf_api"))
        .expect("cf-api imports kube, log and config only, so it is composed");
    let imports: Vec<String> = component
        .component_type()
        .imports(&engine)
        .map(|(name, _)| name.to_string())
        .collect();
    // `lethe:platform/types` holds only types, which a host need not supply.
    let foreign: Vec<&String> = imports
        .iter()
        .filter(|name| !name.starts_with("wasi:") && !name.starts_with("lethe:platform/types@"))
        .collect();
    assert!(foreign.is_empty(), "non-WASI imports left: {foreign:?}");
    assert!(
        imports
            .iter()
            .any(|i| i.starts_with("wasi:http/outgoing-handler@"))
    );
    // These import `sql`, which no adapter supplies.
    for name in ["cf_job_status", "cf_reconciler", "data_jobs", "smoke"] {
        assert!(!composed(name).exists(), "{name} must not be composed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cf_api_composed_with_the_adapter_runs_in_a_host_without_lethe_capabilities() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = lethe_apiserver::start(lethe_apiserver::ApiServerConfig {
        data_dir: Some(dir.path().join("cluster")),
        listen: "127.0.0.1:0".parse().expect("addr"),
        tls: false,
        faults: Default::default(),
    })
    .await
    .expect("embedded cluster");
    let admin = cluster.admin_token().to_string();
    cluster.add_token("nobody-token-0123456789", "nobody", "nobody", &[]);
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig_yaml()).expect("kubeconfig");
    let client = lethe_kube::Cluster::from_kubeconfig(&kubeconfig, Default::default())
        .await
        .expect("cluster client");
    for manifest in ["crds.json", "roles.json"] {
        let path = PathBuf::from(lethe::REPO_ROOT)
            .join("components/cf-core/kubernetes")
            .join(manifest);
        lethe::kubernetes_manifests::apply_file(&client, &path)
            .await
            .expect("CF manifests");
    }

    let host = PlainHost::new(
        &composed("cf_api"),
        vec![
            ("LETHE_KUBE_URL".into(), cluster.url().to_string()),
            ("LETHE_KUBE_TOKEN".into(), admin.clone()),
            ("LETHE_VAR_CF_ROOT_NAMESPACE".into(), "cf".into()),
        ],
    )
    .expect("the composed component links against WASI and wasi:http alone");

    // Authentication goes through the adapter's SelfSubjectReview.
    let none = host
        .call("GET", "/v3/organizations", None, None)
        .await
        .expect("call");
    assert_eq!(none.status, 401, "{}", none.body);
    assert_eq!(none.json()["errors"][0]["code"], 10002);
    let bad = host
        .call("GET", "/v3/organizations", Some("not-a-token"), None)
        .await
        .expect("call");
    assert_eq!(bad.status, 401, "{}", bad.body);
    assert_eq!(bad.json()["errors"][0]["code"], 1000);

    // Create, list and read through kube over wasi:http.
    let created = host
        .call(
            "POST",
            "/v3/organizations",
            Some(&admin),
            Some(r#"{"name":"abroad"}"#),
        )
        .await
        .expect("call");
    assert_eq!(created.status, 201, "{}", created.body);
    let guid = created.json()["guid"].as_str().expect("guid").to_string();
    let listed = host
        .call("GET", "/v3/organizations?names=abroad", Some(&admin), None)
        .await
        .expect("call");
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json()["resources"][0]["guid"], guid.as_str());

    // A caller without a role sees nothing: 404, as Cloud Controller answers.
    let hidden = host
        .call(
            "DELETE",
            &format!("/v3/organizations/{guid}"),
            Some("nobody-token-0123456789"),
            None,
        )
        .await
        .expect("call");
    assert_eq!(hidden.status, 404, "{}", hidden.body);

    // The admin's DELETE is accepted as a job once the deletionTimestamp is visible.
    let deleted = host
        .call(
            "DELETE",
            &format!("/v3/organizations/{guid}"),
            Some(&admin),
            None,
        )
        .await
        .expect("call");
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let location = deleted
        .headers
        .get("location")
        .and_then(|v| v.to_str().ok())
        .expect("Location");
    assert!(
        location.ends_with(&format!("/v3/jobs/org.delete~{guid}")),
        "{location}"
    );
    let org = client
        .privileged()
        .get(&lethe_kube::ObjectRef {
            api_version: "cf.lethe.dev/v1alpha1".into(),
            kind: "Org".into(),
            namespace: Some("cf".into()),
            name: guid.clone(),
        })
        .await
        .expect("the org waits for its finalizer");
    assert!(
        org.metadata.deletion_timestamp.is_some(),
        "deletion requested"
    );
    cluster.shutdown().await;
}
