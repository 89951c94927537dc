//! `resource.Quantity` as the API server reads it (a JSON string, surrounding spaces trimmed as
//! its decoding trims them): the embedded cluster compares and adds requests and limits with it,
//! and data-jobs refuses a resource a cluster would refuse.

/// A `resource.Quantity` in units of 10^-9, enough to compare and add requests and limits.
pub fn parse_quantity(s: &str) -> Option<i128> {
    let s = s.trim();
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_end);
    let (neg, num) = match num.as_bytes().first() {
        Some(b'-') => (true, &num[1..]),
        Some(b'+') => (false, &num[1..]),
        _ => (false, num),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    // Mantissa scaled by 10^9 (fractions finer than that are rounded up, as Quantity does).
    // Quantities too large for an i128 saturate (they only need to compare and add).
    let mut nanos: i128 = 0;
    for c in int.bytes() {
        nanos = nanos
            .saturating_mul(10)
            .saturating_add(i128::from(c - b'0'));
    }
    nanos = nanos.saturating_mul(1_000_000_000);
    let mut scale: i128 = 100_000_000;
    let mut rest = false;
    for c in frac.bytes() {
        if scale == 0 {
            rest |= c != b'0';
            continue;
        }
        nanos = nanos.saturating_add(i128::from(c - b'0') * scale);
        scale /= 10;
    }
    if rest {
        nanos = nanos.saturating_add(1);
    }
    let pow10 = |n: i128, e: i64| -> i128 {
        let Ok(abs) = u32::try_from(e.unsigned_abs()) else {
            return if e >= 0 {
                n.signum() * i128::MAX
            } else {
                n.signum()
            };
        };
        match (e >= 0, 10i128.checked_pow(abs)) {
            (true, Some(m)) => n.saturating_mul(m),
            (true, None) => n.signum() * i128::MAX,
            // Rounded up, as Quantity rounds to nanos.
            (false, Some(d)) => n / d + i128::from(n % d != 0),
            (false, None) => n.signum(),
        }
    };
    let v = match suffix {
        "" => nanos,
        "n" => pow10(nanos, -9),
        "u" => pow10(nanos, -6),
        "m" => pow10(nanos, -3),
        "k" => pow10(nanos, 3),
        "M" => pow10(nanos, 6),
        "G" => pow10(nanos, 9),
        "T" => pow10(nanos, 12),
        "P" => pow10(nanos, 15),
        "E" => pow10(nanos, 18),
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let shift = 10 * (1 + "KMGTPE".find(&suffix[..1])? as u32);
            nanos.saturating_mul(1i128 << shift)
        }
        e if e.starts_with(['e', 'E']) => pow10(nanos, e[1..].parse().ok()?),
        _ => return None,
    };
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_compare_across_units() {
        assert_eq!(parse_quantity("100m"), parse_quantity("0.1"));
        assert_eq!(parse_quantity("1Gi"), parse_quantity("1073741824"));
        assert_eq!(parse_quantity("1k"), parse_quantity("1e3"));
        assert_eq!(parse_quantity("1.5"), Some(1_500_000_000));
        assert_eq!(parse_quantity("abc"), None);
        assert_eq!(parse_quantity("1Xi"), None);
    }

    #[test]
    fn extreme_quantities_saturate_instead_of_overflowing() {
        // Tiny values round up to a nano, as Quantity does; huge ones saturate.
        assert_eq!(parse_quantity("1e-2147483648"), Some(1));
        assert_eq!(parse_quantity("1e-40"), Some(1));
        assert_eq!(parse_quantity("0e-40"), Some(0));
        assert_eq!(parse_quantity("1e2147483647"), Some(i128::MAX));
        assert_eq!(
            parse_quantity("170141183460469231731687303715.9"),
            Some(i128::MAX)
        );
        assert_eq!(parse_quantity(&"9".repeat(100)), Some(i128::MAX));
        assert_eq!(
            parse_quantity("170141183460469231731687303715.884105727n"),
            Some(170_141_183_460_469_231_731_687_303_716)
        );
    }
}
