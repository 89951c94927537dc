//! `POST /v3/roles`: Cloud Controller's role assignment, as RoleBindings of lethe's CF
//! ClusterRoles in the org's or the space's namespace. The cf CLI sends it after `cf create-org`
//! (the creator becomes org manager) and `cf create-space` (space manager and developer).
//!
//! Who may assign a role follows Cloud Controller, not the caller's rights in Kubernetes: admins
//! anywhere, org managers in their org and its spaces, space managers in their space. An org
//! manager holds no rights in a space's namespace, so the binding is written with the host's
//! identity once those rules allow it; it only ever binds one of the CF ClusterRoles below, and
//! only into the namespace that carries the mark of the org or space the role is for
//! (SECURITY.md P3), so no user-made org or space can point it at a namespace lethe does not own.

use serde_json::{Value as Json, json};

use lethe_guest::Response;
use lethe_guest::kube::{Collection, Identity, Kube, KubeError, ListOptions, Object};

use crate::access;
use crate::context::RequestContext;
use crate::errors::HttpError;
use crate::kind::ResourceKind;
use crate::ownership::{self, Owner};

const RBAC: &str = "rbac.authorization.k8s.io";
const RBAC_VERSION: &str = "rbac.authorization.k8s.io/v1";
const ORG_MANAGER: &str = "lethe-cf-organization-manager";
const ORG_USER: &str = "lethe-cf-organization-user";
/// The label that carries a binding's role guid.
const ROLE_GUID_LABEL: &str = "cf.lethe.dev/role-guid";

/// The role types lethe has ClusterRoles for, with them and the kind of resource they are roles in.
fn cluster_role(role_type: &str) -> Option<(&'static str, ResourceKind)> {
    match role_type {
        "organization_manager" => Some((ORG_MANAGER, ResourceKind::Org)),
        "organization_user" => Some((ORG_USER, ResourceKind::Org)),
        "space_manager" => Some(("lethe-cf-space-manager", ResourceKind::Space)),
        "space_developer" => Some(("lethe-cf-space-developer", ResourceKind::Space)),
        _ => None,
    }
}

/// The role types Cloud Controller knows.
const CC_TYPES: &[&str] = &[
    "organization_user",
    "organization_auditor",
    "organization_manager",
    "organization_billing_manager",
    "space_auditor",
    "space_developer",
    "space_manager",
    "space_supporter",
];

/// The RoleBinding subject for a Cloud Foundry user: a service account's token user name is
/// bound as that service account, anyone else as a User.
fn subject(user: &str) -> Json {
    match access::service_account(user) {
        Some((namespace, name)) => {
            json!({"kind": "ServiceAccount", "name": name, "namespace": namespace})
        }
        None => json!({"kind": "User", "apiGroup": RBAC, "name": user}),
    }
}

/// Whether `binding` binds `cluster_role` (any of them when `None`) to `user`.
fn binds(binding: &Object, user: &Json, cluster_roles: &[&str]) -> bool {
    let role = &binding.json()["roleRef"];
    role["kind"] == "ClusterRole"
        && role["name"]
            .as_str()
            .is_some_and(|name| cluster_roles.contains(&name))
        && binding.json()["subjects"]
            .as_array()
            .is_some_and(|subjects| {
                subjects.iter().any(|s| {
                    s["kind"] == user["kind"]
                        && s["name"] == user["name"]
                        && (user["namespace"].is_null() || s["namespace"] == user["namespace"])
                })
            })
}

/// The RoleBindings in `namespace`, read privileged (SECURITY.md R1).
fn bindings_in(kube: &dyn Kube, namespace: &str) -> Result<Vec<Object>, KubeError> {
    match kube.list_all(
        &Identity::Privileged,
        &Collection::new(RBAC_VERSION, "RoleBinding", Some(namespace)),
        &ListOptions::default(),
    ) {
        Err(KubeError::NotFound(_)) => Ok(Vec::new()),
        other => other,
    }
}

/// The org or space (`relationship`) a role is for, by the guid in `body`'s relationships, if it
/// exists and the caller sees it; else CC's 422 for an invalid one.
fn visible_target(
    kube: &dyn Kube,
    caller: &Identity,
    t: &crate::config::ResourceType,
    body: &Json,
    relationship: &str,
) -> Result<(String, Object), HttpError> {
    let invalid = || {
        HttpError::unprocessable(format!(
            "Invalid {relationship}. Ensure that the {relationship} exists and you have access to it."
        ))
    };
    let kube_err = |e| HttpError::from_kube(e, "Unknown request");
    let guid = body["relationships"][relationship]["data"]["guid"]
        .as_str()
        .ok_or_else(invalid)?;
    let object = access::locate(kube, t, guid)
        .map_err(kube_err)?
        .ok_or_else(invalid)?;
    // A role in something being deleted would be written into a namespace on its way out.
    if object.metadata.deletion_timestamp.is_some()
        || !access::visible(kube, caller, t, &object).map_err(kube_err)?
    {
        return Err(invalid());
    }
    Ok((guid.to_string(), object))
}

/// `POST /v3/roles`.
pub fn create(ctx: &RequestContext<'_>, caller: &Identity) -> Result<Response, HttpError> {
    let (kube, env, req, base) = (ctx.kube, ctx.env, ctx.req, ctx.base.as_str());
    access::authenticate(kube, caller)?;
    let kube_err = |e| HttpError::from_kube(e, "Unknown request");
    let parse_error =
        || HttpError::parse_error("Request invalid due to parse error: invalid request body");
    let body: Json = serde_json::from_slice(&req.body).map_err(|_| parse_error())?;
    if !body.is_object() {
        return Err(parse_error());
    }
    let role_type = body["type"].as_str().unwrap_or_default();
    if !CC_TYPES.contains(&role_type) {
        return Err(HttpError::unprocessable(
            "Type must be one of the allowed types",
        ));
    }
    let Some((cluster_role, role_in)) = cluster_role(role_type) else {
        return Err(HttpError::unprocessable(format!(
            "Role type '{role_type}' is not supported"
        )));
    };
    let user_data = &body["relationships"]["user"]["data"];
    let user = user_data["guid"]
        .as_str()
        .or_else(|| user_data["username"].as_str())
        .filter(|u| !u.is_empty())
        .ok_or_else(|| HttpError::unprocessable("Relationships User must be provided"))?
        .to_string();
    let org_type = ctx
        .settings
        .kind(ResourceKind::Org)
        .ok_or_else(|| HttpError::unprocessable("organizations are not configured"))?;
    let space_role = role_in == ResourceKind::Space;
    let (target, org_guid, namespace, owner_object) = if space_role {
        let space_type = ctx
            .settings
            .kind(ResourceKind::Space)
            .ok_or_else(|| HttpError::unprocessable("spaces are not configured"))?;
        let (guid, space) = visible_target(kube, caller, space_type, &body, "space")?;
        // The org is where the space lives; a spec naming another org is not believed (the
        // decisions below hang on it), and a space with neither fails closed.
        let org = match (
            space.target.namespace.as_deref(),
            space.str_at("/spec/orgGUID"),
        ) {
            (Some(ns), Some(org)) if ns == org => org.to_string(),
            (Some(ns), None) if !ns.is_empty() => ns.to_string(),
            _ => {
                return Err(HttpError::unprocessable(
                    "Invalid space. Ensure that the space exists and you have access to it.",
                ));
            }
        };
        let allowed = access::sees_everything(kube, caller, org_type).map_err(kube_err)?
            || access::manages(kube, caller, &org).map_err(kube_err)?
            || access::manages(kube, caller, &guid).map_err(kube_err)?;
        if !allowed {
            return Err(HttpError::not_authorized());
        }
        ("space", org, guid, space)
    } else {
        let (guid, org) = visible_target(kube, caller, org_type, &body, "organization")?;
        let allowed = access::sees_everything(kube, caller, org_type).map_err(kube_err)?
            || access::manages(kube, caller, &guid).map_err(kube_err)?;
        if !allowed {
            return Err(HttpError::not_authorized());
        }
        ("organization", guid.clone(), guid, org)
    };
    let subject = subject(&user);
    if space_role
        && !bindings_in(kube, &org_guid)
            .map_err(kube_err)?
            .iter()
            .any(|b| binds(b, &subject, &[ORG_MANAGER, ORG_USER]))
    {
        return Err(HttpError::unprocessable(
            "Users cannot be assigned roles in a space if they do not have a role in that space's organization.",
        ));
    }
    if bindings_in(kube, &namespace)
        .map_err(kube_err)?
        .iter()
        .any(|b| binds(b, &subject, &[cluster_role]))
    {
        return Err(HttpError::unprocessable(format!(
            "User '{user}' already has '{role_type}' role in {target} '{namespace}'."
        )));
    }
    // SECURITY.md P3: the binding is written privileged, so only into the namespace that is
    // this org's or space's by its mark (made now if the reconciler has not made it yet).
    let owner = Owner::new(role_in.name(), &owner_object);
    ownership::ensure_namespace_now(kube, env, owner).map_err(|e| e.into_http_error(target))?;
    let guid = env.new_uuid();
    let mut labels = owner.labels();
    labels[ROLE_GUID_LABEL] = json!(guid);
    labels["cf.lethe.dev/role-type"] = json!(role_type);
    let binding = json!({
        "apiVersion": RBAC_VERSION,
        "kind": "RoleBinding",
        "metadata": {
            "name": format!("cf-role-{guid}"),
            "namespace": namespace,
            "labels": labels,
        },
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": cluster_role},
        "subjects": [subject],
    });
    let created =
        ownership::create_once(kube, env, &Identity::Privileged, binding).map_err(kube_err)?;
    let at = created
        .metadata
        .creation_timestamp
        .clone()
        .unwrap_or_default();
    let (org_data, space_data) = if space_role {
        (Json::Null, json!({"guid": namespace}))
    } else {
        (json!({"guid": namespace}), Json::Null)
    };
    let mut links = json!({
        "self": {"href": format!("{base}/v3/roles/{guid}")},
        "user": {"href": format!("{base}/v3/users/{user}")},
    });
    let collection = role_in.collection();
    links[target] = json!({"href": format!("{base}/v3/{collection}/{namespace}")});
    Ok(Response::json(
        201,
        &json!({
            "guid": guid,
            "created_at": at,
            "updated_at": at,
            "type": role_type,
            "relationships": {
                "user": {"data": {"guid": user}},
                "organization": {"data": org_data},
                "space": {"data": space_data},
            },
            "links": links,
        }),
    ))
}
