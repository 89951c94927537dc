use super::alloc::*;
use super::fields::*;
use super::*;
use crate::status::ApiError;
use crate::store::Store;
use serde_json::{Value, json};
use std::net::Ipv4Addr;

fn spec(v: &Value) -> &Value {
    &v["spec"]
}

fn svc(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
}

fn prepared(store: &Store, mut v: Value, old: Option<&Value>) -> Result<Value, ApiError> {
    store.read(|inner| prepare(&mut v, old, inner))?;
    Ok(v)
}

fn put(store: &Store, v: &Value) {
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    store
        .mutate(SERVICES_KEY, "ns", &name, |_, _| {
            Ok((crate::store::Change::Put(v.clone()), ()))
        })
        .unwrap();
}

#[test]
fn a_plain_service_gets_the_v1_defaults_and_an_address_from_the_upper_band() {
    let store = Store::open(None).unwrap();
    let v = prepared(
        &store,
        svc(
            "a",
            json!({"selector": {"app": "a"}, "ports": [{"port": 80}]}),
        ),
        None,
    )
    .unwrap();
    let s = spec(&v);
    assert_eq!(s["type"], "ClusterIP");
    assert_eq!(s["sessionAffinity"], "None");
    assert_eq!(s["internalTrafficPolicy"], "Cluster");
    assert_eq!(s["ipFamilies"], json!(["IPv4"]));
    assert_eq!(s["ipFamilyPolicy"], "SingleStack");
    assert_eq!(
        s["ports"],
        json!([{"port": 80, "protocol": "TCP", "targetPort": 80}])
    );
    assert!(s.get("externalTrafficPolicy").is_none());
    let ip: Ipv4Addr = s["clusterIP"].as_str().unwrap().parse().unwrap();
    assert_eq!(s["clusterIPs"], json!([ip.to_string()]));
    let n = u32::from(ip);
    assert!(
        (CIDR_BASE + 257..=CIDR_BASE + (1 << 20) - 2).contains(&n),
        "{ip}"
    );
    assert_eq!(v["status"], json!({"loadBalancer": {}}));
}

#[test]
fn requested_addresses_are_honoured_once_and_must_be_in_range() {
    let store = Store::open(None).unwrap();
    let first = prepared(
        &store,
        svc(
            "a",
            json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}),
        ),
        None,
    )
    .unwrap();
    assert_eq!(spec(&first)["clusterIPs"], json!(["10.96.0.10"]));
    put(&store, &first);
    let again = prepared(
        &store,
        svc(
            "b",
            json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}),
        ),
        None,
    )
    .unwrap_err();
    assert_eq!(again.code, 422);
    assert_eq!(
        again.message,
        "Service \"b\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.10\"}: failed to allocate IP 10.96.0.10: provided IP is already allocated"
    );
    // The same Service may keep it on a re-create of its own name (after a delete).
    assert!(
        prepared(
            &store,
            svc(
                "a",
                json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]})
            ),
            None
        )
        .is_ok()
    );
    let outside = prepared(
        &store,
        svc(
            "c",
            json!({"clusterIP": "192.168.0.1", "ports": [{"port": 80}]}),
        ),
        None,
    )
    .unwrap_err();
    assert!(
        outside.message.ends_with(
            "failed to allocate IP 192.168.0.1: provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        ),
        "{}",
        outside.message
    );
    let bad = prepared(
        &store,
        svc("d", json!({"clusterIP": "nope", "ports": [{"port": 80}]})),
        None,
    )
    .unwrap_err();
    assert!(
        bad.message
            .contains("spec.clusterIPs[0]: Invalid value: \"nope\": must be a valid IP address"),
        "{}",
        bad.message
    );
}

#[test]
fn headless_and_external_name_services_get_no_address() {
    let store = Store::open(None).unwrap();
    let h = prepared(
        &store,
        svc(
            "h",
            json!({"clusterIP": "None", "selector": {"app": "h"}, "ports": [{"port": 80}]}),
        ),
        None,
    )
    .unwrap();
    assert_eq!(spec(&h)["clusterIPs"], json!(["None"]));
    assert_eq!(spec(&h)["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec(&h)["ipFamilies"], json!(["IPv4"]));
    let bare = prepared(&store, svc("hb", json!({"clusterIP": "None"})), None).unwrap();
    assert_eq!(spec(&bare)["ipFamilyPolicy"], "RequireDualStack");
    assert_eq!(spec(&bare)["ipFamilies"], json!(["IPv4", "IPv6"]));
    let e = prepared(
        &store,
        svc(
            "e",
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
        ),
        None,
    )
    .unwrap();
    let s = spec(&e);
    assert!(s.get("clusterIP").is_none() && s.get("ipFamilies").is_none());
    assert!(s.get("internalTrafficPolicy").is_none());
    let no_name = prepared(&store, svc("e2", json!({"type": "ExternalName"})), None).unwrap_err();
    assert!(
        no_name
            .message
            .contains("spec.externalName: Required value")
    );
}

#[test]
fn updates_keep_the_address_and_may_not_change_it() {
    let store = Store::open(None).unwrap();
    let created = prepared(&store, svc("a", json!({"ports": [{"port": 80}]})), None).unwrap();
    put(&store, &created);
    let ip = spec(&created)["clusterIP"].clone();
    let resent = prepared(
        &store,
        svc("a", json!({"ports": [{"port": 81}]})),
        Some(&created),
    )
    .unwrap();
    assert_eq!(spec(&resent)["clusterIP"], ip);
    assert_eq!(spec(&resent)["clusterIPs"], json!([ip]));
    let mut moved = created.clone();
    moved["spec"]["clusterIP"] = json!("10.96.0.99");
    let err = prepared(&store, moved, Some(&created)).unwrap_err();
    assert_eq!(
        err.message,
        "Service \"a\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.99\"}: may not change once set"
    );
    // To ExternalName: the address is dropped (and so released).
    let mut external = created.clone();
    external["spec"]["type"] = json!("ExternalName");
    external["spec"]["externalName"] = json!("x.example.com");
    let e = prepared(&store, external, Some(&created)).unwrap();
    assert!(spec(&e).get("clusterIP").is_none(), "{e}");
    assert!(spec(&e).get("ipFamilyPolicy").is_none(), "{e}");
}

#[test]
fn node_ports_are_allocated_honoured_and_checked() {
    let store = Store::open(None).unwrap();
    let a = prepared(
        &store,
        svc(
            "a",
            json!({"type": "NodePort", "ports": [{"name": "x", "port": 80, "nodePort": 30080}, {"name": "y", "port": 81}]}),
        ),
        None,
    )
    .unwrap();
    let ports = &spec(&a)["ports"];
    assert_eq!(ports[0]["nodePort"], 30080);
    let second = ports[1]["nodePort"].as_i64().unwrap();
    assert!((30086..=32767).contains(&second), "{second}");
    assert_eq!(spec(&a)["externalTrafficPolicy"], "Cluster");
    put(&store, &a);
    let clash = prepared(
        &store,
        svc(
            "b",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
        ),
        None,
    )
    .unwrap_err();
    assert_eq!(
        clash.message,
        "Service \"b\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    let outside = prepared(
        &store,
        svc(
            "b",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 8080}]}),
        ),
        None,
    )
    .unwrap_err();
    assert!(outside.message.ends_with(
        "spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"
    ));
    // An update that leaves the node ports out keeps them.
    let resent = prepared(
        &store,
        svc(
            "a",
            json!({"type": "NodePort", "ports": [{"name": "x", "port": 80}, {"name": "y", "port": 81}]}),
        ),
        Some(&a),
    )
    .unwrap();
    assert_eq!(spec(&resent)["ports"], spec(&a)["ports"]);
    // Back to ClusterIP: the node ports go.
    let mut plain = a.clone();
    plain["spec"]["type"] = json!("ClusterIP");
    let p = prepared(&store, plain, Some(&a)).unwrap();
    assert!(p["spec"]["ports"][0].get("nodePort").is_none(), "{p}");
    assert!(p["spec"].get("externalTrafficPolicy").is_none(), "{p}");
    let lb = prepared(
        &store,
        svc(
            "lb",
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 443}]}),
        ),
        None,
    )
    .unwrap();
    assert_eq!(spec(&lb)["allocateLoadBalancerNodePorts"], true);
    assert!(spec(&lb)["healthCheckNodePort"].as_i64().is_some());
    assert!(spec(&lb)["ports"][0]["nodePort"].as_i64().is_some());
}

#[test]
fn validation_speaks_like_the_real_server() {
    let store = Store::open(None).unwrap();
    let err = prepared(
        &store,
        svc(
            "a",
            json!({"type": "Fancy", "ports": [{"port": 0, "protocol": "ICMP"}, {"port": 80}]}),
        ),
        None,
    )
    .unwrap_err();
    let fields: Vec<String> = err
        .details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default();
    assert_eq!(
        fields,
        [
            "spec.ports[0].name",
            "spec.ports[0].port",
            "spec.ports[0].protocol",
            "spec.ports[0].targetPort",
            "spec.ports[1].name",
            "spec.type",
        ]
    );
    let none = prepared(&store, svc("b", json!({})), None).unwrap_err();
    assert_eq!(
        none.message,
        "Service \"b\" is invalid: spec.ports: Required value"
    );
    let np = prepared(
        &store,
        svc("c", json!({"ports": [{"port": 80, "nodePort": 30001}]})),
        None,
    )
    .unwrap_err();
    assert!(
        np.message.contains(
            "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
        ),
        "{}",
        np.message
    );
    let dual = prepared(
        &store,
        svc(
            "d",
            json!({"ipFamilyPolicy": "RequireDualStack", "ports": [{"port": 80}]}),
        ),
        None,
    )
    .unwrap_err();
    assert!(dual.message.contains(
        "spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"
    ));
}

fn message(store: &Store, name: &str, spec: Value) -> String {
    prepared(store, svc(name, spec), None).unwrap_err().message
}

#[test]
fn ports_must_be_distinct_and_well_named() {
    let store = Store::open(None).unwrap();
    assert_eq!(
        message(
            &store,
            "dup",
            json!({"ports": [{"name": "a", "port": 443}, {"name": "b", "port": 443}]})
        ),
        "Service \"dup\" is invalid: spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:443, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"
    );
    // The same number over another protocol is another port.
    prepared(
        &store,
        svc(
            "dns",
            json!({"ports": [{"name": "a", "port": 53}, {"name": "b", "port": 53, "protocol": "UDP"}]}),
        ),
        None,
    )
    .unwrap();
    assert_eq!(
        message(
            &store,
            "names",
            json!({"ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}, {"port": 3}, {"name": "a.b", "port": 4}]})
        ),
        "Service \"names\" is invalid: [spec.ports[1].name: Duplicate value: \"x\", spec.ports[2].name: Required value, spec.ports[3].name: Invalid value: \"a.b\": must not contain dots]"
    );
    // A single port needs no name.
    prepared(&store, svc("one", json!({"ports": [{"port": 80}]})), None).unwrap();
    assert_eq!(
        message(
            &store,
            "tp",
            json!({"ports": [{"port": 80, "targetPort": "8080"}, {"name": "b", "port": 81, "targetPort": "a--very-long-name-"}]})
        ),
        "Service \"tp\" is invalid: [spec.ports[0].name: Required value, spec.ports[0].targetPort: Invalid value: \"8080\": must contain at least one letter (a-z), spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must be no more than 15 characters, spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must not contain consecutive hyphens, spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must not begin or end with a hyphen]"
    );
    assert!(
        message(
            &store,
            "app",
            json!({"ports": [{"port": 80, "appProtocol": "a/b/c"}]})
        )
        .starts_with(
            "Service \"app\" is invalid: spec.ports[0].appProtocol: Invalid value: \"a/b/c\": a qualified name must consist"
        )
    );
}

#[test]
fn selectors_are_label_maps() {
    let store = Store::open(None).unwrap();
    assert_eq!(
        message(
            &store,
            "sel",
            json!({"selector": {"app": "-x", "bad key": "ok"}, "ports": [{"port": 80}]})
        ),
        "Service \"sel\" is invalid: [spec.selector: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), spec.selector: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]"
    );
    let err = prepared(
        &store,
        svc(
            "n",
            json!({"selector": {"app": 1}, "ports": [{"port": 80}]}),
        ),
        None,
    )
    .unwrap_err();
    assert_eq!(err.code, 400);
    assert!(
        err.message
            .ends_with("json: cannot unmarshal number into Go struct field ServiceSpec.spec.selector of type string"),
        "{}",
        err.message
    );
    prepared(
        &store,
        svc(
            "good",
            json!({"selector": {"app.kubernetes.io/name": "web", "tier": ""}, "ports": [{"port": 80}]}),
        ),
        None,
    )
    .unwrap();
}

#[test]
fn the_dynamic_scan_skips_taken_addresses() {
    let (first, _) = ip_range();
    let mut taken: HashSet<u32> = HashSet::new();
    // Leave one free address in the upper band.
    let (lo, hi) = (first + 256, first + 256 + 9);
    for a in lo..=hi {
        taken.insert(a);
    }
    let got = scan(u64::from(lo), u64::from(hi) + 1, |v| {
        u32::try_from(v).is_ok_and(|v| !taken.contains(&v))
    });
    assert_eq!(got, Some(u64::from(hi) + 1));
    assert_eq!(static_band(2768, 32, 128), 86);
    assert_eq!(static_band((1 << 20) - 2, 16, 256), 256);
}
