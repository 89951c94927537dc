//! Parsing API server responses into objects, lists, delete outcomes and `Status`es, exactly as
//! the lethe host does (`host/kube/src/parse.rs`): same metadata, same defaults, same text.
//!
//! `lethe_guest::kube::object_from_json` is not reused: it builds the guest's own `Object` (no
//! generation or annotations, labels unsorted, JSON re-serialised), not the WIT record.

use serde::Deserialize;
use serde_json::Value as Json;
use serde_json::value::RawValue;

use crate::bindings::exports::lethe::platform::kube::{
    Error, Metadata, Object, ObjectList, ObjectRef, Status,
};

fn malformed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Unavailable(format!("malformed {what} from the API server: {e}"))
}

fn string_at(v: &Json, key: &str) -> Option<String> {
    v.get(key).and_then(Json::as_str).map(str::to_owned)
}

fn pairs(v: Option<&Json>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The decision-relevant metadata of an object; missing fields are empty, labels and
/// annotations sorted by key.
pub fn metadata(object: &Json) -> Metadata {
    let m = object.get("metadata");
    let s = |key: &str| m.and_then(|m| string_at(m, key));
    Metadata {
        uid: s("uid").unwrap_or_default(),
        resource_version: s("resourceVersion").unwrap_or_default(),
        generation: m.and_then(|m| m.get("generation")).and_then(Json::as_i64),
        creation_timestamp: s("creationTimestamp"),
        deletion_timestamp: s("deletionTimestamp"),
        finalizers: m
            .and_then(|m| m.get("finalizers"))
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        labels: pairs(m.and_then(|m| m.get("labels"))),
        annotations: pairs(m.and_then(|m| m.get("annotations"))),
    }
}

/// An object from already parsed JSON and its text; `api_version` and `kind` fill in what the
/// body lacks.
fn object_from(json: &Json, text: String, api_version: &str, kind: &str) -> Object {
    let meta = json.get("metadata");
    Object {
        target: ObjectRef {
            api_version: string_at(json, "apiVersion").unwrap_or_else(|| api_version.to_owned()),
            kind: string_at(json, "kind").unwrap_or_else(|| kind.to_owned()),
            namespace: meta.and_then(|m| string_at(m, "namespace")),
            name: meta.and_then(|m| string_at(m, "name")).unwrap_or_default(),
        },
        metadata: metadata(json),
        json: text,
    }
}

/// Parses one object response, keeping its text verbatim.
pub fn object(text: String, api_version: &str, kind: &str) -> Result<Object, Error> {
    let json: Json = serde_json::from_str(&text).map_err(|e| malformed("object", e))?;
    if !json.is_object() {
        return Err(malformed("object", "not a JSON object"));
    }
    Ok(object_from(&json, text, api_version, kind))
}

/// Whether a body is a `Status` rather than an object.
pub fn is_status(json: &Json) -> bool {
    json.get("kind").and_then(Json::as_str) == Some("Status")
        && json.get("apiVersion").and_then(Json::as_str) == Some("v1")
}

/// Parses a successful delete response: `None` when the object is gone (a `Status`, or the
/// object's last state without a deletionTimestamp), else the object waiting for its finalizers.
pub fn deleted(text: String, api_version: &str, kind: &str) -> Result<Option<Object>, Error> {
    let json: Json = serde_json::from_str(&text).map_err(|e| malformed("delete response", e))?;
    if is_status(&json) {
        return Ok(None);
    }
    let object = object_from(&json, text, api_version, kind);
    Ok(object
        .metadata
        .deletion_timestamp
        .is_some()
        .then_some(object))
}

#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// Parses a list response. Each item keeps its served text, with `apiVersion` and `kind` added
/// when missing (list items usually lack them), so a component can feed an item back to
/// `replace` as is. An empty continue token means the last page.
pub fn list(text: &str, api_version: &str, kind: &str) -> Result<ObjectList, Error> {
    let raw: RawList<'_> = serde_json::from_str(text).map_err(|e| malformed("list", e))?;
    let mut items = Vec::new();
    for item in raw.items.unwrap_or_default() {
        let json: Json = serde_json::from_str(item.get()).map_err(|e| malformed("list item", e))?;
        let Some(map) = json.as_object() else {
            return Err(malformed("list item", "not a JSON object"));
        };
        let mut prefix = String::new();
        if !map.contains_key("apiVersion") {
            prefix.push_str(&format!("\"apiVersion\":{},", Json::from(api_version)));
        }
        if !map.contains_key("kind") {
            prefix.push_str(&format!("\"kind\":{},", Json::from(kind)));
        }
        let served = item.get().trim();
        let text = match served.strip_prefix('{') {
            Some(body) if !prefix.is_empty() => {
                let body = body.trim_start();
                if body.starts_with('}') {
                    format!("{{{}}}", prefix.trim_end_matches(','))
                } else {
                    format!("{{{prefix}{body}")
                }
            }
            _ => served.to_owned(),
        };
        items.push(object_from(&json, text, api_version, kind));
    }
    Ok(ObjectList {
        items,
        continue_token: raw.metadata.continue_token.filter(|c| !c.is_empty()),
        resource_version: raw.metadata.resource_version.unwrap_or_default(),
    })
}

/// The `Status` of a failed response: from its body when it is one, else from the HTTP status
/// and (the start of) whatever text the body holds, e.g. a proxy's HTML error page.
pub fn status(code: u16, body: &[u8]) -> Status {
    let canonical = http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Unknown")
        .replace(' ', "");
    if let Ok(json) = serde_json::from_slice::<Json>(body)
        && json.get("kind").and_then(Json::as_str) == Some("Status")
    {
        return Status {
            code,
            reason: string_at(&json, "reason")
                .filter(|r| !r.is_empty())
                .unwrap_or(canonical),
            message: string_at(&json, "message").unwrap_or_default(),
        };
    }
    let text = String::from_utf8_lossy(body);
    let mut message: String = text.trim().chars().take(512).collect();
    if message.is_empty() {
        message = format!("the server answered {code}");
    }
    Status {
        code,
        reason: canonical,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_keep_their_text_and_parse_metadata() {
        let text = r#"{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c","namespace":"ns",
            "uid":"u","resourceVersion":"42","generation":3,"creationTimestamp":"2024-01-01T00:00:00Z",
            "finalizers":["b","a"],"labels":{"z":"1","a":"2","n":3},"annotations":{"k":"v"}}}"#;
        let o = object(text.to_owned(), "batch/v1", "CronJob").unwrap();
        assert_eq!(o.json, text);
        assert_eq!(
            o.target,
            ObjectRef {
                api_version: "batch/v1".into(),
                kind: "CronJob".into(),
                namespace: Some("ns".into()),
                name: "c".into()
            }
        );
        assert_eq!(
            o.metadata,
            Metadata {
                uid: "u".into(),
                resource_version: "42".into(),
                generation: Some(3),
                creation_timestamp: Some("2024-01-01T00:00:00Z".into()),
                deletion_timestamp: None,
                finalizers: vec!["b".into(), "a".into()],
                labels: vec![("a".into(), "2".into()), ("z".into(), "1".into())],
                annotations: vec![("k".into(), "v".into())],
            }
        );
        // A body without apiVersion/kind takes the asked-for ones.
        let bare = object("{}".into(), "v1", "ConfigMap").unwrap();
        assert_eq!(bare.target.kind, "ConfigMap");
        assert_eq!(bare.metadata.uid, "");
        assert!(matches!(
            object("[]".into(), "v1", "ConfigMap"),
            Err(Error::Unavailable(_))
        ));
        assert!(matches!(
            object("<html>".into(), "v1", "ConfigMap"),
            Err(Error::Unavailable(_))
        ));
    }

    #[test]
    fn list_items_keep_text_and_gain_type() {
        let text = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"abc"},
            "items":[{"metadata":{"name":"a","namespace":"ns","uid":"u1","labels":{"z":"1","a":"2"}},"data":{"k":"v"}}, {}, { }]}"#;
        let l = list(text, "v1", "ConfigMap").unwrap();
        assert_eq!(l.resource_version, "7");
        assert_eq!(l.continue_token.as_deref(), Some("abc"));
        assert_eq!(l.items.len(), 3);
        let a = &l.items[0];
        assert_eq!(a.target.namespace.as_deref(), Some("ns"));
        assert_eq!(a.target.name, "a");
        assert_eq!(a.target.kind, "ConfigMap");
        assert_eq!(
            a.metadata.labels,
            vec![("a".into(), "2".into()), ("z".into(), "1".into())]
        );
        let reparsed: Json = serde_json::from_str(&a.json).unwrap();
        assert_eq!(reparsed["kind"], "ConfigMap");
        assert_eq!(reparsed["apiVersion"], "v1");
        assert_eq!(reparsed["data"]["k"], "v");
        for empty in &l.items[1..] {
            let json: Json = serde_json::from_str(&empty.json).unwrap();
            assert_eq!(
                json,
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"})
            );
        }
        let typed =
            r#"{"metadata":{"continue":""},"items":[{"apiVersion":"v1","kind":"ConfigMap"}]}"#;
        let l = list(typed, "v1", "ConfigMap").unwrap();
        assert_eq!(l.continue_token, None);
        assert_eq!(l.resource_version, "");
        assert_eq!(l.items[0].json, r#"{"apiVersion":"v1","kind":"ConfigMap"}"#);
        assert_eq!(list("{}", "v1", "ConfigMap").unwrap().items, Vec::new());
        assert!(matches!(
            list(r#"{"items":[1]}"#, "v1", "ConfigMap"),
            Err(Error::Unavailable(_))
        ));
        assert!(matches!(
            list("nope", "v1", "ConfigMap"),
            Err(Error::Unavailable(_))
        ));
    }

    #[test]
    fn status_from_body_or_code() {
        let s = status(
            404,
            br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","message":"x not found","code":404}"#,
        );
        assert_eq!(
            s,
            Status {
                code: 404,
                reason: "NotFound".into(),
                message: "x not found".into()
            }
        );
        let s = status(409, br#"{"kind":"Status","reason":"","message":"m"}"#);
        assert_eq!(s.reason, "Conflict");
        let s = status(503, b"");
        assert_eq!(s.reason, "ServiceUnavailable");
        assert_eq!(s.message, "the server answered 503");
        let s = status(500, b"<html>oops</html>");
        assert_eq!(s.message, "<html>oops</html>");
        let s = status(599, &[0xff; 2000]);
        assert_eq!(s.reason, "Unknown");
        assert_eq!(s.message.chars().count(), 512);
    }

    #[test]
    fn delete_responses() {
        let gone = r#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#;
        assert_eq!(deleted(gone.into(), "v1", "ConfigMap").unwrap(), None);
        let pending = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","deletionTimestamp":"2024-01-01T00:00:00Z","finalizers":["f"]}}"#;
        let obj = deleted(pending.into(), "v1", "ConfigMap").unwrap().unwrap();
        assert_eq!(obj.metadata.finalizers, vec!["f".to_owned()]);
        assert_eq!(obj.json, pending);
        let last_state = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}"#;
        assert_eq!(deleted(last_state.into(), "v1", "ConfigMap").unwrap(), None);
        assert!(deleted("nope".into(), "v1", "ConfigMap").is_err());
    }
}
