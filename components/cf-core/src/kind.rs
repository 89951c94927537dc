//! The two kinds of resource the CF API serves, and the rules that differ between them: what a
//! list takes, what a create takes, and how Cloud Controller renders each. Where the job
//! machinery is generic over the configured job types, the API is not: an organization and a
//! space are created, listed and rendered by different rules.

use serde_json::{Value as Json, json};

use lethe_guest::kube::Object;

/// An organization or a space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// A CF organization: an `Org` in the root namespace, owning a namespace of its own.
    Org,
    /// A CF space: a `Space` in its org's namespace, owning a namespace of its own.
    Space,
}

/// The list parameters every Cloud Controller list message takes, first in its errors' order.
const LIST_PARAMETERS: [&str; 7] = [
    "page",
    "per_page",
    "order_by",
    "created_ats",
    "updated_ats",
    "guids",
    "names",
];

impl ResourceKind {
    /// Both kinds.
    pub const ALL: [ResourceKind; 2] = [ResourceKind::Org, ResourceKind::Space];

    /// The job-type name (`org`, `space`): in job GUIDs, among the configured job types,
    /// and in the owner mark of the namespace it owns.
    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::Org => "org",
            ResourceKind::Space => "space",
        }
    }

    /// The kind a job-type name stands for.
    pub fn from_name(name: &str) -> Option<ResourceKind> {
        ResourceKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The V3 collection (`organizations`, `spaces`).
    pub fn collection(self) -> &'static str {
        match self {
            ResourceKind::Org => "organizations",
            ResourceKind::Space => "spaces",
        }
    }

    /// The kind a V3 collection serves.
    pub fn from_collection(collection: &str) -> Option<ResourceKind> {
        ResourceKind::ALL
            .into_iter()
            .find(|k| k.collection() == collection)
    }

    /// The parameters Cloud Controller's list message takes, in the order its errors list them.
    pub fn list_parameters(self) -> Vec<&'static str> {
        let own: &[&str] = match self {
            ResourceKind::Org => &["isolation_segment_guid", "label_selector"],
            ResourceKind::Space => &["organization_guids", "include", "label_selector"],
        };
        LIST_PARAMETERS.iter().chain(own).copied().collect()
    }

    /// Cloud Controller's message when a create's name is taken (by an organization, or by a
    /// space of the same organization).
    pub fn name_taken(self, name: &str) -> String {
        match self {
            ResourceKind::Org => format!("Organization '{name}' already exists."),
            ResourceKind::Space => "Name must be unique per organization".to_string(),
        }
    }

    /// The fields a create takes.
    pub fn create_fields(self) -> &'static [&'static str] {
        match self {
            ResourceKind::Org => &["name", "suspended", "metadata"],
            ResourceKind::Space => &["name", "relationships", "metadata"],
        }
    }

    /// Cloud Controller's JSON for `o`, with links under `base`.
    pub fn render(self, base: &str, o: &Object) -> Json {
        let guid = &o.target.name;
        let created = o.metadata.creation_timestamp.clone().unwrap_or_default();
        let name = o.str_at("/spec/displayName").unwrap_or_default();
        let metadata = json!({ "labels": {}, "annotations": {} });
        match self {
            ResourceKind::Org => json!({
                "guid": guid,
                "created_at": created,
                "updated_at": created,
                "name": name,
                "suspended": suspended(o),
                "relationships": { "quota": { "data": null } },
                "metadata": metadata,
                "links": { "self": { "href": format!("{base}/v3/organizations/{guid}") } },
            }),
            ResourceKind::Space => {
                let org = org_of(o).unwrap_or_default();
                json!({
                    "guid": guid,
                    "created_at": created,
                    "updated_at": created,
                    "name": name,
                    "relationships": { "organization": { "data": { "guid": org } }, "quota": { "data": null } },
                    "metadata": metadata,
                    "links": {
                        "self": { "href": format!("{base}/v3/spaces/{guid}") },
                        "organization": { "href": format!("{base}/v3/organizations/{org}") },
                    },
                })
            }
        }
    }
}

/// Whether an organization is suspended (then only admins write in it).
pub fn suspended(org: &Object) -> bool {
    org.json()
        .pointer("/spec/suspended")
        .and_then(Json::as_bool)
        .unwrap_or(false)
}

/// The guid of a space's organization: its `spec.orgGUID`, else the namespace it lives in.
pub fn org_of(space: &Object) -> Option<&str> {
    space
        .str_at("/spec/orgGUID")
        .or(space.target.namespace.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_collections_map_both_ways() {
        for kind in ResourceKind::ALL {
            assert_eq!(ResourceKind::from_name(kind.name()), Some(kind));
            assert_eq!(ResourceKind::from_collection(kind.collection()), Some(kind));
        }
        assert_eq!(ResourceKind::from_name("app"), None);
        assert_eq!(ResourceKind::from_collection("apps"), None);
    }
}
