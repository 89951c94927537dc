//! Spin's route syntax for `[[trigger.http]]`: `/exact`, `/users/:id`, `/prefix/...`.
//!
//! Routes are parsed when the manifest is loaded, so a manifest with a malformed route is refused
//! at start; the HTTP trigger only matches them.

use std::sync::Arc;

use anyhow::bail;

/// A route in Spin's syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    segments: Vec<Segment>,
    wildcard: bool,
    /// As written; shared by every request it serves (the metrics' route label).
    text: Arc<str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
}

/// What a route match yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    /// `(name, value)` for every `:name` segment.
    pub params: Vec<(String, String)>,
    /// The path below the route (Spin's `spin-path-info`): empty for exact routes.
    pub path_info: String,
}

impl Route {
    /// Parses `/exact`, `/users/:id` or `/prefix/...` (and `/...` for everything).
    pub fn parse(text: &str) -> anyhow::Result<Route> {
        if !text.starts_with('/') {
            bail!("route `{text}` must start with `/`");
        }
        let (body, wildcard) = match text.strip_suffix("/...") {
            Some(prefix) => (prefix, true),
            None if text == "/..." => ("", true),
            None => (text, false),
        };
        let mut segments = Vec::new();
        for seg in body.split('/').filter(|s| !s.is_empty()) {
            if seg == "..." {
                bail!("route `{text}`: `...` is only allowed as the last segment");
            }
            if let Some(name) = seg.strip_prefix(':') {
                if name.is_empty()
                    || !name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    bail!("route `{text}`: invalid parameter `{seg}`");
                }
                segments.push(Segment::Param(name.to_string()));
            } else {
                segments.push(Segment::Literal(seg.to_string()));
            }
        }
        Ok(Route {
            segments,
            wildcard,
            text: Arc::from(text),
        })
    }

    /// The route as written in the manifest.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The route as written, shared rather than copied (a label on every request's metrics).
    pub fn shared(&self) -> &Arc<str> {
        &self.text
    }

    /// The route without a trailing `/...` (Spin's `spin-component-route`).
    pub fn component_route(&self) -> &str {
        self.text.strip_suffix("/...").unwrap_or(&self.text)
    }

    /// Matches a request path (without query).
    pub fn matches(&self, path: &str) -> Option<RouteMatch> {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if parts.len() < self.segments.len()
            || (!self.wildcard && parts.len() != self.segments.len())
        {
            return None;
        }
        let mut params = Vec::new();
        for (seg, part) in self.segments.iter().zip(&parts) {
            match seg {
                Segment::Literal(l) if l == part => {}
                Segment::Literal(_) => return None,
                Segment::Param(name) => params.push((name.clone(), (*part).to_string())),
            }
        }
        let rest = &parts[self.segments.len()..];
        let mut path_info = String::new();
        for p in rest {
            path_info.push('/');
            path_info.push_str(p);
        }
        if self.wildcard && !rest.is_empty() && path.ends_with('/') {
            path_info.push('/');
        }
        Some(RouteMatch { params, path_info })
    }

    /// Precedence among matching routes: exact before wildcard, then more literal segments,
    /// then more segments.
    pub fn rank(&self) -> (bool, usize, usize) {
        let literals = self
            .segments
            .iter()
            .filter(|s| matches!(s, Segment::Literal(_)))
            .count();
        (!self.wildcard, literals, self.segments.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(route: &str, path: &str) -> Option<RouteMatch> {
        Route::parse(route).expect("route").matches(path)
    }

    #[test]
    fn exact_routes_match_only_themselves() {
        assert_eq!(m("/v3", "/v3").map(|x| x.path_info), Some(String::new()));
        assert!(m("/v3", "/v3/jobs").is_none());
        assert!(m("/v3", "/v").is_none());
    }

    #[test]
    fn wildcard_routes_match_the_prefix_and_below() {
        assert_eq!(
            m("/smoke/...", "/smoke").map(|x| x.path_info),
            Some(String::new())
        );
        assert_eq!(
            m("/smoke/...", "/smoke/notes/a").map(|x| x.path_info),
            Some("/notes/a".into())
        );
        assert!(m("/smoke/...", "/smokes").is_none());
        assert_eq!(
            m("/...", "/anything/at/all").map(|x| x.path_info),
            Some("/anything/at/all".into())
        );
    }

    #[test]
    fn params_bind_segments() {
        let got = m("/v3/jobs/:guid", "/v3/jobs/org.delete~abc").expect("match");
        assert_eq!(
            got.params,
            vec![("guid".to_string(), "org.delete~abc".to_string())]
        );
        assert!(m("/v3/jobs/:guid", "/v3/jobs").is_none());
    }

    #[test]
    fn invalid_routes_are_rejected() {
        assert!(Route::parse("v3").is_err());
        assert!(Route::parse("/a/.../b").is_err());
        assert!(Route::parse("/a/:").is_err());
    }

    #[test]
    fn precedence_prefers_exact_then_more_literals() {
        let exact = Route::parse("/v3/jobs").expect("route");
        let param = Route::parse("/v3/:thing").expect("route");
        let wild = Route::parse("/v3/...").expect("route");
        let root = Route::parse("/...").expect("route");
        assert!(exact.rank() > param.rank());
        assert!(param.rank() > wild.rank());
        assert!(wild.rank() > root.rank());
    }
}
