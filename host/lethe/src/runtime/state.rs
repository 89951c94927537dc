//! The state of one instance: its resource table, WASI and `wasi:http` contexts (no outbound
//! HTTP), its memory limit, and the lethe capabilities it may use.

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::caps::Capabilities;

/// The error an instance traps with when it tries to grow its memory past its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memory limit exceeded: growing to {desired} bytes, the limit is {limit}")]
pub struct MemoryLimitExceeded {
    /// The size the instance asked for.
    pub desired: usize,
    /// Its limit.
    pub limit: usize,
}

/// An instance's limits: memory as [`Limits::memory_bytes`](super::Limits::memory_bytes) says, trapping with
/// [`MemoryLimitExceeded`] rather than failing `memory.grow` (a guest rarely survives that, and
/// the trap names the cause); tables and instance counts as wasmtime's defaults.
struct InstanceLimits {
    memory_bytes: usize,
    others: StoreLimits,
}

impl ResourceLimiter for InstanceLimits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let limit = maximum.map_or(self.memory_bytes, |m| m.min(self.memory_bytes));
        if desired > limit {
            return Err(wasmtime::Error::new(MemoryLimitExceeded { desired, limit }));
        }
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(error.context(MemoryLimitExceeded {
            desired: 0,
            limit: self.memory_bytes,
        }))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.others.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.others.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.others.instances()
    }

    fn tables(&self) -> usize {
        self.others.tables()
    }

    fn memories(&self) -> usize {
        self.others.memories()
    }
}

/// The per-instance state of one request or tick.
pub struct InstanceState {
    /// The instance's resources (WASI streams, HTTP bodies, SQL transactions), shared by every
    /// host interface it imports.
    pub(crate) table: ResourceTable,
    /// Built on first use: most HTTP components never touch WASI's clocks, random, environment or
    /// stdio, and building a context (its random generators above all) and dropping it costs
    /// about half a microsecond per request.
    pub(super) wasi: Option<WasiCtx>,
    http: WasiHttpCtx,
    outbound: NoOutboundHttp,
    limits: InstanceLimits,
    /// The lethe capabilities this instance may use.
    pub(crate) caps: Capabilities,
}

impl InstanceState {
    /// The state of a fresh instance: at most `memory_bytes` of linear memory, and `caps`.
    pub(super) fn new(memory_bytes: usize, caps: Capabilities) -> InstanceState {
        InstanceState {
            // Room for what one HTTP request holds (request, headers, outparam, response, its
            // headers, body and stream) without growing the table on the way.
            table: ResourceTable::with_capacity(16),
            wasi: None,
            http: WasiHttpCtx::new(),
            outbound: NoOutboundHttp,
            limits: InstanceLimits {
                memory_bytes,
                others: StoreLimitsBuilder::new().trap_on_grow_failure(true).build(),
            },
            caps,
        }
    }

    /// The limiter the store applies to this instance.
    pub(super) fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limits
    }
}

impl WasiView for InstanceState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(new_wasi_ctx),
            table: &mut self.table,
        }
    }
}

/// `wasi:io` needs only the resource table; linked through this view, streams and pollables
/// leave the WASI context unbuilt.
impl wasmtime_wasi_io::IoView for InstanceState {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

/// No preopens, no environment, no network: components get only their grants.
fn new_wasi_ctx() -> WasiCtx {
    WasiCtx::builder().inherit_stderr().build()
}

impl WasiHttpView for InstanceState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.outbound,
        }
    }
}

/// Components get no outbound HTTP: the grant check refuses `wasi:http/outgoing-handler`
/// imports at start, and this hook denies any request that could still reach the host.
struct NoOutboundHttp;

impl wasmtime_wasi_http::WasiHttpHooks for NoOutboundHttp {
    // The same headers as the default, without the default's `Arc`ed filter allocated for every
    // header a component sets.
    fn is_forbidden_header(&mut self, name: &http::HeaderName) -> bool {
        wasmtime_wasi_http::DEFAULT_FORBIDDEN_HEADERS.contains(name)
    }

    fn send_request(
        &mut self,
        _request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _response_done: Box<
            dyn std::future::Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send,
        >,
    ) -> Box<
        dyn std::future::Future<
                Output = wasmtime_wasi_http::Result<(
                    http::Response<wasmtime_wasi_http::WasiBody>,
                    Box<
                        dyn std::future::Future<Output = Result<(), wasmtime_wasi_http::Error>>
                            + Send,
                    >,
                )>,
            > + Send,
    > {
        Box::new(std::future::ready(Err(
            wasmtime_wasi_http::Error::HttpRequestDenied,
        )))
    }
}
