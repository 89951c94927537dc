//! The WebAssembly edges: `wasi:http/incoming-handler`, `spin:cron` and the host capabilities.

use crate::{CapError, Capabilities, Param};

wit_bindgen::generate!({
    path: "../../wit",
    world: "lethe:platform/smoke",
    // `kube` is served by the guest SDK's host, so its calls come from one set of bindings.
    with: {
        "lethe:platform/kube@0.1.0": lethe_guest::host::bindings::lethe::platform::kube,
    },
    generate_all,
});

use lethe::platform::{config, sql};

struct Host;

impl Capabilities for Host {
    fn query(&self, statement: &str, params: &[Param]) -> Result<Vec<Vec<Param>>, CapError> {
        let params: Vec<sql::Value> = params.iter().map(to_value).collect();
        let rows = sql::query(statement, &params).map_err(to_cap_error)?;
        Ok(rows
            .rows
            .into_iter()
            .map(|r| r.into_iter().map(from_value).collect())
            .collect())
    }

    fn execute(&self, statement: &str, params: &[Param]) -> Result<u64, CapError> {
        let params: Vec<sql::Value> = params.iter().map(to_value).collect();
        sql::execute(statement, &params).map_err(to_cap_error)
    }

    fn config(&self, key: &str) -> Option<String> {
        config::get(key).ok()
    }
}

fn to_value(p: &Param) -> sql::Value {
    match p {
        Param::Null => sql::Value::Null,
        Param::Int(i) => sql::Value::Integer(*i),
        Param::Text(t) => sql::Value::Text(t.clone()),
    }
}

fn from_value(v: sql::Value) -> Param {
    match v {
        sql::Value::Integer(i) => Param::Int(i),
        sql::Value::Text(t) => Param::Text(t),
        sql::Value::Boolean(b) => Param::Int(b.into()),
        sql::Value::Real(f) => Param::Text(f.to_string()),
        sql::Value::Null | sql::Value::Blob(_) => Param::Null,
    }
}

fn to_cap_error(e: sql::Error) -> CapError {
    match e {
        sql::Error::ConstraintViolation(c) => CapError::Constraint(c),
        other => CapError::Failed(format!("{other:?}")),
    }
}

struct Smoke;

impl wasip2::exports::http::incoming_handler::Guest for Smoke {
    fn handle(
        request: wasip2::http::types::IncomingRequest,
        out: wasip2::http::types::ResponseOutparam,
    ) {
        let kube = lethe_guest::host::Host::default();
        lethe_guest::wasi_http::serve(request, out, |req| crate::handle(&Host, &kube, &req));
    }
}

impl Guest for Smoke {
    /// `spin:cron`'s export is an `async func`; the body is synchronous.
    ///
    /// For the host's containment tests, the configuration value `cron_tick = "spin"` makes a
    /// tick loop forever instead (the host's time limit must stop it).
    async fn handle_cron_event(
        metadata: spin::cron::cron_types::Metadata,
    ) -> Result<(), spin::cron::cron_types::Error> {
        if config::get("cron_tick").is_ok_and(|v| v == "spin") {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        crate::record_tick(&Host, metadata.timestamp)
            .map_err(|e| spin::cron::cron_types::Error::Other(format!("{e:?}")))
    }
}

wasip2::http::proxy::export!(Smoke);
export!(Smoke);
