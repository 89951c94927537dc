//! The one backoff formula of lethe's reconcilers: how long an item that keeps failing waits
//! before it is tried again.

/// The wait before the next attempt at an item that failed `attempts` times in a row (at least
/// 1): `base_ms` doubled per failure after the first, capped at `max_ms`, plus up to a quarter
/// more from `jitter` (0..=255, fresh per failure) so that items failing together do not retry
/// together.
pub fn delay_ms(attempts: u32, base_ms: i64, max_ms: i64, jitter: u8) -> i64 {
    let exponent = attempts.saturating_sub(1).min(30);
    let delay = base_ms.saturating_mul(1i64 << exponent).min(max_ms).max(0);
    delay + delay * i64::from(jitter) / 1024
}

#[cfg(test)]
mod tests {
    use super::delay_ms;

    #[test]
    fn the_delay_doubles_is_capped_and_jitters_by_at_most_a_quarter() {
        assert_eq!(delay_ms(1, 1000, 300_000, 0), 1000);
        assert_eq!(delay_ms(2, 1000, 300_000, 0), 2000);
        assert_eq!(delay_ms(5, 1000, 300_000, 0), 16_000);
        assert_eq!(delay_ms(40, 1000, 300_000, 0), 300_000);
        assert_eq!(delay_ms(0, 2000, 300_000, 0), 2000);
        assert!(delay_ms(3, 1000, 300_000, 255) <= 4000 * 5 / 4);
        assert!(delay_ms(3, 1000, 300_000, 255) > 4000);
    }
}
