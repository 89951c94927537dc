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

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(super::truncate("héllo", 2), "h");
        assert_eq!(super::truncate("abc", 10), "abc");
    }
}
