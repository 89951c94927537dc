use crate::model::*;
use crate::status::*;

#[test]
fn job_guids_parse_only_when_anchored_and_well_formed() {
    let uid = "0b8e6a54-5a4f-4c1e-9d3f-1b2c3d4e5f60";
    assert_eq!(
        parse_guid(&format!("deployment.delete~{uid}")),
        Some((Operation::DeploymentDelete, uid))
    );
    assert_eq!(
        parse_guid(&format!("data_job.delete~{uid}")),
        Some((Operation::DataJobDelete, uid))
    );
    assert_eq!(parse_guid(&format!("org.delete~{uid}")), None);
    assert_eq!(parse_guid(&format!("xdata_job.delete~{uid}")), None);
    assert_eq!(parse_guid(&format!("data_job.delete~{uid}x")), None);
    assert_eq!(
        parse_guid(&format!("data_job.delete~{}", uid.to_uppercase())),
        None
    );
    assert_eq!(parse_guid("data_job.delete~"), None);
    assert!(is_data_job_guid("data_job.delete~nonsense"));
    assert!(!is_data_job_guid("org.delete~x"));
}

#[test]
fn schedules_follow_kubernetes_five_field_syntax() {
    for ok in [
        "*/5 * * * *",
        "0 3 * * MON-FRI",
        "15,45 0-23/2 1 JAN-DEC 0",
        "@hourly",
    ] {
        assert!(valid_schedule(ok), "{ok}");
    }
    for bad in [
        "",
        "* * * *",
        "61 * * * *",
        "* * * * * *",
        "every minute",
        "*/0 * * * *",
        "5-1 * * * *",
    ] {
        assert!(!valid_schedule(bad), "{bad}");
    }
}

#[test]
fn images_and_quantities_are_checked() {
    for ok in [
        "busybox",
        "registry:5000/team/job:1.2",
        "ghcr.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ] {
        assert!(valid_image(ok), "{ok}");
    }
    for bad in ["", "Busybox", "a b", "repo:", "/x", "x//y", "x@md5:00"] {
        assert!(!valid_image(bad), "{bad}");
    }
    assert!(valid_quantity("500m") && valid_quantity("1.5") && valid_quantity("128Mi"));
    assert!(!valid_quantity("m") && !valid_quantity("1.2.3") && !valid_quantity("5X"));
}

#[test]
fn cronjob_names_fit_and_differ_by_team() {
    let long = "a".repeat(45);
    assert!(cronjob_name("team", &long).len() <= 52);
    assert_ne!(cronjob_name("a-b", "c"), cronjob_name("a", "b-c"));
    assert_eq!(cronjob_name("t", "job"), cronjob_name("t", "job"));
}

fn spec() -> Spec {
    Spec {
        image: "busybox:1".into(),
        schedule: "*/5 * * * *".into(),
        enabled: true,
        resources: Resources {
            cpu_request: Some("500m".into()),
            ..Resources::default()
        },
    }
}

#[test]
fn the_rendered_cronjob_fingerprints_to_the_spec_hash() {
    let s = spec();
    let hash = s.hash();
    let json = render_cronjob(&CronJobParams {
        namespace: "ns",
        team: "t",
        job_name: "job",
        job_uid: "u",
        spec: &s,
        hash: &hash,
        resource_version: None,
    });
    assert_eq!(live_fingerprint(&json).as_deref(), Some(hash.as_str()));
    // A hand edit of the schedule changes the fingerprint.
    let edited = json.replace("*/5 * * * *", "0 0 * * *");
    assert_ne!(live_fingerprint(&edited).as_deref(), Some(hash.as_str()));
    // Server defaulting (empty resources maps, extra fields) does not.
    let mut v: serde_json::Value = serde_json::from_str(&json).expect("json");
    v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] =
        serde_json::json!({});
    v["spec"]["successfulJobsHistoryLimit"] = serde_json::json!(3);
    assert_eq!(
        live_fingerprint(&v.to_string()).as_deref(),
        Some(hash.as_str())
    );
}

#[test]
fn disabling_or_changing_resources_changes_the_hash() {
    let a = spec();
    let mut b = spec();
    b.enabled = false;
    let mut c = spec();
    c.resources.memory_limit = Some("1Gi".into());
    assert_ne!(a.hash(), b.hash());
    assert_ne!(a.hash(), c.hash());
}

#[test]
fn uuids_are_version_4() {
    let u = crate::uuid_from_bytes([0xff; 16]);
    assert!(valid_uuid(&u), "{u}");
    assert_eq!(&u[14..15], "4");
}
