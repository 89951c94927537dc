//! The non-Kubernetes capabilities component logic uses: time, configuration and logging, plus
//! UTC timestamp helpers (Kubernetes and Cloud Controller both speak RFC 3339 in UTC).

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Diagnostics.
    Debug,
    /// Normal operation.
    Info,
    /// Handled surprises.
    Warn,
    /// Failures.
    Error,
}

/// Time, configuration and logging.
pub trait Env {
    /// Wall-clock time in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// Blocks for `ms` milliseconds.
    fn sleep_ms(&self, ms: u64);
    /// A configuration value.
    fn config(&self, key: &str) -> Option<String>;
    /// Writes a log line.
    fn log(&self, level: Level, message: &str);
    /// `n` bytes from a cryptographically secure source.
    fn random_bytes(&self, n: usize) -> Vec<u8>;

    /// A fresh random UUID (version 4), lower-case with dashes, from [`Env::random_bytes`].
    fn new_uuid(&self) -> String {
        let mut b = [0u8; 16];
        for (slot, v) in b.iter_mut().zip(self.random_bytes(16)) {
            *slot = v;
        }
        uuid_from_bytes(b)
    }

    /// Reports that `done` of `total` items of a pass are handled (a host may show a progress
    /// bar); does nothing unless the host implements it.
    fn progress(&self, _done: u64, _total: u64) {}
}

/// A configuration value in seconds, as milliseconds: `default_s` when unset, `Err` naming it
/// when it is set but not a whole number of seconds from 1 to a day.
pub fn seconds_ms(env: &dyn Env, key: &str, default_s: i64) -> Result<i64, String> {
    match env.config(key).filter(|v| !v.is_empty()) {
        None => Ok(default_s * 1000),
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|s| (1..=86_400).contains(s))
            .map(|s| s * 1000)
            .ok_or_else(|| {
                format!("{key} must be a whole number of seconds from 1 to 86400, not {v:?}")
            }),
    }
}

/// Formats 16 random bytes as a version-4 UUID, lower-case with dashes (as Cloud Controller's
/// guids are).
pub fn uuid_from_bytes(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Parses an RFC 3339 timestamp — `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, the forms
/// Kubernetes writes (`Time`, `MicroTime`) — into milliseconds since the epoch.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    // Every valid form is ASCII; checking that first makes every byte offset below a character
    // boundary, so no input can make the slicing panic.
    if !s.is_ascii() {
        return None;
    }
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &s[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded = format!("{:0<3}", &frac[..digits.min(3)]);
        millis = padded.parse::<i64>().ok()?;
        rest = &frac[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let (oh, om) = (num(s.len() - 5..s.len() - 3)?, num(s.len() - 2..s.len())?);
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute - offset_minutes) * 60_000 + second * 1000 + millis)
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (seconds precision, as Cloud
/// Controller renders times).
pub fn format_rfc3339(ms: i64) -> String {
    let (y, m, d, hh, mm, ss, _) = split(ms);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (Kubernetes
/// `MicroTime`, as in Lease times).
pub fn format_micro_time(ms: i64) -> String {
    let (y, m, d, hh, mm, ss, frac) = split(ms);
    format!(
        "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:06}Z",
        frac * 1000
    )
}

fn split(ms: i64) -> (i64, i64, i64, i64, i64, i64, i64) {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    (
        y,
        m,
        d,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms.rem_euclid(1000),
    )
}

// Howard Hinnant's days-from-civil algorithms (proleptic Gregorian calendar).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_known_instants() {
        let ms = parse_rfc3339_ms("2023-06-30T20:58:24Z").expect("valid");
        assert_eq!(ms, 1_688_158_704_000);
        assert_eq!(format_rfc3339(ms), "2023-06-30T20:58:24Z");
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            parse_rfc3339_ms("2024-02-29T00:00:00.5Z"),
            Some(1_709_164_800_500)
        );
        assert_eq!(parse_rfc3339_ms("2023-06-30T22:58:24+02:00"), Some(ms));
        assert_eq!(format_micro_time(ms + 123), "2023-06-30T20:58:24.123000Z");
        assert_eq!(
            parse_rfc3339_ms(&format_micro_time(ms + 123)),
            Some(ms + 123)
        );
    }

    #[test]
    fn rejects_malformed_timestamps() {
        for bad in [
            "",
            "2023-06-30",
            "2023-13-01T00:00:00Z",
            "2023-06-30T20:58:24",
            "2023-06-30T20:58:24+2:00",
            "2023-06-30T20:58:24.Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn non_ascii_input_is_refused_without_panicking() {
        // Multi-byte characters where the parser slices by byte offset: at 19 (before the
        // fraction or zone), inside the fraction, and inside a zone offset.
        for bad in [
            "2023-06-30T20:58:2éZ",
            "2023-06-30T20:58:24éZ",
            "2023-06-30T20:58:24.1é",
            "2023-06-30T20:58:24+0é:0",
            "2023-06-30T20:58:24+00é0",
            "2023-06-30T20:58:24\u{1F600}",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }
}
