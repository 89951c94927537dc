//! Label selectors as apimachinery's `labels.Parse` reads them and as they select objects: the
//! embedded cluster filters lists and watches with them, and the guest SDK's fake cluster does
//! too, so a component's selector means the same, and fails the same, in its tests.

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
}
