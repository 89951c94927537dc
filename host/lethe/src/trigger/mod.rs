//! The triggers: `[[trigger.http]]` served through `wasi:http/incoming-handler`, and
//! `[[trigger.cron]]` calling Spin's `handle-cron-event`.

pub mod cron;
pub mod http;
pub mod reconcile;

/// Why a component invocation failed, in words an operator can act on.
pub fn describe_failure(error: &wasmtime::Error) -> String {
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        return match trap {
            wasmtime::Trap::Interrupt => "exceeded its time limit".to_string(),
            wasmtime::Trap::UnreachableCodeReached => {
                "trapped (unreachable code: the component panicked or aborted)".to_string()
            }
            other => format!("trapped: {other}"),
        };
    }
    let text = format!("{error:#}");
    if text.contains("memory") && (text.contains("grow") || text.contains("limit")) {
        return format!("exceeded its memory limit: {text}");
    }
    format!("failed: {text}")
}
