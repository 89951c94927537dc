//! Glue between `wasi:http/incoming-handler` and [`Request`]/[`Response`].

use std::io::Read as _;

use wasip2::http::types::{
    Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam, Scheme,
};

use crate::{Headers, MAX_BODY, Request, Response, cf};

/// Reads the request, runs `handler`, and sends its response. A body over
/// [`crate::http::MAX_BODY_BYTES`] is answered with 413 without calling the handler.
pub fn serve(
    request: IncomingRequest,
    out: ResponseOutparam,
    handler: impl FnOnce(Request) -> Response,
) {
    let response = match read_request(&request) {
        Ok(req) => handler(req),
        Err(response) => response,
    };
    send(out, response);
}

fn read_request(request: &IncomingRequest) -> Result<Request, Response> {
    let method = match request.method() {
        Method::Get => "GET".to_string(),
        Method::Head => "HEAD".to_string(),
        Method::Post => "POST".to_string(),
        Method::Put => "PUT".to_string(),
        Method::Delete => "DELETE".to_string(),
        Method::Connect => "CONNECT".to_string(),
        Method::Options => "OPTIONS".to_string(),
        Method::Trace => "TRACE".to_string(),
        Method::Patch => "PATCH".to_string(),
        // Methods are case-sensitive (RFC 9110 §9.1): upper-casing would make `delete`, which a
        // proxy passes on as an unknown method, act as DELETE.
        Method::Other(m) => m,
    };
    let path_with_query = request.path_with_query().unwrap_or_else(|| "/".to_string());
    let (path, query) = match path_with_query.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (path_with_query, String::new()),
    };
    // Asked for one by one (see `Headers`). The `fields` resource is a child of the request, so
    // the `Request` holding it must be gone before the request is: `serve` keeps that order.
    let fields = request.headers();
    let headers = Headers::lookup(move |name| fields.get(name).into_iter().next());
    let mut body = Vec::new();
    // A GET or HEAD body has no defined meaning (RFC 9110 §9.3.1-2): it is not read, which saves
    // the four host calls that consuming an empty body costs on every poll.
    let bodiless = matches!(method.as_str(), "GET" | "HEAD");
    if !bodiless
        && let Ok(incoming) = request.consume()
        && let Ok(stream) = incoming.stream()
    {
        let mut limited = stream.take(MAX_BODY as u64 + 1);
        if limited.read_to_end(&mut body).is_err() {
            return Err(cf::message_parse_error(
                "The request body could not be read",
            ));
        }
        if body.len() > MAX_BODY {
            return Err(cf::error(
                413,
                10001,
                "CF-RequestEntityTooLarge",
                "The request body is too large",
            ));
        }
    }
    let scheme = request.scheme().map(|s| match s {
        Scheme::Http => "http".to_string(),
        Scheme::Https => "https".to_string(),
        Scheme::Other(other) => other,
    });
    Ok(Request {
        method,
        path,
        query,
        headers,
        body,
        scheme,
        authority: request.authority(),
    })
}

fn send(out: ResponseOutparam, response: Response) {
    let mut headers: Vec<(String, Vec<u8>)> = response
        .headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.as_bytes().to_vec()))
        .collect();
    // The whole body is known: say its length, so the server need not chunk it (one write
    // instead of a chunk per flush and a terminator).
    if !headers.iter().any(|(n, _)| n == "content-length") {
        headers.push((
            "content-length".into(),
            response.body.len().to_string().into_bytes(),
        ));
    }
    // Header names we produce are static and valid; a rejected set falls back to no headers
    // rather than leaving the caller without a response.
    let fields = Fields::from_list(&headers).unwrap_or_else(|_| Fields::new());
    let outgoing = OutgoingResponse::new(fields);
    // A new response is 200 (wasi:http says so): one host call fewer for most answers.
    if response.status != 200 {
        let _ = outgoing.set_status_code(response.status);
    }
    let Ok(body) = outgoing.body() else {
        ResponseOutparam::set(out, Ok(outgoing));
        return;
    };
    let Ok(stream) = body.write() else {
        ResponseOutparam::set(out, Ok(outgoing));
        let _ = OutgoingBody::finish(body, None);
        return;
    };
    // Whatever the stream takes now is buffered before the head is handed over, and a body that
    // fits whole is finished first: the server then holds a complete response and writes head and
    // body together, instead of the head alone and the body after another wake-up. A larger body
    // cannot wait for room before `set`, since room appears only once the server has the response.
    let rest = write_available(&stream, &response.body);
    if rest.is_empty() {
        // The stream must be gone before the body is finished; finishing delivers what was
        // written, so no flush (a round trip to the server) is needed first.
        drop(stream);
        let _ = OutgoingBody::finish(body, None);
        ResponseOutparam::set(out, Ok(outgoing));
        return;
    }
    ResponseOutparam::set(out, Ok(outgoing));
    write_body(&stream, rest);
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
}

/// Writes as much of `bytes` as the stream accepts without waiting; returns the rest.
fn write_available<'a>(
    stream: &wasip2::io::streams::OutputStream,
    mut bytes: &'a [u8],
) -> &'a [u8] {
    while !bytes.is_empty() {
        let room = match stream.check_write() {
            Ok(0) | Err(_) => break,
            Ok(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let (now, rest) = bytes.split_at(room.min(bytes.len()));
        if stream.write(now).is_err() {
            break;
        }
        bytes = rest;
    }
    bytes
}

/// Writes `bytes` as the stream accepts them, waiting only when it has no room.
fn write_body(stream: &wasip2::io::streams::OutputStream, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        let room = match stream.check_write() {
            Ok(0) => {
                stream.subscribe().block();
                continue;
            }
            Ok(n) => usize::try_from(n).unwrap_or(usize::MAX),
            Err(_) => return,
        };
        let (now, rest) = bytes.split_at(room.min(bytes.len()));
        if stream.write(now).is_err() {
            return;
        }
        bytes = rest;
    }
}
