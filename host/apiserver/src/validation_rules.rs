//! The CEL rules of CRD schemas (`x-kubernetes-validations`), as the apiextensions server checks
//! them: each rule is evaluated with `self` bound to the value at its schema node (and `oldSelf`
//! to the previous value, for transition rules on an update), and a rule that does not hold is a
//! cause at that node's path.
//!
//! The rules are evaluated with the `cel` crate's standard library; Kubernetes' extension
//! libraries (quantities, URLs, IP addresses, `isSorted`…) are not provided, and a rule calling
//! them fails as an undeclared reference.

use crate::status::Cause;
use crate::validation::field_path;
use serde_json::{Value, json};

/// Why `rule` does not compile, if it does not.
pub fn compile_error(rule: &str) -> Option<String> {
    cel::Program::compile(rule).err().map(|e| e.to_string())
}

/// Every rule in `schema` (an `openAPIV3Schema`) that does not compile, with the schema path of
/// its `rule` field (`.properties[spec].x-kubernetes-validations[0].rule`).
pub fn schema_compile_errors(schema: &Value) -> Vec<(String, String, String)> {
    let mut out = vec![];
    schema_rules(schema, "", &mut out);
    out
}

/// Whether `schema` has any CEL rule at all (the server builds no CEL validator without one).
pub fn has_rules(schema: &Value) -> bool {
    schema["x-kubernetes-validations"]
        .as_array()
        .is_some_and(|rules| !rules.is_empty())
        || schema["properties"]
            .as_object()
            .is_some_and(|props| props.values().any(has_rules))
        || (schema["additionalProperties"].is_object()
            && has_rules(&schema["additionalProperties"]))
        || (schema["items"].is_object() && has_rules(&schema["items"]))
}

fn schema_rules(schema: &Value, path: &str, out: &mut Vec<(String, String, String)>) {
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        for (i, r) in rules.iter().enumerate() {
            let rule = r["rule"].as_str().unwrap_or_default();
            if let Some(why) = compile_error(rule) {
                out.push((
                    format!("{path}.x-kubernetes-validations[{i}].rule"),
                    rule.to_string(),
                    why,
                ));
            }
        }
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, s) in props {
            schema_rules(s, &format!("{path}.properties[{k}]"), out);
        }
    }
    if schema["additionalProperties"].is_object() {
        schema_rules(
            &schema["additionalProperties"],
            &format!("{path}.additionalProperties"),
            out,
        );
    }
    if schema["items"].is_object() {
        schema_rules(&schema["items"], &format!("{path}.items"), out);
    }
}

/// The causes of the rules `value` breaks, `old` being the object it replaces (for transition
/// rules). `path` is the field path of `value` (empty at the root, which the server names
/// `<nil>`).
pub fn causes(schema: &Value, value: &Value, old: Option<&Value>, path: &str) -> Vec<Cause> {
    let mut out = vec![];
    walk(schema, value, old, path, &mut out);
    out
}

fn walk(schema: &Value, value: &Value, old: Option<&Value>, path: &str, out: &mut Vec<Cause>) {
    if value.is_null() {
        return;
    }
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        for rule in rules {
            if let Some(cause) = check(schema, rule, value, old, path) {
                out.push(cause);
            }
        }
    }
    match value {
        Value::Object(members) => {
            let props = schema["properties"].as_object();
            let extra = &schema["additionalProperties"];
            for (key, member) in members {
                let old_member = old.and_then(|o| o.get(key));
                if let Some(s) = props.and_then(|p| p.get(key)) {
                    walk(s, member, old_member, &field_path(path, key), out);
                } else if extra.is_object() {
                    walk(extra, member, old_member, &format!("{path}[{key}]"), out);
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            let keys = crate::util::string_list(&schema["x-kubernetes-list-map-keys"]);
            for (i, item) in items.iter().enumerate() {
                // Items of a map list are matched to their old selves by their keys.
                let old_item = (schema["x-kubernetes-list-type"] == "map" && !keys.is_empty())
                    .then(|| {
                        old.and_then(Value::as_array).and_then(|o| {
                            o.iter()
                                .find(|x| keys.iter().all(|k| x.get(k) == item.get(k)))
                        })
                    })
                    .flatten();
                walk(
                    &schema["items"],
                    item,
                    old_item,
                    &format!("{path}[{i}]"),
                    out,
                );
            }
        }
        _ => {}
    }
}

/// The cause of one rule at one node, or None when the rule holds (or does not apply: a
/// transition rule without an old value).
fn check(
    schema: &Value,
    rule: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
) -> Option<Cause> {
    let text = rule["rule"].as_str()?.trim();
    let transition = text.contains("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let program = cel::Program::compile(text).ok()?;
    let mut context = cel::Context::default();
    context
        .add_variable("self", cel::to_value(value).ok()?)
        .ok()?;
    if let Some(old) = old {
        context
            .add_variable("oldSelf", cel::to_value(old).ok()?)
            .ok()?;
    }
    let kind = schema["type"].as_str().unwrap_or_default();
    let field = match rule["fieldPath"].as_str().filter(|p| !p.is_empty()) {
        Some(extra) => format!("{path}{extra}"),
        None if path.is_empty() => "<nil>".into(),
        None => path.to_string(),
    };
    let message = rule["message"]
        .as_str()
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let shown = message.unwrap_or(text);
    let invalid = |why: String| crate::validation::invalid(field.clone(), json!(kind), &why);
    match program.execute(&context) {
        Ok(cel::Value::Bool(true)) => None,
        Ok(cel::Value::Bool(false)) => {
            let detail = message_expression(rule, &context)
                .or_else(|| message.map(str::to_string))
                .unwrap_or_else(|| format!("failed rule: {text}"));
            Some(match rule["reason"].as_str() {
                Some("FieldValueForbidden") => crate::validation::forbidden(field, &detail),
                Some("FieldValueRequired") => Cause {
                    reason: "FieldValueRequired",
                    message: format!("Required value: {detail}"),
                    field,
                },
                Some("FieldValueDuplicate") => crate::validation::duplicate(field, json!(kind)),
                _ => invalid(detail),
            })
        }
        Ok(_) => Some(invalid(format!(
            "rule did not evaluate to a bool evaluating rule: {shown}"
        ))),
        Err(e) => {
            let why = match e {
                cel::ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
                other => other.to_string(),
            };
            Some(invalid(format!("{why} evaluating rule: {shown}")))
        }
    }
}

/// The message a rule's `messageExpression` computes, when it has one that yields a string.
fn message_expression(rule: &Value, context: &cel::Context) -> Option<String> {
    let expression = rule["messageExpression"].as_str()?;
    match cel::Program::compile(expression)
        .ok()?
        .execute(context)
        .ok()?
    {
        cel::Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_has_rules_only_if_some_level_carries_them() {
        assert!(has_rules(&schema()));
        assert!(!has_rules(
            &json!({"type": "object", "properties": {"spec": {
            "type": "array", "items": {"type": "object", "x-kubernetes-validations": []}}}})
        ));
        assert!(has_rules(
            &json!({"type": "object", "properties": {"spec": {
            "type": "array", "items": {"type": "object",
                "x-kubernetes-validations": [{"rule": "true"}]}}}})
        ));
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.minReplicas <= self.maxReplicas", "message": "min must not exceed max"},
                {"rule": "self.name.startsWith('w')"},
                {"rule": "self.maxReplicas >= oldSelf.maxReplicas", "reason": "FieldValueForbidden",
                 "messageExpression": "'may not shrink from ' + string(oldSelf.maxReplicas)"},
            ],
            "properties": {
                "minReplicas": {"type": "integer"},
                "maxReplicas": {"type": "integer"},
                "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "size(self) <= 3", "message": "too long"}]}},
            },
        }}})
    }

    fn messages(causes: Vec<Cause>) -> Vec<(String, String, &'static str)> {
        causes
            .into_iter()
            .map(|c| (c.field, c.message, c.reason))
            .collect()
    }

    #[test]
    fn rules_that_do_not_hold_are_causes_at_their_nodes() {
        let ok =
            json!({"spec": {"minReplicas": 1, "maxReplicas": 2, "name": "web", "tags": ["a"]}});
        assert!(causes(&schema(), &ok, None, "").is_empty());
        let bad =
            json!({"spec": {"minReplicas": 3, "maxReplicas": 2, "name": "db", "tags": ["abcd"]}});
        assert_eq!(
            messages(causes(&schema(), &bad, None, "")),
            vec![
                (
                    "spec".to_string(),
                    "Invalid value: \"object\": min must not exceed max".to_string(),
                    "FieldValueInvalid"
                ),
                (
                    "spec".to_string(),
                    "Invalid value: \"object\": failed rule: self.name.startsWith('w')".to_string(),
                    "FieldValueInvalid"
                ),
                (
                    "spec.tags[0]".to_string(),
                    "Invalid value: \"string\": too long".to_string(),
                    "FieldValueInvalid"
                ),
            ]
        );
    }

    #[test]
    fn transition_rules_compare_with_the_old_object_on_updates_only() {
        let old = json!({"spec": {"minReplicas": 1, "maxReplicas": 5, "name": "web"}});
        let new = json!({"spec": {"minReplicas": 1, "maxReplicas": 4, "name": "web"}});
        assert!(causes(&schema(), &new, None, "").is_empty());
        assert_eq!(
            messages(causes(&schema(), &new, Some(&old), "")),
            vec![(
                "spec".to_string(),
                "Forbidden: may not shrink from 5".to_string(),
                "FieldValueForbidden"
            )]
        );
    }

    #[test]
    fn a_missing_field_is_an_evaluation_error_and_bad_rules_do_not_compile() {
        let missing = json!({"spec": {"minReplicas": 1, "name": "web"}});
        let found = messages(causes(&schema(), &missing, None, ""));
        assert_eq!(
            found[0].1,
            "Invalid value: \"object\": no such key: maxReplicas evaluating rule: min must not exceed max"
        );
        assert!(compile_error("self.x ==").is_some());
        assert!(compile_error("self.x == 1").is_none());
        let broken = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.("}]}}});
        let errors = schema_compile_errors(&broken);
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].0,
            ".properties[spec].x-kubernetes-validations[0].rule"
        );
    }
}
