//! The host drives these types from async WIT host traits, which need `Send` futures.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use lethe_kube::{Cluster, DeleteOptions, Identity, KubeClient, ListOptions, ObjectRef, PatchKind};

fn is_send<T: Send>(_: &T) {}
fn is_send_sync<T: Send + Sync>() {}

#[tokio::test]
async fn handles_and_futures_are_send() {
    is_send_sync::<Cluster>();
    is_send_sync::<KubeClient>();
    let cluster =
        Cluster::from_config(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let client = cluster.client(&Identity::Privileged).unwrap();
    let target = ObjectRef::cluster("v1", "Namespace", "x");
    is_send(&client.get(&target));
    is_send(&client.list("v1", "Namespace", None, &ListOptions::default()));
    is_send(&client.create("{}"));
    is_send(&client.replace(&target, "{}"));
    is_send(&client.patch(&target, PatchKind::Merge, "{}", None));
    is_send(&client.delete(&target, &DeleteOptions::default()));
}
