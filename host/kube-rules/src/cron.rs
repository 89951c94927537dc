//! CronJob schedules, checked as the real server checks them: with the parser of
//! `github.com/robfig/cron/v3` in its standard form (five fields or a `@` descriptor), whose error
//! text becomes the `spec.schedule` cause.

/// One field's range and the names it accepts.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

impl Bounds {
    /// A field of plain numbers from `min` to `max`.
    const fn numbers(min: u64, max: u64) -> Bounds {
        Bounds {
            min,
            max,
            names: &[],
        }
    }
}

const MINUTES: Bounds = Bounds::numbers(0, 59);
const HOURS: Bounds = Bounds::numbers(0, 23);
const DAYS_OF_MONTH: Bounds = Bounds::numbers(1, 31);
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

const DESCRIPTORS: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Why `spec` is not a schedule, in the parser's words; `None` if it is one.
pub fn schedule_error(spec: &str) -> Option<String> {
    if spec.is_empty() {
        return Some("empty spec string".into());
    }
    let mut spec = spec;
    // A time-zone prefix is taken off before parsing (the API's own check refuses it after).
    if (spec.starts_with("TZ=") || spec.starts_with("CRON_TZ="))
        && let Some((_, rest)) = spec.split_once(' ')
    {
        spec = rest.trim();
    }
    if spec.starts_with('@') {
        return descriptor_error(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let bounds = [MINUTES, HOURS, DAYS_OF_MONTH, MONTHS, DAYS_OF_WEEK];
    fields.iter().zip(&bounds).find_map(|(field, bounds)| {
        field
            .split(',')
            .filter(|e| !e.is_empty())
            .find_map(|expr| range_error(expr, bounds))
    })
}

/// Why the API server refuses `spec` as a CronJob's `spec.schedule`, each reason as one
/// `Invalid value` cause says it: the parser's error, and a time zone given in the schedule
/// rather than in `spec.timeZone`. Empty when the schedule is taken.
pub fn cronjob_schedule_errors(spec: &str) -> Vec<String> {
    let mut errors: Vec<String> = schedule_error(spec).into_iter().collect();
    if spec.contains("TZ") {
        errors.push("cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into());
    }
    errors
}

/// Why `spec` is not a plain schedule, which a client that writes CronJobs for its users may
/// ask for beyond what the API server takes: five fields or one of the fixed descriptors (no
/// `@every`), each step within its field's range (a larger one matches only the range's start,
/// which is surely not what was meant). `None` if it is one; the server's own reasons first.
pub fn plain_schedule_error(spec: &str) -> Option<String> {
    if let Some(why) = schedule_error(spec) {
        return Some(why);
    }
    if spec.starts_with('@') {
        return (!DESCRIPTORS.contains(&spec))
            .then(|| format!("only the fixed descriptors are taken, not {spec}"));
    }
    let bounds = [MINUTES, HOURS, DAYS_OF_MONTH, MONTHS, DAYS_OF_WEEK];
    spec.split_whitespace()
        .zip(&bounds)
        .flat_map(|(field, bounds)| field.split(',').map(move |expr| (expr, bounds)))
        .find_map(|(expr, bounds)| {
            let step = expr.split_once('/')?.1;
            let beyond = step.parse::<u64>().map_or(true, |n| n > bounds.max);
            beyond.then(|| format!("step {step} is beyond the field's range: {expr}"))
        })
}

fn descriptor_error(spec: &str) -> Option<String> {
    if DESCRIPTORS.contains(&spec) {
        return None;
    }
    match spec.strip_prefix("@every ") {
        Some(duration) => {
            duration_error(duration).map(|e| format!("failed to parse duration {spec}: time: {e}"))
        }
        None => Some(format!("unrecognized descriptor: {spec}")),
    }
}

/// One comma-separated part of a field: `*`, `?`, `N`, `N-M`, each with an optional `/step`.
fn range_error(expr: &str, bounds: &Bounds) -> Option<String> {
    let parts: Vec<&str> = expr.split('/').collect();
    let ends: Vec<&str> = parts[0].split('-').collect();
    let (start, mut end) = if matches!(ends[0], "*" | "?") {
        (bounds.min, bounds.max)
    } else {
        let start = match number_or_name(ends[0], bounds) {
            Ok(n) => n,
            Err(e) => return Some(e),
        };
        match ends.len() {
            1 => (start, start),
            2 => match number_or_name(ends[1], bounds) {
                Ok(end) => (start, end),
                Err(e) => return Some(e),
            },
            _ => return Some(format!("too many hyphens: {expr}")),
        }
    };
    let step = match parts.len() {
        1 => 1,
        2 => {
            let step = match number(parts[1]) {
                Ok(n) => n,
                Err(e) => return Some(e),
            };
            // `N/step` runs from N to the field's end.
            if ends.len() == 1 {
                end = bounds.max;
            }
            step
        }
        _ => return Some(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        Some(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ))
    } else if end > bounds.max {
        Some(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ))
    } else if start > end {
        Some(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ))
    } else if step == 0 {
        Some(format!("step of range should be a positive number: {expr}"))
    } else {
        None
    }
}

fn number_or_name(text: &str, bounds: &Bounds) -> Result<u64, String> {
    let lower = text.to_ascii_lowercase();
    match bounds.names.iter().find(|(name, _)| *name == lower) {
        Some((_, n)) => Ok(*n),
        None => number(text),
    }
}

/// `strconv.Atoi`, refusing negatives, with the parser's messages.
fn number(text: &str) -> Result<u64, String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {text}: strconv.Atoi: parsing {}: invalid syntax",
            crate::go_quote(text)
        ));
    }
    let Ok(n) = text.parse::<i64>() else {
        return Err(format!(
            "failed to parse int from {text}: strconv.Atoi: parsing {}: value out of range",
            crate::go_quote(text)
        ));
    };
    u64::try_from(n).map_err(|_| format!("negative number ({n}) not allowed: {text}"))
}

/// Why `text` is not a Go `time.Duration` (`1h30m`, `90s`, `1.5h`), in `time.ParseDuration`'s
/// words without its `time: ` prefix.
fn duration_error(text: &str) -> Option<String> {
    let quoted = crate::go_quote(text);
    let invalid = || Some(format!("invalid duration {quoted}"));
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    if body == "0" {
        return None;
    }
    if body.is_empty() {
        return invalid();
    }
    let mut rest = body;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return invalid();
        }
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        if unit.is_empty() {
            return Some(format!("missing unit in duration {quoted}"));
        }
        if !matches!(unit, "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h") {
            return Some(format!(
                "unknown unit {} in duration {quoted}",
                crate::go_quote(unit)
            ));
        }
        rest = &rest[unit_end..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_schedules_and_descriptors_parse() {
        for ok in [
            "*/5 * * * *",
            "0 0 1 1 *",
            "0-30/10 9-17 * jan-MAR mon-fri",
            "5,10,15 * ? * SUN",
            "@hourly",
            "@every 1h30m",
            "TZ=UTC 0 * * * *",
        ] {
            assert_eq!(schedule_error(ok), None, "{ok}");
        }
    }

    #[test]
    fn a_plain_schedule_has_no_every_and_no_step_beyond_its_range() {
        for ok in [
            "*/5 * * * *",
            "0 3 * * MON-FRI",
            "@hourly",
            "*/59 */23 * */12 */6",
        ] {
            assert_eq!(plain_schedule_error(ok), None, "{ok}");
        }
        for bad in [
            "@every 5m",
            "*/60 * * * *",
            "*/99999999999 * * * *",
            "0 0 * * */7",
            "61 * * * *",
        ] {
            assert!(plain_schedule_error(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn bad_schedules_get_the_parsers_words() {
        let cases = [
            ("", "empty spec string"),
            ("foo", "expected exactly 5 fields, found 1: [foo]"),
            (
                "* * * *  * *",
                "expected exactly 5 fields, found 6: [* * * * * *]",
            ),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("*/2/3 * * * *", "too many slashes: */2/3"),
            (
                "a * * * *",
                "failed to parse int from a: strconv.Atoi: parsing \"a\": invalid syntax",
            ),
            (
                "* * * foo *",
                "failed to parse int from foo: strconv.Atoi: parsing \"foo\": invalid syntax",
            ),
            ("@often", "unrecognized descriptor: @often"),
            (
                "@every soon",
                "failed to parse duration @every soon: time: invalid duration \"soon\"",
            ),
            (
                "@every 5",
                "failed to parse duration @every 5: time: missing unit in duration \"5\"",
            ),
            (
                "@every 5d",
                "failed to parse duration @every 5d: time: unknown unit \"d\" in duration \"5d\"",
            ),
        ];
        for (spec, error) in cases {
            assert_eq!(schedule_error(spec).as_deref(), Some(error), "{spec:?}");
        }
    }
}
