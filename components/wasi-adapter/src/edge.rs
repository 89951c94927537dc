//! What both WASI edges share: the type the component's exports are implemented on (the WASI
//! edge implements them, the Spin edge `sql`), and stderr.

/// The component: every exported interface is implemented on it.
pub(crate) struct Adapter;

/// Writes one line to stderr. Failures are dropped: logging must never fail a component.
pub(crate) fn stderr(line: &str) {
    let stream = wasip2::cli::stderr::get_stderr();
    // `blocking-write-and-flush` takes at most 4096 bytes per call.
    for chunk in line.as_bytes().chunks(4096) {
        if stream.blocking_write_and_flush(chunk).is_err() {
            return;
        }
    }
}
