//! `lethe:platform/log`: component log lines go to the host's log, tagged with the component id.

use super::CapsView;
use super::bindings::lethe::platform::log::{Host, Level};

/// Longest line kept; longer messages are cut so one component cannot flood the log.
const MAX_LINE: usize = 8 * 1024;

impl Host for CapsView<'_> {
    async fn write(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let message = truncate(&message, MAX_LINE);
        let component = &*self.env.component_id;
        match level {
            Level::Trace => tracing::trace!(component, "{message}"),
            Level::Debug => tracing::debug!(component, "{message}"),
            Level::Info => tracing::info!(component, "{message}"),
            Level::Warn => tracing::warn!(component, "{message}"),
            Level::Error => tracing::error!(component, "{message}"),
        }
        Ok(())
    }

    async fn progress(&mut self, done: u64, total: u64) -> wasmtime::Result<()> {
        if let Some(p) = &self.env.progress {
            p.total.store(total, std::sync::atomic::Ordering::Relaxed);
            p.done
                .store(done.min(total), std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

#[cfg(test)]
mod tests {
    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(super::truncate("héllo", 2), "h");
        assert_eq!(super::truncate("abc", 10), "abc");
    }
}
