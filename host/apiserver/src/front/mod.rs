//! The HTTP front of the embedded cluster: one request from the socket to its answer.
//!
//! [`entry`] takes a request (injected faults, the request's warnings), [`nonresource`] routes
//! it, [`authn`] says who is asking, and [`resource`] authorizes a resource request and hands
//! each verb to `ops`; [`list_watch`] and [`subresources`] serve the verbs with their own
//! shapes, and [`negotiate`] and [`respond`] write the answer; [`counts`] tallies what was
//! asked, and [`audit`] who wrote what. Nothing below the front knows about HTTP.

mod audit;
mod authn;
mod counts;
mod entry;
mod faults;
mod list_watch;
mod negotiate;
mod nonresource;
mod resource;
mod respond;
mod shared;
mod subresources;

pub(crate) use audit::AuditLog;
pub(crate) use counts::RequestCounts;
pub(crate) use entry::handle;
pub(crate) use shared::Shared;
