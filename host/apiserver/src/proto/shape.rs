//! The shape of a protobuf schema table: a message is a list of (field number, JSON name, type).

#[derive(Clone, Copy)]
pub(super) enum T {
    Str,
    /// A pointer field, or one without `omitempty`: its presence on the wire is the value.
    Int,
    /// A plain `omitempty` field: gogo-protobuf writes it even when zero, Go's JSON encoder
    /// leaves it out, so zero means "absent".
    IntOmitEmpty,
    Bool,
    Time,
    MicroTime,
    Msg(&'static [(u32, &'static str, T)]),
    MapStr,
    MapBytes,
    RepStr,
    RepMsg(&'static [(u32, &'static str, T)]),
}

pub(super) type Schema = &'static [(u32, &'static str, T)];
