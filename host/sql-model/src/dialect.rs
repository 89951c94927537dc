//! The portable SQL dialect of `lethe:platform/sql`: placeholder rewriting, read-only detection
//! and the transaction-control rule.
//!
//! Components write `$1`…`$n`. PostgreSQL understands them natively; SQLite gets them rewritten
//! to `?1`…`?n`, which bind by the same numbers. The lexer skips string literals (including
//! PostgreSQL `E'…'` and dollar-quoted strings), quoted identifiers and comments, so a `$1`
//! inside any of those is left alone.

use std::borrow::Cow;

/// One lexical piece of SQL text, as byte ranges into the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// An identifier or keyword.
    Word(usize, usize),
    /// `$N`: the range covers the `$` and the digits.
    Placeholder(usize, usize),
    /// Anything else (literals, comments, punctuation, whitespace).
    Other(usize, usize),
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn is_ident_char(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit() || b == b'$'
}

/// Where the quoted text opening at `bytes[start]` ends: past its closing quote (a doubled quote
/// stands for one inside it, and with `escapes` a backslash escapes the next byte), or at the end
/// of the input when it is unterminated.
fn past_quoted(bytes: &[u8], start: usize, escapes: bool) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        if escapes && bytes[i] == b'\\' {
            i += 2;
        } else if bytes[i] != quote {
            i += 1;
        } else if bytes.get(i + 1) == Some(&quote) {
            i += 2;
        } else {
            return i + 1;
        }
    }
    bytes.len()
}

/// Splits SQL text into tokens. Unterminated literals or comments run to the end of the input,
/// as the database would see them (it will then report the syntax error itself).
fn tokens(sql: &str) -> Vec<Token> {
    let bytes = sql.as_bytes();
    let len = bytes.len();
    let mut out = Vec::new();
    let mut i = 0;
    while i < len {
        let start = i;
        let b = bytes[i];
        match b {
            b'\'' => {
                // E'...' strings treat backslash as an escape.
                let escapes = out.last().is_some_and(|t| match *t {
                    Token::Word(s, e) => {
                        e == start && e - s == 1 && bytes[s].eq_ignore_ascii_case(&b'e')
                    }
                    _ => false,
                });
                i = past_quoted(bytes, i, escapes);
                out.push(Token::Other(start, i));
            }
            b'"' | b'`' => {
                i = past_quoted(bytes, i, false);
                out.push(Token::Other(start, i));
            }
            b'-' if i + 1 < len && bytes[i + 1] == b'-' => {
                while i < len && bytes[i] != b'\n' {
                    i += 1;
                }
                out.push(Token::Other(start, i));
            }
            b'/' if i + 1 < len && bytes[i + 1] == b'*' => {
                let mut depth = 0usize;
                while i < len {
                    if bytes[i] == b'/' && i + 1 < len && bytes[i + 1] == b'*' {
                        depth += 1;
                        i += 2;
                    } else if bytes[i] == b'*' && i + 1 < len && bytes[i + 1] == b'/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                out.push(Token::Other(start, i.min(len)));
            }
            b'$' => {
                let mut j = i + 1;
                while j < len && bytes[j].is_ascii_digit() {
                    j += 1;
                }
                if j > i + 1 {
                    out.push(Token::Placeholder(start, j));
                    i = j;
                    continue;
                }
                // A dollar-quoted string: $tag$ ... $tag$ (tag may be empty).
                let mut k = i + 1;
                while k < len && is_ident_char(bytes[k]) && bytes[k] != b'$' {
                    k += 1;
                }
                if k < len && bytes[k] == b'$' && (k == i + 1 || is_ident_start(bytes[i + 1])) {
                    let tag = &sql[i..=k];
                    let body = k + 1;
                    let end = sql[body..]
                        .find(tag)
                        .map(|p| body + p + tag.len())
                        .unwrap_or(len);
                    out.push(Token::Other(start, end));
                    i = end;
                } else {
                    out.push(Token::Other(start, i + 1));
                    i += 1;
                }
            }
            _ if is_ident_start(b) => {
                while i < len && is_ident_char(bytes[i]) {
                    i += 1;
                }
                out.push(Token::Word(start, i));
            }
            _ => {
                // Advance by one whole UTF-8 character (non-ASCII bytes are identifier starts,
                // so only ASCII reaches here).
                i += 1;
                out.push(Token::Other(start, i));
            }
        }
    }
    out
}

/// Rewrites `$N` placeholders to SQLite's `?N`, leaving literals, quoted identifiers and
/// comments untouched. Returns the input unchanged (borrowed) when it has no placeholder.
pub fn to_sqlite(sql: &str) -> Cow<'_, str> {
    let toks = tokens(sql);
    if !toks.iter().any(|t| matches!(t, Token::Placeholder(..))) {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len());
    for t in toks {
        match t {
            Token::Placeholder(s, e) => {
                out.push('?');
                out.push_str(&sql[s + 1..e]);
            }
            Token::Word(s, e) | Token::Other(s, e) => out.push_str(&sql[s..e]),
        }
    }
    Cow::Owned(out)
}

/// Whether `sql` is certainly a read, so that replaying it after a lost connection cannot apply
/// anything twice. Conservative: a `WITH` that mentions a data-modifying keyword, `SELECT … INTO`,
/// or anything not starting with `SELECT`/`VALUES`/`TABLE`/`SHOW`/`WITH` counts as a write.
pub fn is_read_only(sql: &str) -> bool {
    let words: Vec<String> = tokens(sql)
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(s, e) => Some(sql[s..e].to_ascii_uppercase()),
            _ => None,
        })
        .collect();
    let Some(first) = words.first() else {
        return false;
    };
    let modifies = words.iter().enumerate().any(|(i, w)| match w.as_str() {
        // `FOR UPDATE` / `FOR NO KEY UPDATE` only lock rows.
        "UPDATE" => !(i > 0 && matches!(words[i - 1].as_str(), "FOR" | "KEY")),
        "INSERT" | "DELETE" | "MERGE" | "INTO" | "CREATE" | "DROP" | "ALTER" | "TRUNCATE"
        | "NEXTVAL" | "SETVAL" => true,
        _ => false,
    });
    matches!(
        first.as_str(),
        "SELECT" | "VALUES" | "TABLE" | "SHOW" | "WITH"
    ) && !modifies
}

/// The message of an `invalid-statement` for transaction control in a single statement.
pub const TRANSACTION_CONTROL: &str =
    "transaction control is not allowed in a statement; use batch or a transaction";

/// Rejects transaction control (`BEGIN`, `COMMIT`, `SAVEPOINT`, …) in a single statement:
/// transactions go through `batch` or `begin`, so a pooled connection is never left inside one.
/// The error is [`TRANSACTION_CONTROL`], for an `invalid-statement`.
pub fn reject_transaction_control(sql: &str) -> Result<(), &'static str> {
    let first = tokens(sql).into_iter().find_map(|t| match t {
        Token::Word(s, e) => Some(sql[s..e].to_ascii_uppercase()),
        _ => None,
    });
    match first.as_deref() {
        Some(
            "BEGIN" | "START" | "COMMIT" | "END" | "ROLLBACK" | "ABORT" | "SAVEPOINT" | "RELEASE",
        ) => Err(TRANSACTION_CONTROL),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_placeholders() {
        assert_eq!(to_sqlite("SELECT $1, $2"), "SELECT ?1, ?2");
        assert_eq!(to_sqlite("x=$10 AND y=$2"), "x=?10 AND y=?2");
    }

    #[test]
    fn leaves_literals_identifiers_and_comments_alone() {
        let sql = "SELECT '$1', \"$2\", `$3` -- $4\n/* $5 /* $6 */ $7 */ FROM t WHERE a=$8";
        assert_eq!(
            to_sqlite(sql),
            "SELECT '$1', \"$2\", `$3` -- $4\n/* $5 /* $6 */ $7 */ FROM t WHERE a=?8"
        );
        assert_eq!(
            to_sqlite("SELECT 'it''s $1' || $1"),
            "SELECT 'it''s $1' || ?1"
        );
        assert_eq!(
            to_sqlite("SELECT E'\\' $1' || $2"),
            "SELECT E'\\' $1' || ?2"
        );
        assert_eq!(
            to_sqlite("SELECT $$ $1 $$ || $tag$ $2 $tag$ || $3"),
            "SELECT $$ $1 $$ || $tag$ $2 $tag$ || ?3"
        );
        assert!(matches!(to_sqlite("SELECT 1"), Cow::Borrowed(_)));
    }

    #[test]
    fn identifiers_with_dollar_are_not_placeholders() {
        assert_eq!(
            to_sqlite("SELECT a$1 FROM t WHERE b = $1"),
            "SELECT a$1 FROM t WHERE b = ?1"
        );
    }

    #[test]
    fn unterminated_input_does_not_panic() {
        for sql in [
            "'abc",
            "\"abc",
            "/* abc",
            "$tag$ abc",
            "E'\\",
            "$",
            "--",
            "é$1ü",
            "$1é",
        ] {
            let _ = to_sqlite(sql);
            let _ = is_read_only(sql);
        }
        assert_eq!(to_sqlite("é = $1"), "é = ?1");
    }

    #[test]
    fn random_input_never_panics_and_keeps_non_placeholder_text() {
        let alphabet: Vec<char> = "$'\"`-/*\\\nEe0123 abcé✓?;".chars().collect();
        for _ in 0..5000 {
            let len = rand::random_range(0..24);
            let sql: String = (0..len)
                .map(|_| alphabet[rand::random_range(0..alphabet.len())])
                .collect();
            let rewritten = to_sqlite(&sql);
            let _ = is_read_only(&sql);
            let _ = reject_transaction_control(&sql);
            // Only `$` may change, and only into `?`.
            assert_eq!(rewritten.chars().count(), sql.chars().count(), "{sql:?}");
            for (a, b) in sql.chars().zip(rewritten.chars()) {
                assert!(a == b || (a == '$' && b == '?'), "{sql:?} -> {rewritten:?}");
            }
        }
    }

    #[test]
    fn read_only_detection() {
        assert!(is_read_only("SELECT * FROM t WHERE a = $1"));
        assert!(is_read_only("  /* c */ select 1"));
        assert!(is_read_only("WITH x AS (SELECT 1) SELECT * FROM x"));
        assert!(is_read_only("SELECT * FROM t FOR UPDATE"));
        assert!(!is_read_only(
            "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x"
        ));
        assert!(!is_read_only("INSERT INTO t VALUES (1) RETURNING id"));
        assert!(!is_read_only("SELECT * INTO t2 FROM t"));
        assert!(!is_read_only("SELECT nextval('s')"));
        assert!(!is_read_only(""));
        assert!(is_read_only("SELECT 'INSERT INTO'"));
    }

    #[test]
    fn transaction_control_is_rejected() {
        assert!(reject_transaction_control(" begin").is_err());
        assert!(reject_transaction_control("/* x */ COMMIT").is_err());
        assert!(reject_transaction_control("SELECT 'begin'").is_ok());
        assert!(reject_transaction_control("").is_ok());
    }
}
