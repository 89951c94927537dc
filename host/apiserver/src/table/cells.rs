//! How the printed columns format values: ages, durations, label maps and selectors, JSON paths.

use serde_json::{Value, json};

/// Like Kubernetes' `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` when it is unset.
pub(super) fn age(ts: &Value) -> String {
    match timestamp(ts) {
        Some(t) => human_duration((chrono::Utc::now() - t).num_seconds()),
        None => "<unknown>".into(),
    }
}

/// The items joined with commas, as kubectl prints a list cell; `none` when there are none.
pub(super) fn joined_or(items: &[String], none: &str) -> String {
    if items.is_empty() {
        none.into()
    } else {
        items.join(",")
    }
}

pub(super) fn non_empty_strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

pub(super) fn timestamp(ts: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    ts.as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// The CONTAINERS and IMAGES cells of a pod template, comma separated.
pub(super) fn container_cells(pod_spec: &Value) -> (String, String) {
    let containers = pod_spec["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let field = |k: &str| {
        containers
            .iter()
            .map(|c| c[k].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    (field("name"), field("image"))
}

/// `metav1.FormatLabelSelector`: requirements sorted by key, `<none>` when there are none.
pub(super) fn format_label_selector(sel: &Value) -> String {
    let mut reqs: Vec<(String, String)> = vec![];
    for (k, v) in sel["matchLabels"].as_object().into_iter().flatten() {
        reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let mut values = non_empty_strings(&e["values"]);
        values.sort();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<error>".into(),
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    let texts: Vec<String> = reqs.into_iter().map(|(_, t)| t).collect();
    joined_or(&texts, "<none>")
}

pub(super) fn count(v: &Value) -> usize {
    match v {
        Value::Object(m) => m.len(),
        Value::Array(a) => a.len(),
        _ => 0,
    }
}

pub(super) fn text(v: &Value) -> String {
    match v {
        Value::Null => "<none>".into(),
        Value::String(s) if s.is_empty() => "<none>".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A tiny JSONPath subset for printer columns: `.a.b`, `.a[0]`, `.a[?(@.k=="v")].b`.
pub fn json_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    rest = rest.strip_prefix('$').unwrap_or(rest);
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Ok(i) = inner.parse::<usize>() {
                cur = cur.get(i)?;
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, want) = f.split_once("==")?;
                let want = want.trim().trim_matches(['"', '\'']);
                cur = cur
                    .as_array()?
                    .iter()
                    .find(|e| e.get(k.trim()).and_then(Value::as_str) == Some(want))?;
            } else {
                return None;
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

/// The wide CONTAINERS, IMAGES and SELECTOR cells of a Job spec.
pub(super) fn template_cells(job_spec: &Value) -> [Value; 3] {
    let (names, images) = container_cells(&job_spec["template"]["spec"]);
    [
        json!(names),
        json!(images),
        json!(format_label_selector(&job_spec["selector"])),
    ]
}
