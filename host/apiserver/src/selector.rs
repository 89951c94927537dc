//! Label and field selectors.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq)]
struct Req {
    key: String,
    op: Op,
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<Req>,
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    crate::validation::qualified_name(k).is_empty()
}

fn valid_value(v: &str) -> bool {
    crate::validation::label_value(v).is_empty()
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, found {rest:?}"))?;
    let mut vals = vec![];
    for v in inner.split(',') {
        let v = v.trim();
        if !valid_value(v) {
            return Err(format!("invalid label value: {v:?}"));
        }
        vals.push(v.to_string());
    }
    Ok(vals)
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut reqs = vec![];
        if s.trim().is_empty() {
            return Ok(LabelSelector { reqs });
        }
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                return Err("empty requirement in label selector".into());
            }
            let req = if let Some(k) = p.strip_prefix('!') {
                let k = k.trim();
                Req {
                    key: k.to_string(),
                    op: Op::NotExists,
                }
            } else if let Some(i) = p.find("!=") {
                Req {
                    key: p[..i].trim().to_string(),
                    op: Op::NotEq(p[i + 2..].trim().to_string()),
                }
            } else if let Some(i) = p.find("==") {
                Req {
                    key: p[..i].trim().to_string(),
                    op: Op::Eq(p[i + 2..].trim().to_string()),
                }
            } else if let Some(i) = p.find('=') {
                Req {
                    key: p[..i].trim().to_string(),
                    op: Op::Eq(p[i + 1..].trim().to_string()),
                }
            } else if let Some(i) = p.find(" notin ").or_else(|| p.find(" notin(")) {
                Req {
                    key: p[..i].trim().to_string(),
                    op: Op::NotIn(parse_set(&p[i + 6..])?),
                }
            } else if let Some(i) = p.find(" in ").or_else(|| p.find(" in(")) {
                Req {
                    key: p[..i].trim().to_string(),
                    op: Op::In(parse_set(&p[i + 3..])?),
                }
            } else if let Some(i) = p.find('>') {
                let n = p[i + 1..]
                    .trim()
                    .parse()
                    .map_err(|_| format!("invalid number in {p:?}"))?;
                Req {
                    key: p[..i].trim().to_string(),
                    op: Op::Gt(n),
                }
            } else if let Some(i) = p.find('<') {
                let n = p[i + 1..]
                    .trim()
                    .parse()
                    .map_err(|_| format!("invalid number in {p:?}"))?;
                Req {
                    key: p[..i].trim().to_string(),
                    op: Op::Lt(n),
                }
            } else {
                Req {
                    key: p.to_string(),
                    op: Op::Exists,
                }
            };
            if !valid_key(&req.key) {
                return Err(format!("invalid label key {:?}", req.key));
            }
            if let Op::Eq(v) | Op::NotEq(v) = &req.op
                && !valid_value(v)
            {
                return Err(format!("invalid label value: {v:?}"));
            }
            reqs.push(req);
        }
        Ok(LabelSelector { reqs })
    }

    /// Does an object (its `metadata.labels`) match?
    pub fn matches(&self, obj: &Value) -> bool {
        if self.reqs.is_empty() {
            return true;
        }
        let labels = &obj["metadata"]["labels"];
        self.reqs.iter().all(|r| {
            let v = labels.get(&r.key).and_then(|v| v.as_str());
            match &r.op {
                Op::Eq(x) => v == Some(x.as_str()),
                Op::NotEq(x) => v != Some(x.as_str()),
                Op::In(xs) => v.is_some_and(|v| xs.iter().any(|x| x == v)),
                Op::NotIn(xs) => !v.is_some_and(|v| xs.iter().any(|x| x == v)),
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
                Op::Gt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                Op::Lt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }
}

/// A parsed field selector: `path=value`, `path==value`, `path!=value`, comma separated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    reqs: Vec<(Vec<String>, bool, String)>,
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut reqs = vec![];
        if s.trim().is_empty() {
            return Ok(FieldSelector { reqs });
        }
        for part in s.split(',') {
            let p = part.trim();
            let (k, eq, v) = if let Some(i) = p.find("!=") {
                (&p[..i], false, &p[i + 2..])
            } else if let Some(i) = p.find("==") {
                (&p[..i], true, &p[i + 2..])
            } else if let Some(i) = p.find('=') {
                (&p[..i], true, &p[i + 1..])
            } else {
                return Err(format!("invalid selector: '{p}'; can't understand '{p}'"));
            };
            let k = k.trim();
            if k.is_empty() {
                return Err(format!("invalid field selector {p:?}"));
            }
            reqs.push((
                k.split('.').map(str::to_string).collect(),
                eq,
                v.trim().to_string(),
            ));
        }
        Ok(FieldSelector { reqs })
    }

    /// The field paths the selector names (`metadata.name`, ...).
    pub fn fields(&self) -> impl Iterator<Item = String> + '_ {
        self.reqs.iter().map(|(path, _, _)| path.join("."))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(path, eq, want)| {
            let mut cur = obj;
            for seg in path {
                cur = &cur[seg.as_str()];
            }
            let have = match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            (have == *want) == *eq
        })
    }
}

/// Whether the real server lets a list or watch of `group`/`plural` select on `field`: every
/// kind knows `metadata.name` and (but for Nodes and Namespaces) `metadata.namespace`, a few
/// register more (the field-label conversion functions of their API group); anything else is
/// refused with "field label not supported".
pub fn field_label_supported(group: &str, plural: &str, field: &str) -> bool {
    let extra: &[&str] = match (group, plural) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
            "spec.host",
        ],
        ("", "nodes") => return matches!(field, "metadata.name" | "spec.unschedulable"),
        ("", "namespaces") => return matches!(field, "metadata.name" | "status.phase"),
        ("", "secrets") => &["type"],
        ("", "services") => &["spec.clusterIP", "spec.type"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("batch", "jobs") => &["status.successful"],
        _ => &[],
    };
    matches!(field, "metadata.name" | "metadata.namespace") || extra.contains(&field)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "front", "n": "5"}}});
        let m = |s: &str| LabelSelector::parse(s).map(|l| l.matches(&o));
        assert_eq!(m("app=web"), Ok(true));
        assert_eq!(m("app==web"), Ok(true));
        assert_eq!(m("app!=web"), Ok(false));
        assert_eq!(m("app in (web, db)"), Ok(true));
        assert_eq!(m("app notin (web,db)"), Ok(false));
        assert_eq!(m("tier"), Ok(true));
        assert_eq!(m("!tier"), Ok(false));
        assert_eq!(m("!missing,app=web"), Ok(true));
        assert_eq!(m("n>3,n<6"), Ok(true));
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn field_selector_paths() {
        let o = json!({"metadata": {"name": "a", "namespace": "ns"}});
        let f = FieldSelector::parse("metadata.name=a,metadata.namespace!=x").unwrap();
        assert!(f.matches(&o));
        assert!(!FieldSelector::parse("metadata.name=b").unwrap().matches(&o));
        assert!(FieldSelector::parse("bogus").is_err());
    }

    #[test]
    fn field_labels_are_those_the_kind_registers() {
        assert!(field_label_supported("", "configmaps", "metadata.name"));
        assert!(field_label_supported(
            "",
            "configmaps",
            "metadata.namespace"
        ));
        assert!(!field_label_supported("", "configmaps", "data.x"));
        assert!(field_label_supported("", "secrets", "type"));
        assert!(!field_label_supported("", "nodes", "metadata.namespace"));
        assert!(field_label_supported("", "namespaces", "status.phase"));
        assert!(field_label_supported("", "events", "involvedObject.name"));
        assert!(field_label_supported("batch", "jobs", "status.successful"));
        assert!(!field_label_supported(
            "batch",
            "cronjobs",
            "status.successful"
        ));
    }
}
