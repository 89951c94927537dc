//! LIST and WATCH: selectors, pagination with continue tokens, resourceVersion semantics,
//! bookmarks and the event stream.

use crate::front::negotiate::{Printer, obj_bytes};
use crate::front::respond::{Body, respond, respond_value, with_type};
use crate::front::shared::{Query, crd_of};
use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector, field_label_supported};
use crate::status::ApiError;
use crate::store::{EventType, ListRange, Obj, Store};
use base64::Engine;
use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// The `<Kind>List` of `items` at resourceVersion `rv`, written straight from each object's
/// cached bytes; `cont` and `remaining` become `metadata.continue` and `remainingItemCount`.
pub(crate) fn list_bytes(
    def: &ResourceDef,
    rv: u64,
    items: &[Arc<Obj>],
    cont: Option<&str>,
    remaining: Option<i64>,
) -> Bytes {
    let mut out = Vec::with_capacity(128 + items.iter().map(|o| o.bytes.len() + 1).sum::<usize>());
    out.extend_from_slice(b"{\"kind\":");
    out.extend_from_slice(json!(format!("{}List", def.kind)).to_string().as_bytes());
    out.extend_from_slice(b",\"apiVersion\":");
    out.extend_from_slice(json!(def.api_version()).to_string().as_bytes());
    out.extend_from_slice(b",\"metadata\":{\"resourceVersion\":\"");
    out.extend_from_slice(rv.to_string().as_bytes());
    out.push(b'"');
    if let Some(c) = cont {
        out.extend_from_slice(b",\"continue\":");
        out.extend_from_slice(json!(c).to_string().as_bytes());
    }
    if let Some(r) = remaining {
        out.extend_from_slice(b",\"remainingItemCount\":");
        out.extend_from_slice(r.to_string().as_bytes());
    }
    out.extend_from_slice(b"},\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&obj_bytes(def, o));
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// The `labelSelector` and `fieldSelector` of a list or watch. A 400 when either does not
/// parse, or when the field selector names a field the resource does not support (for custom
/// resources: name, namespace and the CRD's `selectableFields`).
pub(crate) fn selectors(
    store: &Store,
    def: &ResourceDef,
    query: &Query,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or_default())
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(query.get("fieldSelector").unwrap_or_default())
        .map_err(ApiError::bad_request)?;
    let custom_fields = crd_of(store, def)
        .map(|crd| crate::selector::crd_selectable_fields(&crd.value, &def.version))
        .unwrap_or_default();
    let supported = |f: &str| {
        if def.custom {
            f == "metadata.name"
                || (def.namespaced && f == "metadata.namespace")
                || custom_fields.iter().any(|c| c == f)
        } else {
            field_label_supported(&def.group, &def.plural, f)
        }
    };
    if let Some(f) = fields.fields().find(|f| !supported(f)) {
        return Err(ApiError::bad_request(if def.custom {
            format!("field label not supported: {f}")
        } else {
            crate::selector::field_label_error(&def.group, &def.plural, &f)
        }));
    }
    Ok((labels, fields))
}

/// A continue token as etcd3 storage writes it: unpadded URL-safe base64 of the JSON
/// `{"v","rv","start"}`, `start` being the next key relative to the list's prefix plus NUL.
fn encode_continue(rv: i64, start: &str) -> String {
    let v = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{start}\u{0}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

/// The key relative to the list's prefix: `ns/name` when listing a namespaced kind across
/// namespaces, else `name`.
fn continue_key(def: &ResourceDef, ns_filter: Option<&str>, ns: &str, name: &str) -> String {
    if def.namespaced && ns_filter.is_none() {
        format!("{ns}/{name}")
    } else {
        name.to_string()
    }
}

/// Decodes a continue token into its resourceVersion (-1: "the latest") and start key,
/// refusing what `storage.DecodeContinue` refuses (400 "invalid continue token: ...").
fn decode_continue(
    tok: &str,
    def: &ResourceDef,
    ns_filter: Option<&str>,
) -> Result<(i64, (String, String)), ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("invalid continue token: {why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok.trim_end_matches('='))
        .map_err(|e| invalid(&format!("continue key is not valid: {e}")))?;
    let v: Value = serde_json::from_slice(&raw)
        .map_err(|e| invalid(&format!("continue key is not valid: {e}")))?;
    if v["v"].as_str() != Some("meta.k8s.io/v1") {
        return Err(invalid(&format!(
            "continue key is not valid: server does not recognize this encoded version {}",
            v["v"].as_str().unwrap_or_default()
        )));
    }
    let rv = v["rv"].as_i64().unwrap_or(0);
    if rv == 0 {
        return Err(invalid(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let start = v["start"].as_str().unwrap_or_default();
    if start.is_empty() {
        return Err(invalid(
            "continue key is not valid: encoded start key empty",
        ));
    }
    let key = start.trim_end_matches('\u{0}');
    if key.split('/').any(|seg| seg == ".." || seg == ".") || key.starts_with('/') {
        return Err(invalid(&format!("continue key is not valid: {start}")));
    }
    // The token names the first key to return; `Store::list` wants the last key returned, and
    // a key followed by NUL sorts right after that key.
    let pos = if def.namespaced && ns_filter.is_none() {
        match key.split_once('/') {
            Some((n, name)) => (n.to_string(), name.to_string()),
            None => (key.to_string(), String::new()),
        }
    } else {
        (ns_filter.unwrap_or_default().to_string(), key.to_string())
    };
    Ok((rv, pos))
}

/// The namespace a list or watch is confined to: none for cluster-scoped kinds or all namespaces.
fn ns_filter<'a>(def: &ResourceDef, ns: &'a str) -> Option<&'a str> {
    (def.namespaced && !ns.is_empty()).then_some(ns)
}

/// A `resourceVersion` parameter as the version it names.
fn parse_rv(rv_param: &str) -> Result<u64, ApiError> {
    rv_param
        .parse::<u64>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param}")))
}

/// Waits (3 s at most, as the watch cache does) for the store to reach `wanted`; the 504
/// "too large resource version" error when it does not.
async fn caught_up(store: &Store, wanted: u64) -> Result<(), ApiError> {
    let reached = store.wait_for_rv(wanted, Duration::from_secs(3)).await;
    if reached < wanted {
        return Err(ApiError::too_large_resource_version(wanted, reached, 1));
    }
    Ok(())
}

/// A query boolean as Go's `strconv.ParseBool` reads it; None when absent or unreadable.
fn parse_go_bool(v: Option<&str>) -> Option<bool> {
    match v? {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// The query parameter most list options causes are about.
const MATCH: &str = "resourceVersionMatch";

/// `ValidateListOptions` (with the WatchList feature on, as in v1.32): 422 on
/// `ListOptions.meta.k8s.io ""`.
fn validate_list_options(query: &Query, watch: bool) -> Result<(), ApiError> {
    let rv = query.get("resourceVersion").unwrap_or_default();
    let rv_match = query.get("resourceVersionMatch").unwrap_or_default();
    let send_initial = query
        .get("sendInitialEvents")
        .is_some_and(|v| !v.is_empty());
    let cont = !query.get("continue").unwrap_or_default().is_empty();
    let matching = !rv_match.is_empty();
    // Every cause is about resourceVersionMatch but one; they come in the real server's order.
    let forbidden = |on: bool, why: &str| on.then(|| crate::validation::forbidden(MATCH, why));
    let unsupported = |on: bool, supported: &[&str]| {
        on.then(|| crate::validation::not_supported(MATCH, &json!(rv_match), supported))
    };
    let continued = "resourceVersionMatch is forbidden when continue is provided";
    let causes = if watch {
        [
            forbidden(
                send_initial && rv_match != "NotOlderThan",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ),
            forbidden(
                matching && !send_initial,
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ),
            unsupported(matching && rv_match != "NotOlderThan", &["NotOlderThan"]),
            forbidden(matching && cont, continued),
            None,
        ]
    } else {
        let why = "resourceVersionMatch is forbidden unless resourceVersion is provided";
        let exact_zero = "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"";
        let list_only = "sendInitialEvents is forbidden for list";
        [
            forbidden(matching && rv.is_empty(), why),
            forbidden(matching && cont, continued),
            unsupported(
                matching && rv_match != "Exact" && rv_match != "NotOlderThan",
                &["Exact", "NotOlderThan", ""],
            ),
            forbidden(rv_match == "Exact" && rv == "0", exact_zero),
            send_initial.then(|| crate::validation::forbidden("sendInitialEvents", list_only)),
        ]
    };
    let causes = causes.into_iter().flatten().collect();
    ApiError::invalid_if_any("meta.k8s.io", "ListOptions", "", causes)
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// LIST, as etcd3 storage and the watch cache serve it: selectors, `limit` pages with continue
/// tokens, and `resourceVersion` / `resourceVersionMatch` (unset: the latest; `0`: the cache,
/// unpaged; `NotOlderThan`: waits up to 3 s for the store to get there; `Exact`: the list as it
/// was). 410 for a version or continue token older than the history kept, 504 for a version
/// the store has not reached.
pub(crate) async fn list(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    query: &Query,
    printer: Option<&Printer>,
) -> Result<Response<Body>, ApiError> {
    validate_list_options(query, false)?;
    let (labels, fields) = selectors(store, def, query)?;
    let limit = query.int("limit")?;
    let ns_filter = ns_filter(def, ns);
    let rv_param = query.get("resourceVersion").unwrap_or_default();
    let rv_match = query.get("resourceVersionMatch").unwrap_or_default();
    // A list at version "0" is the watch cache's, which has no pages: the limit is ignored.
    let from_cache = rv_param == "0"
        && query.get("continue").is_none_or(str::is_empty)
        && matches!(rv_match, "" | "NotOlderThan");
    let max = if limit > 0 && !from_cache {
        limit as usize
    } else {
        usize::MAX
    };
    let mut after = None;
    // The version to list at, as etcd3 storage decides it: a continue token's, or the one asked
    // for exactly (`resourceVersionMatch=Exact`, or the legacy form: a limit with a version).
    let mut at = None;
    if let Some(c) = query.get("continue").filter(|c| !c.is_empty()) {
        if !rv_param.is_empty() && rv_param != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (rv, start) = decode_continue(c, def, ns_filter)?;
        after = Some(start);
        at = (rv > 0).then_some(rv as u64);
    } else if rv_match == "Exact" || (rv_match.is_empty() && limit > 0 && rv_param != "0") {
        if !rv_param.is_empty() {
            at = Some(parse_rv(rv_param)?);
        }
    } else if !rv_param.is_empty() && rv_param != "0" {
        // "Not older than": served once the store has caught up, as the watch cache waits.
        caught_up(store, parse_rv(rv_param)?).await?;
    }
    if let Some(at) = at {
        let current = store.current_rv();
        if at > current {
            return Err(ApiError::too_large_resource_version(at, current, 0));
        }
    }
    let range = ListRange {
        key: def.key(),
        ns: ns_filter,
        after: after.as_ref(),
        at,
        allow_stale: true,
    };
    let page = store.list(
        range,
        |o| labels.matches(&o.value) && fields.matches(&o.value),
        max,
    );
    let page = match page {
        Ok(page) => page,
        Err(_) if query.get("continue").is_some_and(|c| !c.is_empty()) => {
            // etcd3 storage offers a token that continues at the latest version.
            let mut e = ApiError::expired(CONTINUE_EXPIRED);
            e.continue_token = after
                .as_ref()
                .map(|(ns, name)| encode_continue(-1, &continue_key(def, ns_filter, ns, name)));
            return Err(e);
        }
        Err(_) => {
            return Err(ApiError::expired(
                "The resourceVersion for the provided list is too old.",
            ));
        }
    };
    let crate::store::ListPage {
        rv: list_rv,
        items,
        more,
        scanned: total,
    } = page;
    let cont = items.last().filter(|_| more).map(|o| {
        let key = continue_key(def, ns_filter, o.meta_str("namespace"), o.meta_str("name"));
        encode_continue(list_rv as i64, &key)
    });
    // Only an unfiltered list knows how many items remain (as etcd3 storage reports it).
    let remaining = (more && labels.is_empty() && fields.is_empty())
        .then(|| total.saturating_sub(items.len()) as i64);
    if let Some(p) = printer {
        let mut v = p.many(def, list_rv, &items, cont.as_deref());
        if let Some(r) = remaining
            && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.insert("remainingItemCount".into(), json!(r));
        }
        return Ok(respond_value(200, &v));
    }
    Ok(respond(
        200,
        list_bytes(def, list_rv, &items, cont.as_deref(), remaining),
    ))
}

fn event_line(etype: &str, obj: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(obj.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(etype.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(obj);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// How often a watch with bookmarks gets one, as the watch cache sends them.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// When a watch ending at `end` gets its next bookmark, as the watch cache schedules them
/// (`cacheWatcher.nextBookmarkTime`): a minute from `now`, or 2 s before the end when that is
/// sooner, so that the client learns the latest version before it reconnects; none once that
/// moment has passed.
fn next_bookmark_time(
    now: tokio::time::Instant,
    end: tokio::time::Instant,
) -> Option<tokio::time::Instant> {
    let beat = now + BOOKMARK_EVERY;
    let before_end = end.checked_sub(Duration::from_secs(2)).unwrap_or(end);
    let next = beat.min(before_end);
    (next >= now).then_some(next)
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn bookmark(def: &ResourceDef, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta});
    event_line("BOOKMARK", obj.to_string().as_bytes())
}

/// The event a filtered watch reports, and the object it carries: an object that starts
/// matching is ADDED; one that stops matching is DELETED with its previous content (the state
/// that matched) stamped with the event's resourceVersion, as the real server's watch cache does.
fn filtered_event(
    e: &crate::store::Event,
    matches: &impl Fn(&Obj) -> bool,
) -> Option<(&'static str, Arc<Obj>)> {
    let now = matches(&e.obj);
    match e.etype {
        EventType::Modified => {
            let before = e.prev.as_ref().is_none_or(|p| matches(p));
            match (before, now, &e.prev) {
                (true, true, _) => Some(("MODIFIED", e.obj.clone())),
                (false, true, _) => Some(("ADDED", e.obj.clone())),
                (true, false, Some(prev)) => {
                    let mut last = prev.value.clone();
                    last["metadata"]["resourceVersion"] = json!(e.rv.to_string());
                    Some(("DELETED", Obj::new(last, e.rv)))
                }
                (true, false, None) => Some(("DELETED", e.obj.clone())),
                (false, false, _) => None,
            }
        }
        other => now.then(|| (other.as_str(), e.obj.clone())),
    }
}

/// A watch that ends at once in an ERROR event carrying `status`, inside a 200.
fn error_stream(status: &ApiError) -> Response<Body> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
    let _ = tx.try_send(event_line(
        "ERROR",
        status.to_value().to_string().as_bytes(),
    ));
    stream_response(rx)
}

fn stream_response(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    with_type("application/json", StreamBody::new(stream).boxed_unsync())
}

/// WATCH: a stream of `{"type","object"}` lines, from now (with the current objects as ADDED
/// events for a watch-list, ending in an initial-events bookmark) or replayed from a given
/// resourceVersion. Objects that start or stop matching the selectors are ADDED or DELETED.
/// Bookmarks come every minute when allowed; the stream ends after `timeoutSeconds` (30 min by
/// default). A version too old to replay is an ERROR event with a 410 inside a 200.
pub(crate) async fn watch(
    store: &Arc<Store>,
    def: &Arc<ResourceDef>,
    ns: &str,
    query: &Query,
    printer: Option<Printer>,
) -> Result<Response<Body>, ApiError> {
    let encode = move |def: &ResourceDef, o: &Arc<Obj>| match &printer {
        Some(p) => p.encode(def, o),
        None => obj_bytes(def, o),
    };
    validate_list_options(query, true)?;
    let (labels, fields) = selectors(store, def, query)?;
    let bookmarks = query.flag("allowWatchBookmarks");
    // sendInitialEvents: Some(true) streams the current state then a bookmark marking its end
    // (WatchList); Some(false) starts at the given version (or now) without synthetic events;
    // unset keeps the legacy rule (synthetic ADDED events only for "" and "0").
    let send_initial_param = parse_go_bool(query.get("sendInitialEvents"));
    let rv_param = query.get("resourceVersion").unwrap_or_default();
    let from_now = rv_param.is_empty() || rv_param == "0";
    // With WatchList on (as it is in v1.32), a legacy watch from "" or "0" that says nothing of
    // initial events is defaulted to a watch-list: its initial events end with a bookmark too.
    let send_initial = send_initial_param == Some(true)
        || (send_initial_param.is_none()
            && from_now
            && query.get("resourceVersionMatch").is_none_or(str::is_empty));
    let timeout = query.int("timeoutSeconds")?;
    let timeout = u64::try_from(timeout)
        .ok()
        .filter(|t| *t > 0)
        .unwrap_or(1800);
    let ns_filter = ns_filter(def, ns).map(str::to_string);
    let mut initial: Vec<Bytes> = vec![];
    let matches = move |o: &Obj| labels.matches(&o.value) && fields.matches(&o.value);
    if send_initial && !from_now {
        // A watch-list is served once the cache has caught up with the version asked for; one
        // that does not in time ends in an ERROR event, inside a successful response.
        if let Err(status) = caught_up(store, parse_rv(rv_param)?).await {
            return Ok(error_stream(&status));
        }
    }
    let (mut sub, mut last_rv) = if send_initial || from_now {
        let (rv, objs, sub) = store.subscribe_now(def.key(), ns_filter.as_deref());
        if send_initial_param != Some(false) {
            for o in objs.iter().filter(|o| matches(o)) {
                initial.push(event_line("ADDED", &encode(def, o)));
            }
        }
        if send_initial && bookmarks {
            initial.push(bookmark(def, rv, true));
        }
        (sub, rv)
    } else {
        let rv = parse_rv(rv_param)?;
        // A version the store has not reached: the watch starts now and reports only what comes
        // after that version, as the watch cache does.
        let current = store.current_rv();
        match store.subscribe_from(rv.min(current)) {
            Ok((events, sub)) => {
                let mut last = rv;
                for e in events.into_iter().filter(|e| e.rv > rv) {
                    last = e.rv;
                    if &*e.key == def.key()
                        && ns_filter.as_ref().is_none_or(|n| *n == e.ns)
                        && let Some((et, obj)) = filtered_event(&e, &matches)
                    {
                        initial.push(event_line(et, &encode(def, &obj)));
                    }
                }
                (sub, last)
            }
            Err(oldest) => {
                let status =
                    ApiError::expired(format!("too old resource version: {rv} ({oldest})"));
                return Ok(error_stream(&status));
            }
        }
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1024);
    let store = store.clone();
    let def = def.clone();
    let mut drops = store.watch_drops();
    tokio::spawn(async move {
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let end = tokio::time::Instant::now() + Duration::from_secs(timeout);
        let deadline = tokio::time::sleep_until(end);
        tokio::pin!(deadline);
        let mut next_bookmark = bookmarks
            .then(|| next_bookmark_time(tokio::time::Instant::now(), end))
            .flatten();
        loop {
            tokio::select! {
                ev = sub.recv() => match ev {
                    Ok(e) => {
                        if e.rv <= last_rv {
                            continue;
                        }
                        last_rv = e.rv;
                        if &*e.key != def.key() || ns_filter.as_ref().is_some_and(|n| *n != e.ns) {
                            continue;
                        }
                        let Some((et, obj)) = filtered_event(&e, &matches) else {
                            continue;
                        };
                        if tx.send(event_line(et, &encode(&def, &obj))).await.is_err() {
                            return;
                        }
                    }
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                },
                _ = sleep_until_some(next_bookmark), if next_bookmark.is_some() => {
                    let (cur, caught_up) = store.read(|inner| (inner.rv, sub.is_empty()));
                    let rv = if caught_up { cur.max(last_rv) } else { last_rv };
                    last_rv = rv;
                    if tx.send(bookmark(&def, rv, false)).await.is_err() {
                        return;
                    }
                    next_bookmark = next_bookmark_time(tokio::time::Instant::now(), end)
                        .filter(|t| Some(*t) != next_bookmark);
                }
                _ = tx.closed() => return,
                _ = &mut deadline => return,
                _ = drops.changed() => return,
            }
        }
    });
    Ok(stream_response(rx))
}
