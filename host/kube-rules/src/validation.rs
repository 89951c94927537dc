//! The name, label and port rules the real API server applies everywhere
//! (`k8s.io/apimachinery/pkg/util/validation`), with its exact messages, so that every kind
//! refuses bad input in the same words, and a component that names an object checks it by the
//! same rules. Each check returns the list of messages the real one would (empty when the value
//! is valid), in the real order.

/// The real server's message for a value that is not an RFC 1123 label (a namespace name, say).
pub const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
/// The real server's message for a value that is not an RFC 1123 subdomain (most object names).
pub const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// The real server's message for a value that is not a DNS-1035 label (a Service name, say).
pub const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
/// The real server's message for a name part that is not a qualified name.
pub const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
/// The real server's message for a value that is not a label value.
pub const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
/// The real server's message for a port number outside 1..=65535.
pub const PORT_RANGE_MSG: &str = "must be between 1 and 65535, inclusive";

const LABEL_MAX: usize = 63;
const SUBDOMAIN_MAX: usize = 253;

fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, or with `letter_first` `[a-z]([-a-z0-9]*[a-z0-9])?`; no
/// length limit (the callers report length separately, as the real checks do).
fn matches_label(s: &str, letter_first: bool) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (first.is_ascii_lowercase() || (!letter_first && first.is_ascii_digit()))
        && lower_alnum(last)
        && b.iter().all(|c| lower_alnum(c) || *c == b'-')
}

fn matches_subdomain(s: &str) -> bool {
    s.split('.').all(|l| matches_label(l, false))
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsDNS1123Label`.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > LABEL_MAX {
        errs.push(max_len(LABEL_MAX));
    }
    if !matches_label(s, false) {
        // A valid subdomain that is not a label can only be at fault for its dots.
        if matches_subdomain(s) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(DNS1123_LABEL_MSG.into());
        }
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > SUBDOMAIN_MAX {
        errs.push(max_len(SUBDOMAIN_MAX));
    }
    if !matches_subdomain(s) {
        errs.push(DNS1123_SUBDOMAIN_MSG.into());
    }
    errs
}

/// `IsDNS1035Label`.
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > LABEL_MAX {
        errs.push(max_len(LABEL_MAX));
    }
    if !matches_label(s, true) {
        errs.push(DNS1035_LABEL_MSG.into());
    }
    errs
}

/// `IsQualifiedName`: label and annotation keys, an optional subdomain prefix and a name.
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = vec![];
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > LABEL_MAX {
        errs.push(format!("name part {}", max_len(LABEL_MAX)));
    }
    if !matches_qualified(name) {
        errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > LABEL_MAX {
        errs.push(max_len(LABEL_MAX));
    }
    if !s.is_empty() && !matches_qualified(s) {
        errs.push(LABEL_VALUE_MSG.into());
    }
    errs
}

/// `IsValidPortName`: an IANA_SVC_NAME, as container port names and named target ports are.
pub fn port_name(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > 15 {
        errs.push(max_len(15));
    }
    let b = s.as_bytes();
    if b.is_empty()
        || !b
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if s.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if s.starts_with('-') || s.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// `IsValidPortNum`.
pub fn port_num(n: i64) -> Vec<String> {
    if (1..=65535).contains(&n) {
        vec![]
    } else {
        vec![PORT_RANGE_MSG.into()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(dns1123_label("a-1").is_empty());
        assert!(dns1123_label("1abc").is_empty());
        assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(dns1123_label("A"), [DNS1123_LABEL_MSG]);
        assert_eq!(dns1123_label(""), [DNS1123_LABEL_MSG]);
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(dns1123_subdomain("a.b-c").is_empty());
        assert_eq!(dns1123_subdomain("a..b"), [DNS1123_SUBDOMAIN_MSG]);
        assert_eq!(dns1123_subdomain("Bad_Name"), [DNS1123_SUBDOMAIN_MSG]);
    }

    #[test]
    fn dns1035_labels_start_with_a_letter() {
        assert!(dns1035_label("abc-123").is_empty());
        assert_eq!(dns1035_label("1abc"), [DNS1035_LABEL_MSG]);
        assert_eq!(dns1035_label("abc-"), [DNS1035_LABEL_MSG]);
        assert_eq!(
            dns1035_label(&format!("x{}", "a".repeat(63))),
            ["must be no more than 63 characters"]
        );
    }

    #[test]
    fn qualified_names_and_label_values() {
        assert!(qualified_name("example.com/My_Name.1").is_empty());
        assert_eq!(
            qualified_name("/a"),
            ["prefix part must be non-empty".to_string()]
        );
        assert_eq!(
            qualified_name("Ex/a"),
            [format!("prefix part {DNS1123_SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            qualified_name("a/"),
            [
                "name part must be non-empty".to_string(),
                format!("name part {QUALIFIED_NAME_MSG}")
            ]
        );
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(label_value("").is_empty());
        assert!(label_value("My_value.1").is_empty());
        assert_eq!(label_value("-a"), [LABEL_VALUE_MSG]);
    }

    #[test]
    fn port_names_follow_iana_svc_name() {
        assert!(port_name("http-alt").is_empty());
        assert_eq!(
            port_name("80"),
            ["must contain at least one letter (a-z)".to_string()]
        );
        assert_eq!(port_name("a--b"), ["must not contain consecutive hyphens"]);
        assert_eq!(
            port_name("-Ab"),
            [
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must not begin or end with a hyphen"
            ]
        );
        assert_eq!(port_name("abcdefghijklmnop").len(), 1);
        assert_eq!(port_num(0), [PORT_RANGE_MSG]);
        assert!(port_num(65535).is_empty());
    }
}
