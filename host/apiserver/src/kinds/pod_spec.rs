//! The pod spec, shared by Pods and by the templates of Jobs, CronJobs and Deployments: its
//! defaults, and the resource quantities its requests and limits are written in.

use serde_json::{Map, Value, json};

/// Sets `key` in `m` to `val` unless it holds a non-null value already.
pub fn default(m: &mut Map<String, Value>, key: &str, val: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), val);
    }
}

/// The `imagePullPolicy` an image gets by default: `Always` for `:latest` or no tag.
pub fn pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        return "IfNotPresent";
    }
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn container_defaults(c: &mut Value) {
    let image = c["image"].as_str().unwrap_or_default().to_string();
    if let Some(m) = c.as_object_mut() {
        default(m, "terminationMessagePath", json!("/dev/termination-log"));
        default(m, "terminationMessagePolicy", json!("File"));
        default(m, "imagePullPolicy", json!(pull_policy(&image)));
        default(m, "resources", json!({}));
    }
}

/// The defaults every pod spec gets, in a Pod or a template (`SetDefaults_PodSpec` and the
/// container defaults).
pub fn pod_spec_defaults(spec: &mut Value) {
    if let Some(m) = spec.as_object_mut() {
        default(m, "restartPolicy", json!("Always"));
        default(m, "terminationGracePeriodSeconds", json!(30));
        default(m, "dnsPolicy", json!("ClusterFirst"));
        default(m, "securityContext", json!({}));
        default(m, "schedulerName", json!("default-scheduler"));
    }
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(container_defaults);
        }
    }
}

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
    fn pull_policies() {
        assert_eq!(pull_policy("busybox"), "Always");
        assert_eq!(pull_policy("busybox:latest"), "Always");
        assert_eq!(pull_policy("registry:5000/busybox:1"), "IfNotPresent");
        assert_eq!(pull_policy("registry:5000/busybox"), "Always");
    }

    #[test]
    fn quantities_compare_across_units() {
        assert_eq!(parse_quantity("100m"), parse_quantity("0.1"));
        assert_eq!(parse_quantity("1Gi"), parse_quantity("1073741824"));
        assert_eq!(parse_quantity("1k"), parse_quantity("1e3"));
        assert_eq!(parse_quantity("1.5"), Some(1_500_000_000));
        assert_eq!(parse_quantity("abc"), None);
        assert_eq!(parse_quantity("1Xi"), None);
    }
}
