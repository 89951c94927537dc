//! Content negotiation: the shape an object is served in (JSON, a `Table`, partial metadata,
//! protobuf) and the view of the version asked for.

use crate::front::shared::{Query, crd_of};
use crate::resources::{ResourceDef, Shape};
use crate::status::ApiError;
use crate::store::{Obj, Store};
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;

/// Alternative representations a client can ask for with `Accept`.
#[derive(Clone)]
pub(crate) enum Printer {
    /// Server-side printing (with the CRD, for custom resources' printer columns), each row
    /// carrying what `includeObject` asked for.
    Table {
        crd: Option<Value>,
        include: crate::table::Include,
    },
    /// `PartialObjectMetadata` (metadata-only clients).
    Metadata,
}

fn partial_metadata(o: &Obj) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.value["metadata"].clone(),
    })
}

impl Printer {
    /// The representation the `Accept` header asks for: `PartialObjectMetadata`, a `Table` (with
    /// the CRD of a custom resource, for its printer columns), or None for the plain object. A 400
    /// when `includeObject` is not `None`, `Metadata` or `Object`.
    pub(crate) fn from_accept(
        store: &Store,
        def: &ResourceDef,
        accept: &str,
        query: &Query,
    ) -> Result<Option<Printer>, ApiError> {
        let first = accept.split(',').next().unwrap_or_default();
        if first.contains("as=PartialObjectMetadata") {
            return Ok(Some(Printer::Metadata));
        }
        if !crate::table::wanted(accept) {
            return Ok(None);
        }
        let include = crate::table::Include::parse(query.get("includeObject"))?;
        let crd = crd_of(store, def).map(|o| o.value.clone());
        Ok(Some(Printer::Table { crd, include }))
    }

    /// One object.
    pub(crate) fn one(&self, def: &ResourceDef, o: &Arc<Obj>) -> Value {
        match self {
            Printer::Table { crd, include } => crate::table::render(
                def,
                crd.as_ref(),
                o.rv,
                std::slice::from_ref(o),
                None,
                *include,
                &|o| served_value(def, o),
            ),
            Printer::Metadata => partial_metadata(o),
        }
    }

    /// One object in this representation, serialized as JSON (see [`Printer::one`]).
    pub(crate) fn encode(&self, def: &ResourceDef, o: &Arc<Obj>) -> Bytes {
        Bytes::from(serde_json::to_vec(&self.one(def, o)).unwrap_or_default())
    }

    /// A list.
    pub(crate) fn many(
        &self,
        def: &ResourceDef,
        rv: u64,
        items: &[Arc<Obj>],
        cont: Option<&str>,
    ) -> Value {
        match self {
            Printer::Table { crd, include } => {
                crate::table::render(def, crd.as_ref(), rv, items, cont, *include, &|o| {
                    served_value(def, o)
                })
            }
            Printer::Metadata => {
                let mut meta = json!({"resourceVersion": rv.to_string()});
                if let Some(c) = cont {
                    meta["continue"] = json!(c);
                }
                json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                    "items": items.iter().map(|o| partial_metadata(o)).collect::<Vec<_>>(),
                })
            }
        }
    }
}

/// An error of the stored kind's operations as the kind asked for reports it: `events "x" not
/// found` is `events.events.k8s.io "x" not found` when asked through `events.k8s.io`.
pub(crate) fn as_served(def: &ResourceDef, stored: &ResourceDef, mut e: ApiError) -> ApiError {
    if def.group == stored.group {
        return e;
    }
    for (from, to) in [
        (
            crate::status::qualified(&stored.group, &stored.plural),
            crate::status::qualified(&def.group, &def.plural),
        ),
        (
            crate::status::qualified(&stored.group, &stored.kind),
            crate::status::qualified(&def.group, &def.kind),
        ),
    ] {
        let (from, to) = (format!("{from} \""), format!("{to} \""));
        if let Some(at) = e.message.find(&from) {
            e.message.replace_range(at..at + from.len(), &to);
            break;
        }
    }
    if let Some(d) = e.details.as_mut()
        && d.group == stored.group
        && (d.kind == stored.plural || d.kind == stored.kind)
    {
        d.group = def.group.clone();
    }
    e
}

/// An object as the client reads it (what [`obj_bytes`] encodes).
fn served_value(def: &ResourceDef, o: &Obj) -> Value {
    if def.shape != Shape::Stored {
        return def.shape.view(&o.value);
    }
    let mut v = o.value.clone();
    if def.custom {
        v["apiVersion"] = json!(def.api_version());
    }
    v
}

/// The serialized object, with apiVersion rewritten when served under another CR version, or
/// in another shape than stored; the stored bytes themselves when neither applies.
pub(crate) fn obj_bytes(def: &ResourceDef, o: &Obj) -> Bytes {
    if def.shape != Shape::Stored {
        return Bytes::from(serde_json::to_vec(&def.shape.view(&o.value)).unwrap_or_default());
    }
    if !def.custom || o.value["apiVersion"].as_str() == Some(def.api_version().as_str()) {
        return o.bytes.clone();
    }
    let mut v = o.value.clone();
    v["apiVersion"] = json!(def.api_version());
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}
