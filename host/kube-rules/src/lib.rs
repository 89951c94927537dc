//! The Kubernetes API server's own rules, as it applies them and in its words: what the embedded
//! cluster (`lethe-apiserver`) admits, and what components check before they ask, so that they
//! refuse exactly what a real API server would. No I/O, and no other lethe crate: the client side
//! of the kube capability (`lethe-kube-model`) and this crate depend on each other in neither
//! direction.
//!
//! * [`cron`]: which CronJob schedules the API server takes, and its words for the others;
//! * [`validation`]: apimachinery's name, label and port rules, in its words;
//! * [`selector`]: label selectors, parsed and matched as the API server does;
//! * [`patch`]: merge and JSON patches, applied as the API server does.

#![warn(missing_docs)]

pub mod cron;
pub mod patch;
pub mod selector;
pub mod validation;

/// A string as Go's `%q` (`strconv.Quote`) writes it into error messages: JSON-like, but with
/// `\a`, `\v` and `\xNN` for other ASCII control bytes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
