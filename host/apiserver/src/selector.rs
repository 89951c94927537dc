//! Label and field selectors.

use serde_json::{Value, json};

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

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Error,
    End,
    ClosePar,
    Comma,
    Not,
    DoubleEq,
    Eq,
    Gt,
    Ident,
    In,
    Lt,
    NotEq,
    NotIn,
    OpenPar,
}

fn symbol(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosePar,
        "," => Tok::Comma,
        "!" => Tok::Not,
        "==" => Tok::DoubleEq,
        "=" => Tok::Eq,
        ">" => Tok::Gt,
        "<" => Tok::Lt,
        "!=" => Tok::NotEq,
        "(" => Tok::OpenPar,
        "in" => Tok::In,
        "notin" => Tok::NotIn,
        _ => return None,
    })
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// The tokens of a label selector, as apimachinery's lexer makes them (the literal of each).
fn lex(s: &str) -> Vec<(Tok, String)> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = vec![];
    loop {
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            out.push((Tok::End, String::new()));
            return out;
        }
        if is_special(b[i]) {
            // The longest run of symbols that is still an operator.
            let start = i;
            let mut last: Option<(Tok, usize)> = None;
            while i < b.len() && is_special(b[i]) {
                match symbol(&s[start..=i]) {
                    Some(t) => last = Some((t, i + 1)),
                    None if last.is_some() => break,
                    None => {}
                }
                i += 1;
            }
            match last {
                Some((t, end)) => {
                    i = end;
                    out.push((t, s[start..end].to_string()));
                }
                None => out.push((
                    Tok::Error,
                    format!("error expected: keyword found '{}'", &s[start..i]),
                )),
            }
        } else {
            let start = i;
            while i < b.len() && !is_special(b[i]) && !is_space(b[i]) {
                i += 1;
            }
            let lit = &s[start..i];
            let tok = match symbol(lit) {
                Some(t @ (Tok::In | Tok::NotIn)) => t,
                _ => Tok::Ident,
            };
            out.push((tok, lit.to_string()));
        }
    }
}

/// `field.Invalid(path, value, detail)` as its message reads.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!(
        "{path}: Invalid value: {}: {detail}",
        serde_json::json!(value)
    )
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    /// The next token; `values` reads `in`/`notin` as identifiers.
    fn peek(&self, values: bool) -> (Tok, String) {
        let (t, l) = self.items[self.pos.min(self.items.len() - 1)].clone();
        match t {
            Tok::In | Tok::NotIn if values => (Tok::Ident, l),
            t => (t, l),
        }
    }

    fn next(&mut self, values: bool) -> (Tok, String) {
        let r = self.peek(values);
        self.pos += 1;
        r
    }

    fn requirement(&mut self) -> Result<Req, String> {
        let (mut tok, mut key) = self.next(true);
        let mut not = false;
        if tok == Tok::Not {
            not = true;
            (tok, key) = self.next(true);
        }
        if tok != Tok::Ident {
            return Err(format!("found '{key}', expected: identifier"));
        }
        let errs = crate::validation::qualified_name(&key);
        if !errs.is_empty() {
            return Err(invalid("<nil>", &key, &errs.join("; ")));
        }
        if not || matches!(self.peek(true).0, Tok::End | Tok::Comma) {
            let op = if not { Op::NotExists } else { Op::Exists };
            return Ok(Req { key, op });
        }
        let (tok, lit) = self.next(false);
        let values = match tok {
            Tok::In | Tok::NotIn => self.set()?,
            Tok::Eq | Tok::DoubleEq | Tok::NotEq | Tok::Gt | Tok::Lt => self.exact()?,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        // `NewRequirement`'s checks, reported together.
        let mut errs = vec![];
        let mut num = 0;
        if matches!(tok, Tok::Gt | Tok::Lt) {
            for (i, v) in values.iter().enumerate() {
                match v.parse::<i64>() {
                    Ok(n) => num = n,
                    Err(_) => errs.push(invalid(
                        &format!("values[{i}]"),
                        v,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )),
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let e = crate::validation::label_value(v);
            if !e.is_empty() {
                errs.push(invalid(&format!("values[{i}][{key}]"), v, &e.join("; ")));
            }
        }
        let mut seen: Vec<String> = vec![];
        for e in errs {
            if !seen.contains(&e) {
                seen.push(e);
            }
        }
        match seen.len() {
            0 => {}
            1 => return Err(seen.remove(0)),
            _ => return Err(format!("[{}]", seen.join(", "))),
        }
        let first = || values.first().cloned().unwrap_or_default();
        let op = match tok {
            Tok::In => Op::In(values),
            Tok::NotIn => Op::NotIn(values),
            Tok::NotEq => Op::NotEq(first()),
            Tok::Gt => Op::Gt(num),
            Tok::Lt => Op::Lt(num),
            _ => Op::Eq(first()),
        };
        Ok(Req { key, op })
    }

    /// `( v1, v2 )`: a sorted set (empty members allowed).
    fn set(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.next(true);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.peek(true);
        let mut set = std::collections::BTreeSet::new();
        match tok {
            Tok::Ident | Tok::Comma => {
                loop {
                    let (t, l) = self.next(true);
                    match t {
                        Tok::Ident => {
                            set.insert(l);
                            let (t2, l2) = self.peek(true);
                            match t2 {
                                Tok::Comma => continue,
                                Tok::ClosePar => break,
                                _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                            }
                        }
                        Tok::Comma => {
                            if set.is_empty() {
                                set.insert(String::new());
                            }
                            let (t2, _) = self.peek(true);
                            if t2 == Tok::ClosePar {
                                set.insert(String::new());
                                break;
                            }
                            if t2 == Tok::Comma {
                                self.next(true);
                                set.insert(String::new());
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',', or identifier")),
                    }
                }
                if self.next(true).0 != Tok::ClosePar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
            }
            Tok::ClosePar => {
                self.next(true);
                set.insert(String::new());
            }
            _ => return Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
        Ok(set.into_iter().collect())
    }

    fn exact(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.peek(true).0, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.next(true) {
            (Tok::Ident, lit) => Ok(vec![lit]),
            (_, lit) => Err(format!("found '{lit}', expected: identifier")),
        }
    }
}

impl LabelSelector {
    /// Parses a selector as apimachinery's `labels.Parse` does, failing with its message.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut p = Parser {
            items: lex(s),
            pos: 0,
        };
        let mut reqs = vec![];
        loop {
            let (tok, lit) = p.peek(true);
            match tok {
                Tok::Ident | Tok::Not => {
                    let r = p
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = p.next(true);
                    match t {
                        Tok::End => break,
                        Tok::Comma => {
                            let (t2, l2) = p.peek(true);
                            if !matches!(t2, Tok::Ident | Tok::Not) {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{l}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Tok::End => break,
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Does an object (its `metadata.labels`) match? A label that is not a string counts as
    /// absent.
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
    /// Parses a `fieldSelector`: comma-separated `path=value`, `path==value` or `path!=value`
    /// terms; empty selects everything. Err carries the real server's message for a term without
    /// an operator or a path. Whether the fields may be selected on is checked separately.
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

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The value `field` must equal, if the selector requires one (Go's `RequiresExactMatch`).
    pub fn exact_match(&self, field: &str) -> Option<&str> {
        self.reqs
            .iter()
            .find(|(path, eq, _)| *eq && path.join(".") == field)
            .map(|(_, _, value)| value.as_str())
    }

    /// The field paths the selector names (`metadata.name`, ...).
    pub fn fields(&self) -> impl Iterator<Item = String> + '_ {
        self.reqs.iter().map(|(path, _, _)| path.join("."))
    }

    /// Whether `obj` satisfies every term: the value at each path, as text (absent is empty),
    /// equals the wanted one, or differs from it for `!=`.
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

/// Why list and watch of a built-in kind refuse to select on `field`, in the words of the kind's
/// field-label conversion; a kind that registers none gets the scheme's default, which knows only
/// the two metadata fields.
pub fn field_label_error(group: &str, plural: &str, field: &str) -> String {
    match (group, plural) {
        ("", "pods" | "nodes" | "namespaces" | "secrets" | "services" | "events") => {
            format!("field label not supported: {field}")
        }
        ("batch", "jobs") => format!("field label {} not supported for batchv1.Job", json!(field)),
        _ => format!(
            "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            json!(field)
        ),
    }
}

/// The field labels a CRD version declares in `selectableFields` (each `jsonPath` without its
/// leading dot), which list and watch of its custom resources may select on.
pub fn crd_selectable_fields(crd: &Value, version: &str) -> Vec<String> {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["name"].as_str() == Some(version))
        .flat_map(|v| {
            v["selectableFields"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| {
            f["jsonPath"]
                .as_str()
                .map(|p| p.trim().trim_start_matches('.').to_string())
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// Whether a structured `LabelSelector` (`matchLabels` and `matchExpressions`, as in a
/// Deployment's `spec.selector` or a PodDisruptionBudget's) selects an object with `labels`.
/// An unknown operator selects nothing.
pub fn label_selector_matches(sel: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = sel["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let exprs_ok = sel["matchExpressions"].as_array().is_none_or(|es| {
        es.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => !label(key).is_some_and(|v| values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
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
        assert_eq!(m("app in (db,)"), Ok(false));
        assert_eq!(m("missing notin ()"), Ok(true));
        assert_eq!(m(""), Ok(true));
        assert_eq!(m("  "), Ok(true));
        assert_eq!(m("x="), Ok(false));
        assert_eq!(m("in=x"), Ok(false));
    }

    #[test]
    fn label_selector_errors_read_as_the_real_parser_s() {
        let e = |s: &str| LabelSelector::parse(s).err().unwrap_or_default();
        assert_eq!(
            e("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            e("a in (b"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            e("app in web"),
            "unable to parse requirement: found 'web' expected: '('"
        );
        assert_eq!(e("a=b=c"), "found '=', expected: ',' or 'end of string'");
        assert_eq!(e("a,"), "found '', expected: identifier after ','");
        assert_eq!(e("a,,b"), "found ',', expected: identifier after ','");
        assert_eq!(
            e("=a"),
            "found '=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            e("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
        assert!(e("A$").starts_with(
            "unable to parse requirement: <nil>: Invalid value: \"A$\": name part must consist of"
        ));
        assert!(e("a=b$").starts_with(
            "unable to parse requirement: values[0][a]: Invalid value: \"b$\": a valid label must"
        ));
        assert_eq!(
            e("n>x"),
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert!(e("n<x$").starts_with("unable to parse requirement: [values[0]: Invalid value"));
    }

    #[test]
    fn crd_versions_declare_selectable_fields() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1", "selectableFields": [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}]},
            {"name": "v2"}]}});
        assert_eq!(
            crd_selectable_fields(&crd, "v1"),
            ["spec.color", "spec.size"]
        );
        assert!(crd_selectable_fields(&crd, "v2").is_empty());
        let o = json!({"spec": {"color": "red", "size": 3, "on": true}});
        assert!(FieldSelector::parse("spec.size=3").unwrap().matches(&o));
        assert!(FieldSelector::parse("spec.on=true").unwrap().matches(&o));
        assert!(FieldSelector::parse("spec.missing=").unwrap().matches(&o));
        assert!(
            FieldSelector::parse("spec.color!=blue")
                .unwrap()
                .matches(&o)
        );
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

    #[test]
    fn unsupported_field_labels_are_refused_in_each_kinds_words() {
        assert_eq!(
            field_label_error("", "configmaps", "data.x"),
            "\"data.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(
            field_label_error("", "secrets", "data.x"),
            "field label not supported: data.x"
        );
        assert_eq!(
            field_label_error("batch", "jobs", "spec.x"),
            "field label \"spec.x\" not supported for batchv1.Job"
        );
    }
}
