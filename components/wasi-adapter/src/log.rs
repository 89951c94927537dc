//! `lethe:platform/log` as lines on stderr.
//!
//! Hosts such as Spin and `wasmtime serve` collect a component's stderr into their own log, so one
//! line per call is all a component's output needs to be readable there.

use crate::bindings::exports::lethe::platform::log::Level;

/// The longest message kept, as on the lethe host: one component cannot flood the log.
pub const MAX_MESSAGE: usize = 8 * 1024;

/// The tag a level is written with.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::Trace => "trace",
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    }
}

/// The stderr line for one message, newline included: `[info] message`.
///
/// Line breaks and other control characters are escaped, so that a message is always one line
/// and cannot forge lines that look as if they came from elsewhere.
pub fn line(level: Level, message: &str) -> String {
    let message = truncate(message, MAX_MESSAGE);
    let mut out = String::with_capacity(message.len() + 10);
    out.push('[');
    out.push_str(level_name(level));
    out.push_str("] ");
    for c in message.chars() {
        if c.is_control() && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('\n');
    out
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// Throttles `progress` lines: components may report every item, but a line is written only when
/// the whole percentage (or the total) changes, so a pass costs at most about a hundred lines.
#[derive(Debug, Default)]
pub struct Progress {
    last: Option<(u64, u64)>,
}

impl Progress {
    /// The line to write for `done` of `total`, or `None` when it would repeat the last one's
    /// percentage.
    pub fn line(&mut self, done: u64, total: u64) -> Option<String> {
        let done = done.min(total);
        let percent = if total == 0 {
            100
        } else {
            // u128: `done * 100` must not overflow for any u64.
            (u128::from(done) * 100 / u128::from(total)) as u64
        };
        if self.last == Some((total, percent)) {
            return None;
        }
        self.last = Some((total, percent));
        Some(format!("progress {done}/{total}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_tagged_and_single() {
        assert_eq!(line(Level::Info, "hello"), "[info] hello\n");
        assert_eq!(
            line(Level::Warn, "a\nb\r\u{1b}"),
            "[warn] a\\nb\\r\\u{1b}\n"
        );
        assert_eq!(line(Level::Error, "tab\tok"), "[error] tab\tok\n");
        assert_eq!(line(Level::Trace, ""), "[trace] \n");
        assert_eq!(level_name(Level::Debug), "debug");
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_MESSAGE);
        let l = line(Level::Info, &long);
        assert!(l.len() <= MAX_MESSAGE + "[info] \n".len());
        assert!(l.ends_with("é\n"));
    }

    #[test]
    fn progress_is_throttled_by_percentage() {
        let mut p = Progress::default();
        let written: Vec<_> = (0..=1000).filter_map(|d| p.line(d, 1000)).collect();
        assert_eq!(written.len(), 101);
        assert_eq!(written[0], "progress 0/1000\n");
        assert_eq!(written[100], "progress 1000/1000\n");
        // A new pass (or a new total) starts reporting again.
        assert_eq!(p.line(0, 1000).as_deref(), Some("progress 0/1000\n"));
        assert_eq!(p.line(0, 5).as_deref(), Some("progress 0/5\n"));
        assert_eq!(p.line(9, 5).as_deref(), Some("progress 5/5\n"));
        assert_eq!(p.line(0, 0).as_deref(), Some("progress 0/0\n"));
        assert_eq!(
            p.line(u64::MAX - 1, u64::MAX).as_deref(),
            Some("progress 18446744073709551614/18446744073709551615\n")
        );
    }
}
