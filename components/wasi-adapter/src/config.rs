//! `lethe:platform/config` from environment variables.
//!
//! lethe lets an operator override any variable with `LETHE_VAR_<NAME>`; the adapter reads the
//! same names, so one deployment's environment configures a component on either host.

use crate::bindings::exports::lethe::platform::config::Error;

/// The prefix of a configuration variable's environment name.
pub const ENV_PREFIX: &str = "LETHE_VAR_";

/// Whether `key` is a valid variable name, by the host's rule (`[a-z][a-z0-9_]*`): the same
/// key must be valid or invalid on every host.
pub fn is_valid_key(key: &str) -> bool {
    key.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The environment variable holding `key`: `LETHE_VAR_` and the key upper-cased.
pub fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.to_ascii_uppercase())
}

/// The value of `key`, looked up with `env`. The error carries the key (as the host's does),
/// never a value. An empty variable is a value: it was set on purpose.
pub fn get(key: &str, env: impl Fn(&str) -> Option<String>) -> Result<String, Error> {
    if !is_valid_key(key) {
        return Err(Error::InvalidName(key.to_owned()));
    }
    env(&env_name(key)).ok_or_else(|| Error::Undefined(key.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "LETHE_VAR_CF_NAMESPACE" => Some("cf".into()),
            "LETHE_VAR_EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn key_names_follow_the_hosts_rule() {
        for ok in ["a", "cf_namespace", "x9", "lethe_instance_id", "a_"] {
            assert!(is_valid_key(ok), "{ok}");
        }
        for bad in ["", "9a", "_a", "A", "cf-namespace", "cf.ns", "é", "a b"] {
            assert!(!is_valid_key(bad), "{bad}");
        }
    }

    #[test]
    fn env_names_are_upper_cased_overrides() {
        assert_eq!(env_name("cf_namespace"), "LETHE_VAR_CF_NAMESPACE");
        assert_eq!(env_name("x9"), "LETHE_VAR_X9");
    }

    #[test]
    fn get_reads_the_environment() {
        assert_eq!(get("cf_namespace", env), Ok("cf".to_owned()));
        assert_eq!(get("empty", env), Ok(String::new()));
        assert_eq!(get("missing", env), Err(Error::Undefined("missing".into())));
        assert_eq!(
            get("CF_NAMESPACE", env),
            Err(Error::InvalidName("CF_NAMESPACE".into()))
        );
    }
}
