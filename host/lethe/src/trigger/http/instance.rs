//! One request in a fresh instance of its component, through the instance runner: the request
//! and its response outparam go into the store, `wasi:http/incoming-handler` is called, and the
//! response head is returned as soon as the component sets it.

use bytes::Bytes;
use http_body_util::Full;
use tracing::Instrument as _;
use wasmtime_wasi_http::WasiHttpView as _;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use super::HttpComponent;
use crate::host_error::HostError;
use crate::runtime::InstanceState;
use crate::runtime::call::{self, BoxFuture, CallFailed, FailureKind};

call::instantiate_through!(ProxyPre<InstanceState> => wasmtime_wasi_http::p2::bindings::Proxy);

/// The answer when a component could not answer itself. Every instance being busy (many slow
/// or long requests at once) says nothing against the request, so it is 503 with `Retry-After`,
/// not the 500 of a component that failed.
pub(super) fn failure(failed: &CallFailed) -> HostError {
    if failed.kind == FailureKind::Busy {
        HostError::Busy
    } else {
        HostError::ComponentFailed
    }
}

pub(super) async fn invoke(
    target: &HttpComponent,
    req: hyper::Request<Full<Bytes>>,
    caller: [u8; 32],
) -> Result<hyper::Response<HyperOutgoingBody>, CallFailed> {
    let component = target.component.clone();
    let mut store = component.new_store();
    store.data_mut().caps.answer_for(caller);
    let (sender, mut receiver) = tokio::sync::oneshot::channel();
    let failed = |e| CallFailed::counted(&target.component, e);
    let incoming = store
        .data_mut()
        .http()
        .new_incoming_request(Scheme::Http, req)
        .map_err(failed)?;
    let out = store
        .data_mut()
        .http()
        .new_response_outparam(sender)
        .map_err(failed)?;
    let pre = target.pre.clone();
    let mut run = Unfinished(Some(Box::pin(async move {
        call::call(&component, &pre, &mut store, |proxy, store| {
            Box::pin(async move {
                proxy
                    .wasi_http_incoming_handler()
                    .call_handle(store, incoming, out)
                    .await
            })
        })
        .await
    })));
    // The instance runs in this task while it can: most components finish their whole response
    // before returning. One that is still running when its response head arrives (it streams a
    // body larger than the channel holds) moves to a task of its own, since the body can only
    // drain once the head is returned to hyper.
    let outcome = tokio::select! {
        biased;
        outcome = run.poll() => outcome,
        Ok(head) = &mut receiver => {
            run.finish_elsewhere();
            return response_or_error(head).map_err(failed);
        }
        // An outparam dropped unset disables the second branch; the instance's outcome says why.
    };
    run.0 = None;
    match receiver.try_recv() {
        Ok(head) => response_or_error(head).map_err(failed),
        Err(_) => match outcome {
            Ok(()) => Err(failed(wasmtime::format_err!(
                "the component returned without setting a response"
            ))),
            Err(e) => Err(e),
        },
    }
}

type InstanceRun = BoxFuture<'static, Result<(), CallFailed>>;

/// An instance's run that has not finished. If the request is abandoned (the client went away
/// and hyper dropped it) the run finishes in a task of its own rather than stopping wherever it
/// was: a component is never cut off between two of its writes by a client's disconnect.
struct Unfinished(Option<InstanceRun>);

impl Unfinished {
    /// Runs the instance until it finishes; must not be called again afterwards.
    async fn poll(&mut self) -> Result<(), CallFailed> {
        match self.0.as_mut() {
            Some(run) => run.await,
            None => Ok(()),
        }
    }

    /// Lets the instance finish in a task of its own.
    fn finish_elsewhere(&mut self) {
        let Some(run) = self.0.take() else {
            return;
        };
        // Outside a runtime (the process is shutting down) there is nothing left to finish on.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // Still inside the request's span, so what it logs carries the request id.
            runtime.spawn(
                async move {
                    if let Err(failed) = run.await {
                        tracing::warn!(
                            "component failed after its response head was sent: {failed}"
                        );
                    }
                }
                .in_current_span(),
            );
        }
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        self.finish_elsewhere();
    }
}

/// What the component passed to `response-outparam.set`.
fn response_or_error(
    head: Result<hyper::Response<HyperOutgoingBody>, ErrorCode>,
) -> wasmtime::Result<hyper::Response<HyperOutgoingBody>> {
    head.map_err(|code| {
        wasmtime::format_err!("the component answered with a wasi:http error: {code:?}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_error::ErrorFormat;

    #[test]
    fn no_free_instance_is_503_with_retry_after_and_other_failures_are_500() {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_core_instances(1)
            .total_memories(1)
            .total_tables(1)
            .max_memory_size(1 << 16);
        let mut config = wasmtime::Config::new();
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        let engine = wasmtime::Engine::new(&config).expect("engine");
        let module = wasmtime::Module::new(&engine, b"\0asm\x01\0\0\0").expect("empty module");
        let mut first = wasmtime::Store::new(&engine, ());
        let _held = wasmtime::Instance::new(&mut first, &module, &[]).expect("first instance");
        let mut second = wasmtime::Store::new(&engine, ());
        let busy = wasmtime::Instance::new(&mut second, &module, &[]).expect_err("pool exhausted");
        let resp = ErrorFormat::Cf.render(&failure(&CallFailed::classified(busy)));
        assert_eq!(resp.status(), 503);
        assert_eq!(
            resp.headers()
                .get(hyper::header::RETRY_AFTER)
                .map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let trap = wasmtime::Error::new(wasmtime::Trap::Interrupt);
        assert_eq!(
            failure(&CallFailed::classified(trap)),
            HostError::ComponentFailed
        );
    }
}
