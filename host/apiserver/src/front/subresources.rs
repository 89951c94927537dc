//! Subresources with their own shapes: `serviceaccounts/token`, and the
//! access and token reviews.

use crate::auth::{Attributes, UserInfo, require};
use crate::front::respond::{Body, decode_body, read_body, respond_value};
use crate::front::shared::{Shared, Target};
use crate::resources::ResourceDef;
use crate::status::ApiError;
use http::{Request, Response};
use hyper::body::Incoming;
use serde_json::{Value, json};

/// `POST .../serviceaccounts/<name>/token`: issues a service-account JWT for account `t` and
/// answers 201 with the TokenRequest. The lifetime is `spec.expirationSeconds` (an hour when
/// unset, 10 minutes to 2^32 seconds, else a 422); the token is for the API server unless
/// `spec.audiences` names other audiences; a `boundObjectRef` is refused (400).
/// Needs `create` on `serviceaccounts/token`; 404 when the account does not exist.
pub(crate) async fn token_request(
    shared: &Shared,
    user: &UserInfo,
    t: &Target,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let attrs = Attributes {
        verb: "create".into(),
        resource_request: true,
        group: String::new(),
        resource: "serviceaccounts".into(),
        subresource: "token".into(),
        name: t.name.clone(),
        namespace: t.namespace.clone(),
        path: String::new(),
    };
    require(&shared.store, user, &attrs)?;
    let (headers, body) = read_body(req).await?;
    let request = if body.is_empty() {
        json!({})
    } else {
        decode_body(&headers, &body)?
    };
    let account = shared
        .store
        .get(t.def.key(), &t.namespace, &t.name, false)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", &t.name))?;
    // As the real server: at least ten minutes, an hour unless asked; anything but a whole
    // number is refused by the decoder.
    let asked = &request["spec"]["expirationSeconds"];
    let seconds = match asked.as_i64() {
        Some(s) => s,
        None if asked.is_null() => 3600,
        None => {
            let found = match asked {
                Value::Number(n) => format!("number {n}"),
                other => crate::validation::json_type(other).to_string(),
            };
            return Err(ApiError::bad_request(format!(
                "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot unmarshal {found} into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64"
            )));
        }
    };
    let out_of_range = if seconds < 600 {
        Some("may not specify a duration less than 10 minutes")
    } else if seconds > 1 << 32 {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(why) = out_of_range {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            &t.name,
            vec![crate::validation::invalid(
                "spec.expirationSeconds",
                seconds,
                why,
            )],
        ));
    }
    let namespace = &t.namespace;
    // Tokens bound to an object are not issued: nothing lethe does asks for one. (A token
    // Secret's token, which the token controller fills, still dies with its Secret.)
    if !request["spec"]["boundObjectRef"].is_null() {
        return Err(ApiError::bad_request(
            "this cluster binds no TokenRequest to an object; leave boundObjectRef unset",
        ));
    }
    // Without audiences a token is for the API server itself.
    let mut audiences = crate::util::string_list(&request["spec"]["audiences"]);
    if audiences.is_empty() {
        audiences.push(crate::sa_token::ISSUER.to_string());
    }
    let now = chrono::Utc::now();
    let claims = crate::sa_token::claims(
        namespace,
        &t.name,
        account.uid(),
        &audiences,
        None,
        now.timestamp(),
        seconds,
    );
    let token = shared
        .sa_tokens
        .sign(&claims)
        .map_err(|e| ApiError::internal(format!("failed to sign the token: {e}")))?;
    let expires = now + chrono::Duration::seconds(seconds);
    let rfc3339 =
        |at: chrono::DateTime<chrono::Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Ok(respond_value(
        201,
        &json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": t.name, "namespace": namespace, "creationTimestamp": rfc3339(now)},
            "spec": {
                "audiences": audiences,
                "expirationSeconds": seconds,
                "boundObjectRef": null,
            },
            "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
        }),
    ))
}

/// The review kinds: SelfSubjectReview and SelfSubjectAccessReview
/// (what the caller is and may do), TokenReview (who a token is) and SubjectAccessReview (what
/// a named user may do), as a server that delegates authentication and authorization asks them.
pub(crate) fn review(
    shared: &Shared,
    user: &UserInfo,
    def: &ResourceDef,
    mut body: Value,
) -> Result<Response<Body>, ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    let spec = body["spec"].clone();
    if def.plural == "selfsubjectreviews" {
        let mut groups = user.groups.clone();
        if groups.is_empty() {
            groups.push("system:authenticated".into());
        }
        return Ok(respond_value(
            201,
            &json!({
                "kind": "SelfSubjectReview",
                "apiVersion": def.api_version(),
                "metadata": {"creationTimestamp": null},
                "status": {"userInfo": {"username": user.name, "uid": user.uid, "groups": groups}},
            }),
        ));
    }
    if def.plural == "tokenreviews" {
        return token_review(shared, def, body);
    }
    // A SubjectAccessReview asks about the user its spec names; the others about the caller.
    let subject = if def.plural == "subjectaccessreviews" {
        let subject = UserInfo {
            name: spec["user"].as_str().unwrap_or_default().to_string(),
            uid: spec["uid"].as_str().unwrap_or_default().to_string(),
            groups: crate::util::string_list(&spec["groups"]),
        };
        if subject.name.is_empty() && subject.groups.is_empty() {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                "",
                vec![crate::validation::invalid(
                    "spec.user",
                    "\"\"",
                    "at least one of user or group must be specified",
                )],
            ));
        }
        subject
    } else {
        user.clone()
    };
    let attrs = if let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        let s = |k: &str| ra[k].as_str().unwrap_or_default().to_string();
        Attributes {
            verb: s("verb"),
            resource_request: true,
            group: s("group"),
            resource: s("resource"),
            subresource: s("subresource"),
            name: s("name"),
            namespace: s("namespace"),
            path: String::new(),
        }
    } else if let Some(nra) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        Attributes {
            verb: nra["verb"].as_str().unwrap_or_default().to_string(),
            resource_request: false,
            path: nra["path"].as_str().unwrap_or_default().to_string(),
            ..Default::default()
        }
    } else {
        return Err(ApiError::invalid(
            &def.group,
            &def.kind,
            "",
            vec![crate::validation::required(
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )],
        ));
    };
    let allowed = shared
        .store
        .read(|inner| crate::auth::allowed_by(inner, &subject, &attrs));
    body["kind"] = json!(def.kind);
    body["apiVersion"] = json!(def.api_version());
    if !body["metadata"].is_object() {
        body["metadata"] = json!({});
    }
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["status"] = match allowed {
        Some(reason) if !reason.is_empty() => json!({"allowed": true, "reason": reason}),
        Some(_) => json!({"allowed": true}),
        None => json!({"allowed": false}),
    };
    Ok(respond_value(201, &body))
}

/// TokenReview: the user `spec.token` authenticates as, as the bearer-token authenticators of
/// every request would find it. An unknown token is answered `authenticated: false` (omitted, as
/// Go omits a false field), not refused; an empty one is a bad request.
fn token_review(
    shared: &Shared,
    def: &ResourceDef,
    body: Value,
) -> Result<Response<Body>, ApiError> {
    let token = body["spec"]["token"].as_str().unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::bad_request(format!(
            "token is required for TokenReview in {}",
            def.group
        )));
    }
    let status = match shared.user_for_token(token) {
        Some(user) => json!({
            "authenticated": true,
            "user": {"username": user.name, "uid": user.uid, "groups": user.groups},
        }),
        None => json!({"user": {}}),
    };
    let mut metadata = body["metadata"].clone();
    if !metadata.is_object() {
        metadata = json!({});
    }
    metadata["creationTimestamp"] = Value::Null;
    Ok(respond_value(
        201,
        &json!({
            "kind": def.kind,
            "apiVersion": def.api_version(),
            "metadata": metadata,
            "spec": body["spec"],
            "status": status,
        }),
    ))
}
