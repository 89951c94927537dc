//! `events.k8s.io/v1` Events: another view of the core `v1` Events, as on a real server, where
//! both APIs read and write the same stored objects (`pkg/apis/events/v1` conversion). Objects
//! are stored in the core shape; this module converts between the two shapes and applies the
//! stricter checks the real server makes on an Event created through `events.k8s.io/v1`.

use serde_json::{Value, json};

use crate::shape::RENAMED;
use crate::status::Cause;
use crate::validation::{self, invalid_causes, json_type, qualified_name};

/// Refuses (400) an Event, in either shape, whose fields have the wrong JSON types, as the
/// decoder does.
pub fn check_decodable(
    event: &Value,
    shape: crate::resources::Shape,
) -> Result<(), crate::status::ApiError> {
    match decode_error(event, shape) {
        None => Ok(()),
        Some(why) => Err(crate::status::ApiError::bad_request(format!(
            "Event in version \"v1\" cannot be handled as a Event: json: {why}"
        ))),
    }
}

/// The name of a field in the `events.k8s.io/v1` shape.
fn v1_name(name: &str, shape: crate::resources::Shape) -> &str {
    match shape {
        crate::resources::Shape::EventsV1 => name,
        crate::resources::Shape::Stored => RENAMED
            .iter()
            .find(|(core, _)| *core == name)
            .map_or(name, |(_, v1)| v1),
    }
}

/// Whether a JSON value can be decoded as a field's Go type.
type Fits = fn(&Value) -> bool;

fn decode_error(event: &Value, shape: crate::resources::Shape) -> Option<String> {
    let Some(fields) = event.as_object() else {
        return Some(format!(
            "cannot unmarshal {} into Go value of type v1.Event",
            json_type(event)
        ));
    };

    let expected = |name: &str| -> Option<(&str, Fits)> {
        Some(match name {
            "metadata" => ("v1.ObjectMeta", Value::is_object),
            "regarding" | "related" => ("v1.ObjectReference", Value::is_object),
            "series" => ("v1.EventSeries", Value::is_object),
            "deprecatedSource" => ("v1.EventSource", Value::is_object),
            "note"
            | "reason"
            | "type"
            | "action"
            | "reportingController"
            | "reportingInstance"
            | "eventTime"
            | "deprecatedFirstTimestamp"
            | "deprecatedLastTimestamp"
            | "apiVersion"
            | "kind" => ("string", Value::is_string),
            "deprecatedCount" => ("int32", |v| {
                v.as_i64().is_some_and(|n| i32::try_from(n).is_ok())
            }),
            _ => return None,
        })
    };
    for (name, value) in fields {
        if value.is_null() {
            continue;
        }
        if let Some((go_type, fits)) = expected(v1_name(name, shape))
            && !fits(value)
        {
            return Some(format!(
                "cannot unmarshal {} into Go struct field Event.{name} of type {go_type}",
                json_type(value)
            ));
        }
    }
    None
}

/// What the real server refuses in an Event created through `events.k8s.io/v1`
/// (`ValidateEventCreate` with its legacy checks), reported at the `events.k8s.io/v1` field names.
pub fn create_causes(v1: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    let text = |f: &str| v1.get(f).and_then(Value::as_str).unwrap_or_default();
    let required = |field: &str| validation::required(field, "");
    let controller = text("reportingController");
    if controller.is_empty() {
        causes.push(required("reportingController"));
    } else {
        causes.extend(invalid_causes(
            "reportingController",
            &json!(controller),
            qualified_name(controller),
        ));
    }
    for field in ["reportingInstance", "action", "reason"] {
        let value = text(field);
        if value.is_empty() {
            causes.push(required(field));
        } else if value.len() > 128 {
            causes.push(validation::invalid(
                field,
                json!(value),
                "can have at most 128 characters",
            ));
        }
    }
    let note = text("note");
    if note.len() > 1024 {
        causes.push(validation::too_long(
            "note",
            "may not be more than 1024 bytes",
        ));
    }
    if text("eventTime").is_empty() {
        causes.push(required("eventTime"));
    }
    let kind = text("type");
    if kind != "Normal" && kind != "Warning" {
        let why = format!("has invalid value: {kind}");
        causes.push(validation::invalid("type", "\"\"", &why));
    }
    let set = |f: &str| {
        v1.get(f).is_some_and(|v| match v {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Number(n) => n.as_i64() != Some(0),
            Value::Object(m) => m
                .values()
                .any(|v| v.as_str().is_some_and(|s| !s.is_empty())),
            _ => true,
        })
    };
    for f in [
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
        "deprecatedSource",
    ] {
        if set(f) {
            causes.push(validation::invalid(f, "\"\"", "needs to be unset"));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{from_core, to_core};

    fn recorder_event() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default"},
            "regarding": {"kind": "Service", "name": "web", "namespace": "default"},
            "note": "reconciled", "reason": "Synced", "action": "Reconcile", "type": "Normal",
            "eventTime": "2026-11-30T18:00:00.000000Z",
            "reportingController": "lethe.dev/ctl", "reportingInstance": "ctl-0",
            "series": {"count": 2, "lastObservedTime": "2026-11-30T18:01:00.000000Z"},
        })
    }

    #[test]
    fn the_two_shapes_convert_into_each_other() {
        let v1 = recorder_event();
        let core = to_core(&v1);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "web");
        assert_eq!(core["message"], "reconciled");
        assert_eq!(core["reportingComponent"], "lethe.dev/ctl");
        assert_eq!(core["series"]["count"], 2);
        assert!(core.get("regarding").is_none());
        assert_eq!(from_core(&core), v1);
    }

    #[test]
    fn a_legacy_event_shows_its_old_fields_as_deprecated_ones() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod"}, "message": "m", "count": 3,
            "source": {"component": "kubelet"}, "firstTimestamp": "2026-11-30T18:00:00Z",
        });
        let v1 = from_core(&core);
        assert_eq!(v1["deprecatedCount"], 3);
        assert_eq!(v1["deprecatedSource"]["component"], "kubelet");
        assert_eq!(v1["deprecatedFirstTimestamp"], "2026-11-30T18:00:00Z");
        let empty = from_core(&json!({"metadata": {}, "count": 0, "source": {}}));
        assert!(empty.get("deprecatedCount").is_none() && empty.get("deprecatedSource").is_none());
    }

    #[test]
    fn a_complete_event_passes_and_each_missing_part_is_named() {
        assert!(create_causes(&recorder_event()).is_empty());
        let causes =
            create_causes(&json!({"metadata": {"name": "x"}, "type": "Odd", "deprecatedCount": 2}));
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
                "eventTime",
                "type",
                "deprecatedCount"
            ]
        );
    }

    #[test]
    fn fields_of_the_wrong_type_cannot_be_decoded() {
        assert!(check_decodable(&recorder_event(), crate::resources::Shape::EventsV1).is_ok());
        let e = check_decodable(&json!([1]), crate::resources::Shape::EventsV1).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message
                .ends_with("cannot unmarshal array into Go value of type v1.Event"),
            "{}",
            e.message
        );
        for (field, value, found) in [
            ("regarding", json!("x"), "string"),
            ("eventTime", json!(5), "number"),
            ("series", json!("bad"), "string"),
            ("deprecatedCount", json!("3"), "string"),
        ] {
            let mut ev = recorder_event();
            ev[field] = value;
            let e = check_decodable(&ev, crate::resources::Shape::EventsV1).unwrap_err();
            assert!(
                e.message.contains(&format!(
                    "cannot unmarshal {found} into Go struct field Event.{field} "
                )),
                "{}",
                e.message
            );
        }
    }
}
