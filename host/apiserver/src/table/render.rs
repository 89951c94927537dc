//! The Table answer: whether a client asked for one, and the rows it gets.

use crate::resources::ResourceDef;
use crate::store::Obj;
use crate::table::columns::{cells, columns};
use serde_json::{Value, json};
use std::sync::Arc;

/// Whether the client asked for a Table.
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// What each row carries as its `object` (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Include {
    /// `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object (kubectl asks for it to sort by a field).
    Object,
    /// Nothing.
    None,
}

impl Include {
    /// The `includeObject` parameter; the server refuses a value it does not know.
    pub fn parse(value: Option<&str>) -> Result<Include, crate::status::ApiError> {
        match value {
            None | Some("") | Some("Metadata") => Ok(Include::Metadata),
            Some("Object") => Ok(Include::Object),
            Some("None") => Ok(Include::None),
            Some(other) => Err(crate::status::ApiError::bad_request(format!(
                "unrecognized includeObject value: {}",
                crate::validation::go_quote(other)
            ))),
        }
    }
}

pub(super) fn row(
    def: &ResourceDef,
    crd: Option<&Value>,
    o: &Obj,
    include: Include,
    whole: &dyn Fn(&Obj) -> Value,
) -> Value {
    let object = match include {
        Include::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.value["metadata"].clone(),
        }),
        Include::Object => whole(o),
        Include::None => Value::Null,
    };
    json!({
        "cells": cells(def, crd, &o.value),
        "object": object,
    })
}

/// A Table of `items`; `whole` gives an object as the client reads it, for rows that carry it.
pub fn render(
    def: &ResourceDef,
    crd: Option<&Value>,
    rv: u64,
    items: &[Arc<Obj>],
    cont: Option<&str>,
    include: Include,
    whole: &dyn Fn(&Obj) -> Value,
) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns(def, crd),
        "rows": items
            .iter()
            .map(|o| row(def, crd, o, include, whole))
            .collect::<Vec<_>>(),
    })
}
