//! RFC 3339 timestamps, as Cloud Controller (seconds) and Kubernetes (`Time`, `MicroTime`) write
//! them: the shared implementation in `lethe_guest::env` under the names this crate uses.

pub use lethe_guest::env::{
    format_micro_time as micro_time, format_rfc3339 as rfc3339, parse_rfc3339_ms as parse_rfc3339,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_round_trip() {
        let ms = 1_796_119_200_123; // 2026-12-01T10:00:00.123Z
        assert_eq!(rfc3339(ms), "2026-12-01T10:00:00Z");
        assert_eq!(micro_time(ms), "2026-12-01T10:00:00.123000Z");
        assert_eq!(parse_rfc3339(&micro_time(ms)), Some(ms));
        assert_eq!(parse_rfc3339("2026-12-01T10:00:00Z"), Some(ms - 123));
        assert_eq!(parse_rfc3339("2026-12-01T12:00:00+02:00"), Some(ms - 123));
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn garbage_does_not_parse() {
        assert_eq!(parse_rfc3339(""), None);
        assert_eq!(parse_rfc3339("2026-13-01T10:00:00Z"), None);
        assert_eq!(parse_rfc3339("2026-12-01T10:00:00"), None);
        assert_eq!(parse_rfc3339("2026-12-01T10:00:00.Z"), None);
    }
}
