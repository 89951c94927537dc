//! Parsing API server responses into [`Object`]s, lists and `Status`es.

use serde::Deserialize;
use serde_json::Value as Json;
use serde_json::value::RawValue;

use crate::error::{KubeError, Result};
use crate::types::{Change, ChangeType, Metadata, Object, ObjectList, ObjectRef, Status};

fn malformed(what: &str, e: impl std::fmt::Display) -> KubeError {
    KubeError::Unavailable(format!("malformed {what} from the API server: {e}"))
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

/// The decision-relevant metadata of an object (missing fields are empty).
pub fn metadata(object: &Json) -> Metadata {
    let Some(m) = object.get("metadata") else {
        return Metadata::default();
    };
    Metadata {
        uid: string_at(m, "uid").unwrap_or_default(),
        resource_version: string_at(m, "resourceVersion").unwrap_or_default(),
        generation: m.get("generation").and_then(Json::as_i64),
        creation_timestamp: string_at(m, "creationTimestamp"),
        deletion_timestamp: string_at(m, "deletionTimestamp"),
        finalizers: m
            .get("finalizers")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        labels: pairs(m.get("labels")),
        annotations: pairs(m.get("annotations")),
    }
}

/// Builds an [`Object`] from already parsed JSON and its text. `api_version` and `kind` are
/// used when the body lacks them.
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
pub fn object(text: String, api_version: &str, kind: &str) -> Result<Object> {
    let json: Json = serde_json::from_str(&text).map_err(|e| malformed("object", e))?;
    if !json.is_object() {
        return Err(malformed("object", "not a JSON object"));
    }
    Ok(object_from(&json, text, api_version, kind))
}

/// Whether a delete response is a `Status` (the object is gone) rather than the object.
pub fn is_status(json: &Json) -> bool {
    json.get("kind").and_then(Json::as_str) == Some("Status")
        && json.get("apiVersion").and_then(Json::as_str) == Some("v1")
}

/// Parses a delete response: `None` when the object is gone, else the object.
pub fn deleted(text: String, api_version: &str, kind: &str) -> Result<Option<Object>> {
    let json: Json = serde_json::from_str(&text).map_err(|e| malformed("delete response", e))?;
    if is_status(&json) {
        return Ok(None);
    }
    let object = object_from(&json, text, api_version, kind);
    // An object without a deletionTimestamp is the last state of one that is already gone.
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

/// Parses a list response; each item keeps its served text, with `apiVersion`/`kind` added when
/// missing.
pub fn list(text: &str, api_version: &str, kind: &str) -> Result<ObjectList> {
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

/// One line of a watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// An object was added, modified or deleted (boxed: it dwarfs the other variants).
    Change(Box<Change>),
    /// The stream has reached this resourceVersion; nothing to act on.
    Bookmark(String),
    /// The server ended the watch with this `Status` (a 410 when the version is too old).
    Error(Status),
}

impl WatchEvent {
    /// The resourceVersion the stream has reached with this event, if it says.
    pub fn resource_version(&self) -> Option<&str> {
        match self {
            WatchEvent::Change(change) => Some(&change.object.metadata.resource_version),
            WatchEvent::Bookmark(rv) => Some(rv),
            WatchEvent::Error(_) => None,
        }
    }
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// Parses one line of a watch stream of `kind` objects, keeping the object's served text.
pub fn watch_event(line: &str, api_version: &str, kind: &str) -> Result<WatchEvent> {
    let raw: RawEvent<'_> = serde_json::from_str(line).map_err(|e| malformed("watch event", e))?;
    let change_type = match raw.event_type.as_str() {
        "ADDED" => ChangeType::Added,
        "MODIFIED" => ChangeType::Modified,
        "DELETED" => ChangeType::Deleted,
        "BOOKMARK" => {
            let json: Json = serde_json::from_str(raw.object.get())
                .map_err(|e| malformed("watch bookmark", e))?;
            return Ok(WatchEvent::Bookmark(
                json.pointer("/metadata/resourceVersion")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ));
        }
        "ERROR" => {
            let body = raw.object.get().as_bytes();
            let code = serde_json::from_slice::<Json>(body)
                .ok()
                .and_then(|j| j.get("code").and_then(Json::as_u64))
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(500);
            return Ok(WatchEvent::Error(status(code, body)));
        }
        other => return Err(malformed("watch event", format!("unknown type {other:?}"))),
    };
    let object = self::object(raw.object.get().to_owned(), api_version, kind)?;
    Ok(WatchEvent::Change(Box::new(Change {
        change_type,
        object,
    })))
}

/// The `Status` of a failed response: from its body when it is one, else from the HTTP status.
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
    fn watch_lines_are_changes_bookmarks_or_errors() {
        let added = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","uid":"u","resourceVersion":"12"}}}"#;
        let WatchEvent::Change(change) = watch_event(added, "v1", "Namespace").unwrap() else {
            panic!("a change");
        };
        assert_eq!(change.change_type, ChangeType::Added);
        assert_eq!(
            change.object.target,
            ObjectRef::cluster("v1", "Namespace", "a")
        );
        assert_eq!(change.object.metadata.resource_version, "12");
        assert!(
            change.object.json.contains(r#""uid":"u""#),
            "the served text is kept"
        );
        let deleted =
            r#"{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"13"}}}"#;
        let event = watch_event(deleted, "v1", "Namespace").unwrap();
        assert!(matches!(&event, WatchEvent::Change(c) if c.change_type == ChangeType::Deleted));
        assert_eq!(event.resource_version(), Some("13"));
        let bookmark = r#"{"type":"BOOKMARK","object":{"kind":"Namespace","apiVersion":"v1","metadata":{"resourceVersion":"20"}}}"#;
        assert_eq!(
            watch_event(bookmark, "v1", "Namespace").unwrap(),
            WatchEvent::Bookmark("20".into())
        );
        let expired = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        let WatchEvent::Error(status) = watch_event(expired, "v1", "Namespace").unwrap() else {
            panic!("an error");
        };
        assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        assert!(watch_event("{}", "v1", "Namespace").is_err());
        assert!(watch_event(r#"{"type":"WHAT","object":{}}"#, "v1", "Namespace").is_err());
    }

    #[test]
    fn list_items_keep_text_and_gain_type() {
        let text = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"abc"},
            "items":[{"metadata":{"name":"a","namespace":"ns","uid":"u1","labels":{"z":"1","a":"2"}},"data":{"k":"v"}}, {}]}"#;
        let l = list(text, "v1", "ConfigMap").unwrap();
        assert_eq!(l.resource_version, "7");
        assert_eq!(l.continue_token.as_deref(), Some("abc"));
        assert_eq!(l.items.len(), 2);
        let a = &l.items[0];
        assert_eq!(
            a.target,
            ObjectRef::namespaced("v1", "ConfigMap", "ns", "a")
        );
        assert_eq!(
            a.metadata.labels,
            vec![("a".into(), "2".into()), ("z".into(), "1".into())]
        );
        let reparsed: Json = serde_json::from_str(&a.json).unwrap();
        assert_eq!(reparsed["kind"], "ConfigMap");
        assert_eq!(reparsed["data"]["k"], "v");
        let empty: Json = serde_json::from_str(&l.items[1].json).unwrap();
        assert_eq!(empty["apiVersion"], "v1");
    }

    #[test]
    fn status_from_body_or_code() {
        let s = status(404, br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","message":"x not found","code":404}"#);
        assert_eq!(
            s,
            Status {
                code: 404,
                reason: "NotFound".into(),
                message: "x not found".into()
            }
        );
        let s = status(503, b"");
        assert_eq!(s.reason, "ServiceUnavailable");
        let s = status(500, b"<html>oops</html>");
        assert_eq!(s.message, "<html>oops</html>");
    }

    #[test]
    fn delete_responses() {
        let gone = r#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#;
        assert_eq!(deleted(gone.into(), "v1", "ConfigMap").unwrap(), None);
        let pending = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","deletionTimestamp":"2024-01-01T00:00:00Z","finalizers":["f"]}}"#;
        let obj = deleted(pending.into(), "v1", "ConfigMap").unwrap().unwrap();
        assert_eq!(obj.metadata.finalizers, vec!["f".to_owned()]);
        let last_state = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}"#;
        assert_eq!(deleted(last_state.into(), "v1", "ConfigMap").unwrap(), None);
        assert!(deleted("nope".into(), "v1", "ConfigMap").is_err());
    }
}
