//! lethe's one retry policy, used by everything that retries: the host's Kubernetes client
//! (`lethe-kube`), the `wasi-adapter` component's, the host's start-up (applying its manifests,
//! waiting for a ServiceAccount token) and SQL (`lethe-sql`).
//!
//! It owns four things and no I/O, so it builds natively and for `wasm32-wasip2`, and each
//! caller keeps only its own sleeping and its own way of sending:
//!
//! * [`Policy`]: bounded exponential backoff with full jitter, and a server's `Retry-After`
//!   capped by the same ceiling;
//! * [`Budget`]: how many failures and how many throttling answers one call waits out, and
//!   whether the next delay still fits in the caller's time;
//! * [`parse_retry_after`]: `Retry-After` as delay-seconds or an HTTP date;
//! * [`may_repeat`]: the safe-retry verdict. An attempt that provably applied nothing may always
//!   be repeated; one whose effect is unknown only when the call is [`Safety::Repeatable`].
//!
//! Callers supply the randomness for jitter (`random: u64`) so that the policy is a pure
//! function; the host draws it from `rand`, a component from `wasi:random`.

#![warn(missing_docs)]

use std::time::{Duration, SystemTime};

/// Bounded exponential backoff with full jitter, and the budgets of one call.
///
/// After the `n`th failure (1-based) a caller waits a time drawn uniformly from
/// `[0, min(max_delay, base_delay * 2^(n-1))]`, or, when the server sent `Retry-After`, the
/// server's delay capped at `max_delay`. Failures end the call after `max_attempts` attempts in
/// all (`0` counts as `1`). Throttling answers (HTTP 429) are counted apart, up to
/// `max_throttled` of them: the server applied nothing and asked the client to come back, so being
/// throttled does not use up the budget for failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Number of attempts, including the first, that may end in a failure other than throttling.
    pub max_attempts: u32,
    /// Number of throttling answers waited out before the call gives up.
    pub max_throttled: u32,
    /// The backoff ceiling before the first retry.
    pub base_delay: Duration,
    /// The largest backoff, and the cap on a server's `Retry-After`.
    pub max_delay: Duration,
}

impl Default for Policy {
    /// Ten attempts and ten 429s (client-go retries up to ten times too), 100 ms base, 5 s cap.
    /// A storm of 20 % 5xx and 20 % 429 then fails about one call in a million.
    fn default() -> Self {
        Policy {
            max_attempts: 10,
            max_throttled: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl Policy {
    /// A policy that never retries.
    pub const fn none() -> Policy {
        Policy {
            max_attempts: 1,
            max_throttled: 1,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        }
    }

    /// A policy bounded by time alone: the caller passes its time left to [`Budget::next`], and
    /// attempts are not counted.
    pub const fn until_deadline(base_delay: Duration, max_delay: Duration) -> Policy {
        Policy {
            max_attempts: u32::MAX,
            max_throttled: u32::MAX,
            base_delay,
            max_delay,
        }
    }

    /// The number of attempts to make, at least 1.
    pub fn attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }

    /// The backoff ceiling after failure `failures` (1-based), before jitter.
    pub fn ceiling(&self, failures: u32) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(31);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// The delay after failure `failures`: the server's `retry_after` capped at `max_delay` when
    /// given, else full jitter over [`ceiling`](Self::ceiling) drawn from `random`, so that many
    /// clients failing together do not retry together.
    pub fn delay(&self, failures: u32, retry_after: Option<Duration>, random: u64) -> Duration {
        if let Some(server) = retry_after {
            return server.min(self.max_delay);
        }
        let nanos = u64::try_from(self.ceiling(failures).as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(random % nanos.saturating_add(1))
    }
}

/// Why an attempt is to be made again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setback {
    /// A failure: an error answer, a transport error, a timeout.
    Failed,
    /// The server throttled the call (HTTP 429).
    Throttled,
}

/// The budget of one call under a [`Policy`]: counts its setbacks and says how long to wait
/// before the next attempt, or that there is none.
#[derive(Debug, Clone)]
pub struct Budget {
    policy: Policy,
    failed: u32,
    throttled: u32,
}

impl Budget {
    /// A fresh budget.
    pub fn new(policy: Policy) -> Budget {
        Budget {
            policy,
            failed: 0,
            throttled: 0,
        }
    }

    /// Counts `setback`, and returns the delay before the next attempt, or `None` when the call
    /// must give up: its failures or its throttling answers are used up, or the delay would not
    /// end before `time_left` does (a retry that cannot finish in the caller's time is not
    /// started, so the caller gets the failure while it can still answer). Backoff grows with the
    /// failures; a server's `retry_after` is waited as asked, within the cap.
    pub fn next(
        &mut self,
        setback: Setback,
        retry_after: Option<Duration>,
        time_left: Option<Duration>,
        random: u64,
    ) -> Option<Duration> {
        match setback {
            Setback::Failed => self.failed = self.failed.saturating_add(1),
            Setback::Throttled => self.throttled = self.throttled.saturating_add(1),
        }
        if self.failed >= self.policy.attempts()
            || self.throttled >= self.policy.max_throttled.max(1)
        {
            return None;
        }
        let delay = self.policy.delay(self.failed.max(1), retry_after, random);
        if time_left.is_some_and(|left| delay >= left) {
            return None;
        }
        Some(delay)
    }

    /// The setbacks counted so far: the attempts made that did not succeed.
    pub fn attempts(&self) -> u32 {
        self.failed.saturating_add(self.throttled)
    }

    /// The throttling answers counted so far.
    pub fn throttled(&self) -> u32 {
        self.throttled
    }
}

/// `Retry-After` as delay-seconds or an HTTP date (RFC 9110 §10.2.3), as the wait from `now`.
/// A date in the past is no wait; anything else (negative numbers, words, bytes that are not
/// text) is `None`, and the caller's own backoff applies.
pub fn parse_retry_after(value: &[u8], now: SystemTime) -> Option<Duration> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only, so a parse failure is an overflow: wait as long as allowed.
        return Some(Duration::from_secs(text.parse::<u64>().unwrap_or(u64::MAX)));
    }
    let when = httpdate::parse_http_date(text).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Whether repeating a call can change what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Safety {
    /// Reads, deletes, merge patches and guarded writes: doing them twice is doing them once.
    Repeatable,
    /// Creates and unguarded writes: a second attempt may apply them twice.
    Unsafe,
}

/// What a failed attempt may have done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Provably nothing: the request was never sent, or the server refused it before acting
    /// (throttled, a serialization failure that rolled back).
    Nothing,
    /// Perhaps something: the server failed while acting, or the connection broke after the
    /// request was sent.
    Unknown,
}

/// The safe-retry verdict: an attempt that applied nothing may be made again; one whose effect
/// is unknown only when the call is [`Safety::Repeatable`]. (A failure that a repeat would meet
/// again, such as a refusal or a bad request, is never retried and is not asked about.)
pub fn may_repeat(safety: Safety, effect: Effect) -> bool {
    effect == Effect::Nothing || safety == Safety::Repeatable
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            max_attempts: 4,
            max_throttled: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(50),
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_full_jitter() {
        let p = policy();
        assert_eq!(p.ceiling(1), Duration::from_millis(10));
        assert_eq!(p.ceiling(3), Duration::from_millis(40));
        assert_eq!(p.ceiling(9), Duration::from_millis(50));
        assert_eq!(p.ceiling(u32::MAX), Duration::from_millis(50));
        for failures in 1..10 {
            for random in [0, 1, 12_345_678_901, u64::MAX] {
                assert!(p.delay(failures, None, random) <= p.ceiling(failures));
            }
        }
        assert_eq!(p.delay(1, None, 0), Duration::ZERO);
        assert_ne!(p.delay(3, None, 12_345_678), p.delay(3, None, 87_654_321));
        let zero = Policy {
            base_delay: Duration::ZERO,
            ..p
        };
        assert_eq!(zero.delay(2, None, u64::MAX), Duration::ZERO);
    }

    #[test]
    fn a_servers_retry_after_is_waited_within_the_cap() {
        let p = policy();
        let asked = Some(Duration::from_millis(20));
        assert_eq!(p.delay(1, asked, 7), Duration::from_millis(20));
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3600)), 7),
            Duration::from_millis(50)
        );
    }

    #[test]
    fn failures_and_throttling_have_budgets_of_their_own() {
        let mut b = Budget::new(policy());
        // Three failures are retried; the fourth attempt's failure ends the call.
        for _ in 0..3 {
            assert!(b.next(Setback::Failed, None, None, 1).is_some());
        }
        // Throttling does not use up the failures' budget, and has its own of three.
        assert!(b.next(Setback::Throttled, None, None, 1).is_some());
        assert!(b.next(Setback::Throttled, None, None, 1).is_some());
        assert_eq!(b.next(Setback::Throttled, None, None, 1), None);
        assert_eq!(b.attempts(), 6);
        assert_eq!(b.throttled(), 3);
        let mut b = Budget::new(policy());
        for _ in 0..3 {
            assert!(b.next(Setback::Failed, None, None, 1).is_some());
        }
        assert_eq!(b.next(Setback::Failed, None, None, 1), None);
        assert_eq!(b.attempts(), 4);
    }

    #[test]
    fn backoff_grows_with_failures_not_with_throttling() {
        let mut b = Budget::new(policy());
        let max = u64::MAX - 1;
        // The first throttle without Retry-After backs off as after one failure.
        assert_eq!(
            b.next(Setback::Throttled, None, None, max),
            Some(Duration::from_nanos(max % 10_000_001))
        );
        b.next(Setback::Failed, None, None, 0);
        b.next(Setback::Failed, None, None, 0);
        // Two failures: the ceiling is 20 ms, whatever the throttling answers before.
        let d = b.next(Setback::Throttled, None, None, 20_000_000);
        assert_eq!(d, Some(Duration::from_millis(20)));
    }

    #[test]
    fn a_retry_that_would_outlast_the_callers_time_is_not_started() {
        let mut b = Budget::new(policy());
        let asked = Some(Duration::from_millis(30));
        assert_eq!(
            b.next(
                Setback::Throttled,
                asked,
                Some(Duration::from_millis(31)),
                0
            ),
            Some(Duration::from_millis(30))
        );
        assert_eq!(
            b.next(
                Setback::Throttled,
                asked,
                Some(Duration::from_millis(30)),
                0
            ),
            None
        );
        let mut b = Budget::new(Policy::until_deadline(
            Duration::from_millis(1),
            Duration::from_millis(1),
        ));
        for _ in 0..10_000 {
            assert!(
                b.next(Setback::Failed, None, Some(Duration::from_secs(1)), 5)
                    .is_some()
            );
        }
        assert_eq!(b.next(Setback::Failed, None, Some(Duration::ZERO), 0), None);
    }

    #[test]
    fn a_policy_of_none_never_retries() {
        let mut b = Budget::new(Policy::none());
        assert_eq!(b.next(Setback::Failed, None, None, 0), None);
        let mut b = Budget::new(Policy {
            max_attempts: 0,
            max_throttled: 0,
            ..policy()
        });
        assert_eq!(b.next(Setback::Throttled, None, None, 0), None);
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 21 Oct 2015 07:28:00
        assert_eq!(parse_retry_after(b"3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(b" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(b"99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            parse_retry_after(b"Wed, 21 Oct 2015 07:28:10 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after(b"Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        for bad in [&b"soon"[..], b"-1", b"", b"1.5", &[0xff]] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn only_a_repeatable_call_is_repeated_when_its_effect_is_unknown() {
        assert!(may_repeat(Safety::Unsafe, Effect::Nothing));
        assert!(may_repeat(Safety::Repeatable, Effect::Nothing));
        assert!(may_repeat(Safety::Repeatable, Effect::Unknown));
        assert!(!may_repeat(Safety::Unsafe, Effect::Unknown));
    }
}
