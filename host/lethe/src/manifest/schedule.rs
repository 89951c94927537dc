//! Spin's cron expressions for `[[trigger.cron]]`: six fields, seconds first, UTC.
//!
//! Parsed when the manifest is loaded, so a malformed schedule is refused at start.

use std::str::FromStr as _;

use anyhow::{Context as _, bail};

/// Parses a Spin cron expression: exactly six fields, seconds first.
pub fn parse(expression: &str) -> anyhow::Result<cron::Schedule> {
    let fields = expression.split_whitespace().count();
    if fields != 6 {
        bail!(
            "cron expression `{expression}` has {fields} fields; Spin's cron trigger needs 6 (seconds first)"
        );
    }
    cron::Schedule::from_str(expression)
        .with_context(|| format!("invalid cron expression `{expression}`"))
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    #[test]
    fn six_field_expressions_parse() {
        let s = parse("*/2 * * * * *").expect("valid");
        let mut upcoming = s.upcoming(Utc);
        let a = upcoming.next().expect("tick");
        let b = upcoming.next().expect("tick");
        assert_eq!((b - a).num_seconds(), 2);
    }

    #[test]
    fn five_and_seven_field_expressions_are_rejected() {
        assert!(parse("* * * * *").is_err());
        assert!(parse("0 0 * * * * 2030").is_err());
        assert!(parse("61 * * * * *").is_err());
    }
}
