//! The Korifi world: lethe's job status and DELETE endpoints under `job_types = "korifi"`
//! (`cf_core::jobs::handle`, `cf_core::api::handle`), in front of objects that a simulated Korifi
//! owns. Clients create managed service instances and poll their create jobs (state jobs), change
//! their spec (a new generation), delete them and roles through the API and poll the deletion
//! jobs (a role is found by its label, not its name); Korifi's controller reports instances
//! Ready, in progress, failed for good, or Ready for a generation that is no longer theirs, and
//! lets deleted objects go; a stranger with no rights polls the same jobs.
//!
//! Invariants, at every poll:
//! 1. A state job is `COMPLETE` only while its instance exists, is Ready, and Korifi observed its
//!    current generation; `FAILED` only for a terminal reason at that generation.
//! 2. A state job of an instance that is gone is 404.
//! 3. A stranger never learns anything of a state job: 404.
//! 4. A deletion job is never `COMPLETE` while its instance, or the RoleBinding carrying its
//!    role's label, exists.
//! 5. The first poll after a `202` or a create is never 404.
//! 6. A role's deletion never deletes or changes a RoleBinding that is not the role's: a decoy
//!    named after the role's guid, without its label (a foreign object under a name lethe could
//!    take for its own).
//! 7. Polls of the jobs of an instance or a role that exists and is not being deleted, by the
//!    admin and by the stranger: a deletion job is 404 to the admin (there is none) and
//!    `COMPLETE` to the stranger (who may not learn that it exists); a state job holds to 1 for
//!    the admin, and is never 404 to them, and to 3 for the stranger.

use lethe_guest::fake::FakeCluster;
use lethe_guest::fake::FakeHost;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value as Json, json};

use crate::glance;
use crate::world::{self, Failure, Quiescent, Scenario, Stage};

/// Korifi's group and version.
const API_VERSION: &str = "korifi.cloudfoundry.org/v1alpha1";
/// The label of a role's RoleBinding that carries the role's guid.
const ROLE_GUID_LABEL: &str = "cloudfoundry.org/role-guid";
/// Korifi's finalizer on what it deprovisions before it goes.
const KORIFI_FINALIZER: &str = "korifi.cloudfoundry.org/finalizer";
/// The space every object lives in (its namespace).
const SPACE: &str = "space-1";
/// The clients are CF admins; the stranger has no rights in the space.
const ADMIN: &str = "admin";
const STRANGER: &str = "stranger";
/// Why Korifi says an instance is not ready: one it will retry, one it will not.
const IN_PROGRESS: &str = "ProvisionInProgress";
const TERMINAL: &str = "ProvisionFailed";

/// A job a client was given: its status path, whether it is a create's (a state job) or a
/// deletion's, and what it is about (an instance's name, or a role's guid).
#[derive(Clone)]
struct Job {
    path: String,
    state: bool,
    role: bool,
    guid: String,
}

struct KorifiWorld<'w, 'a> {
    stage: Stage<'w, 'a, Job>,
    /// Role guids made so far.
    roles: Vec<String>,
    /// The decoy RoleBindings (named after a role's guid, unlabelled): name, uid and
    /// resourceVersion, which nothing here changes.
    decoys: Vec<(String, String, String)>,
}

/// Runs the Korifi world of `seed` for `steps` steps, then lets it quiesce: its trace, and the
/// first invariant found broken.
pub(crate) fn play(seed: u64, steps: usize) -> (Vec<String>, Option<Failure>) {
    let rng = StdRng::seed_from_u64(seed ^ 0x0000_4b0f_1f10_0000);
    let kube = FakeCluster::new();
    kube.grant(STRANGER, "list", "Namespace", "*");
    let api = FakeHost::on(&kube);
    api.set_config("job_types", "korifi");
    // The invariants are about COMPLETE; a deletion held long is FAILED, which is fine.
    api.set_config("deletion_timeout_seconds", "100000000");
    let hosts: Vec<FakeHost<'_>> = Vec::new();
    let mut world = KorifiWorld {
        stage: Stage::new(rng, &kube, &hosts, &api, "korifi: "),
        roles: Vec::new(),
        decoys: Vec::new(),
    };
    let violation = world.play(steps).err();
    (world.stage.trace, violation)
}

impl Scenario for KorifiWorld<'_, '_> {
    fn rng(&mut self) -> &mut StdRng {
        &mut self.stage.rng
    }

    fn step(&mut self, roll: u32) -> Result<(), Failure> {
        match roll {
            0..15 => self.create_instance(),
            15..22 => self.change_spec(),
            22..42 => self.korifi_acts(),
            42..50 => self.delete_instance(),
            50..58 => self.role(),
            58..82 => self.poll(),
            _ => {
                self.stage.let_time_pass();
                Ok(())
            }
        }
    }

    fn quiesce(&mut self) -> Result<(), Failure> {
        self.stage.note("the clients stop");
        self.converge()
    }
}

impl Quiescent for KorifiWorld<'_, '_> {
    /// Korifi catches up: every instance is Ready at its generation, and what is being deleted
    /// goes.
    fn settle(&mut self) -> Result<(), Failure> {
        let kube = self.stage.kube;
        for name in instances(kube) {
            let o = kube.object("CFServiceInstance", SPACE, &name);
            match o {
                Some(o) if o.metadata.deletion_timestamp.is_some() => {
                    kube.clear_finalizers("CFServiceInstance", SPACE, &name);
                }
                Some(o) => {
                    let generation = o.metadata.generation.unwrap_or(1);
                    report(kube, &name, generation, "True", "Ready");
                }
                None => {}
            }
        }
        for rb in kube.all("RoleBinding") {
            if rb.metadata.deletion_timestamp.is_some() {
                kube.clear_finalizers("RoleBinding", SPACE, &rb.target.name);
            }
        }
        self.stage.note("Korifi catches up");
        Ok(())
    }

    fn outstanding(&self) -> Vec<String> {
        self.stage.outstanding()
    }

    fn poll_one(&mut self, path: &str) -> Result<(), Failure> {
        let Some(job) = self.stage.deletions.get(path).cloned() else {
            return Ok(());
        };
        let (status, body) = self.call(STRANGER, "GET", path);
        self.stage.note(&format!(
            "the stranger polls {path}: {status} {}",
            body["state"]
        ));
        if job.state && status != 404 {
            return Err(format!(
                "a stranger polled {path} and was told {status} {body}"
            ));
        }
        let (status, body) = self.call(ADMIN, "GET", path);
        self.stage
            .note(&format!("client polls {path}: {status} {}", body["state"]));
        let state = body["state"].as_str().unwrap_or_default().to_string();
        if job.state {
            self.check_state_job(&job, status, &state)?;
            if status == 404 || state == "COMPLETE" {
                self.stage.deletions.remove(path);
            }
            return Ok(());
        }
        if status == 200 && state == "COMPLETE" {
            if self.exists(&job) {
                return Err(format!("{path} is COMPLETE while {} exists", job.guid));
            }
            self.stage.deletions.remove(path);
        }
        Ok(())
    }

    fn divergence(&self) -> Option<String> {
        None
    }
}

impl KorifiWorld<'_, '_> {
    fn call(&self, token: &str, method: &str, path: &str) -> (u16, Json) {
        let req = world::request(method, path, token, None);
        let api = self.stage.api;
        let r = if path.starts_with("/v3/jobs/") {
            cf_core::jobs::handle(self.stage.kube, api, &req)
        } else {
            cf_core::api::handle(self.stage.kube, api, &req)
        };
        let (status, body, location) = world::answer(&r);
        (status, location.map(Json::from).unwrap_or(body))
    }

    /// A fresh guid of the seed's.
    fn guid(&mut self) -> String {
        let n: u64 = self.stage.rng.random();
        format!("g{n:016x}")
    }

    fn create_instance(&mut self) -> Result<(), Failure> {
        let name = self.guid();
        self.stage.kube.put(json!({
            "apiVersion": API_VERSION, "kind": "CFServiceInstance",
            "metadata": {"name": name, "namespace": SPACE, "finalizers": [KORIFI_FINALIZER]},
            "spec": {"type": "managed", "n": 0}
        }));
        let path = format!("/v3/jobs/managed_service_instance.create~{name}");
        self.stage
            .note(&format!("a client creates instance {name}"));
        let job = Job {
            path: path.clone(),
            state: true,
            role: false,
            guid: name,
        };
        self.first_poll(job)
    }

    fn change_spec(&mut self) -> Result<(), Failure> {
        let Some(name) = self.pick_instance(false) else {
            return Ok(());
        };
        self.stage
            .kube
            .edit("CFServiceInstance", SPACE, &name, |o| {
                let n = o["spec"]["n"].as_i64().unwrap_or(0);
                o["spec"]["n"] = json!(n + 1);
            });
        self.stage
            .note(&format!("a client changes instance {name}'s spec"));
        Ok(())
    }

    /// Korifi's controller acts on an instance: it lets a deleted one go, or reports it Ready,
    /// in progress, failed for good, or Ready for its previous generation.
    fn korifi_acts(&mut self) -> Result<(), Failure> {
        let Some(name) = self.pick_instance(true) else {
            return Ok(());
        };
        let kube = self.stage.kube;
        let Some(o) = kube.object("CFServiceInstance", SPACE, &name) else {
            return Ok(());
        };
        if o.metadata.deletion_timestamp.is_some() {
            kube.clear_finalizers("CFServiceInstance", SPACE, &name);
            self.stage
                .note(&format!("Korifi deprovisions {name}: it goes"));
            return Ok(());
        }
        let generation = o.metadata.generation.unwrap_or(1);
        let (observed, status, reason) = match self.stage.rng.random_range(0..4) {
            0 => (generation, "True", "Ready"),
            1 => (generation, "False", IN_PROGRESS),
            2 => (generation, "False", TERMINAL),
            _ => (generation - 1, "True", "Ready"),
        };
        report(kube, &name, observed, status, reason);
        self.stage.note(&format!(
            "Korifi reports {name}: Ready={status} ({reason}) at generation {observed} of {generation}"
        ));
        Ok(())
    }

    fn delete_instance(&mut self) -> Result<(), Failure> {
        let Some(name) = self.pick_instance(true) else {
            return Ok(());
        };
        let (status, location) =
            self.call(ADMIN, "DELETE", &format!("/v3/service_instances/{name}"));
        self.stage
            .note(&format!("a client deletes instance {name}: {status}"));
        self.accepted(status, location, false, false, name)
    }

    /// A client makes a role (a RoleBinding labelled with its guid, sometimes held by a
    /// finalizer, with a decoy named after the guid but unlabelled), or deletes one through the
    /// API.
    fn role(&mut self) -> Result<(), Failure> {
        let kube = self.stage.kube;
        if self.roles.is_empty() || self.stage.rng.random_ratio(1, 2) {
            let guid = self.guid();
            let finalizers: Vec<&str> = if self.stage.rng.random_ratio(1, 2) {
                vec!["example.com/hold"]
            } else {
                Vec::new()
            };
            kube.put(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": format!("cf-{guid}"), "namespace": SPACE,
                    "labels": {ROLE_GUID_LABEL: guid}, "finalizers": finalizers},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}}));
            if self.stage.rng.random_ratio(1, 3) {
                kube.put(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": guid, "namespace": SPACE},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}}));
                if let Some(o) = kube.object("RoleBinding", SPACE, &guid) {
                    let (uid, version) = (o.metadata.uid, o.metadata.resource_version);
                    self.decoys.push((guid.clone(), uid, version));
                }
            }
            self.stage.note(&format!("a client makes role {guid}"));
            self.roles.push(guid);
            return Ok(());
        }
        let index = self.stage.rng.random_range(0..self.roles.len());
        let guid = self.roles[index].clone();
        let (status, location) = self.call(ADMIN, "DELETE", &format!("/v3/roles/{guid}"));
        self.stage
            .note(&format!("a client deletes role {guid}: {status}"));
        // Invariant 6.
        for (name, uid, version) in &self.decoys {
            let intact = kube
                .object("RoleBinding", SPACE, name)
                .is_some_and(|o| o.metadata.uid == *uid && o.metadata.resource_version == *version);
            if !intact {
                return Err(format!(
                    "the RoleBinding {name}, not a role's (it lacks the role label), was deleted or changed by a role's deletion"
                ));
            }
        }
        self.accepted(status, location, false, true, guid)
    }

    /// A DELETE answered `status` with `location`: a `202` is tracked and polled at once.
    fn accepted(
        &mut self,
        status: u16,
        location: Json,
        state: bool,
        role: bool,
        guid: String,
    ) -> Result<(), Failure> {
        if status != 202 {
            return Ok(());
        }
        let Some(location) = location.as_str() else {
            return Err(format!("a 202 without a Location for {guid}"));
        };
        let path = location
            .find("/v3/jobs/")
            .map(|i| location[i..].to_string())
            .unwrap_or_default();
        self.first_poll(Job {
            path,
            state,
            role,
            guid,
        })
    }

    /// The first poll of a job a client was just given; never 404 (invariant 5).
    fn first_poll(&mut self, job: Job) -> Result<(), Failure> {
        let (status, body) = self.call(ADMIN, "GET", &job.path);
        self.stage.note(&format!(
            "client polls {}: {status} {}",
            job.path, body["state"]
        ));
        if status == 404 {
            return Err(format!("the first poll of {} was 404", job.path));
        }
        let path = job.path.clone();
        self.stage.deletions.insert(path.clone(), job);
        self.poll_one(&path)
    }

    fn poll(&mut self) -> Result<(), Failure> {
        if self.stage.rng.random_ratio(1, 4) {
            return self.poll_live();
        }
        match self.stage.pick_outstanding() {
            Some(path) => self.poll_one(&path),
            None => Ok(()),
        }
    }

    /// Invariant 7: the admin and the stranger poll every job type of an instance, or the
    /// deletion job of a role, that exists and is not being deleted: a deletion job answers as
    /// [`world::live_resources_job`] says; a state job answers the admin by invariant 1 and the
    /// stranger 404 (invariant 3).
    fn poll_live(&mut self) -> Result<(), Failure> {
        let kube = self.stage.kube;
        let live_roles: Vec<String> = kube
            .glance("RoleBinding", |o| {
                glance::label(o, ROLE_GUID_LABEL).filter(|_| !glance::deleting(o))
            })
            .into_iter()
            .flatten()
            .collect();
        let role = !live_roles.is_empty() && self.stage.rng.random_ratio(1, 3);
        let jobs = if role {
            let guid = live_roles[self.stage.rng.random_range(0..live_roles.len())].clone();
            vec![Job {
                path: format!("/v3/jobs/role.delete~{guid}"),
                state: false,
                role: true,
                guid,
            }]
        } else {
            let Some(name) = self.pick_instance(false) else {
                return Ok(());
            };
            ["delete", "create"]
                .into_iter()
                .map(|verb| Job {
                    path: format!("/v3/jobs/managed_service_instance.{verb}~{name}"),
                    state: verb == "create",
                    role: false,
                    guid: name.clone(),
                })
                .collect()
        };
        for job in jobs {
            for (who, token, sees) in [
                ("the admin", ADMIN, true),
                ("the stranger", STRANGER, false),
            ] {
                let (status, body) = self.call(token, "GET", &job.path);
                self.stage.note(&format!(
                    "{who} polls {} of a live {}: {status} {}",
                    job.path,
                    if job.role { "role" } else { "instance" },
                    body["state"]
                ));
                match (job.state, sees) {
                    (false, _) => world::live_resources_job(&job.path, who, sees, status, &body)?,
                    (true, true) => {
                        let state = body["state"].as_str().unwrap_or_default();
                        self.check_state_job(&job, status, state)?;
                        if status == 404 {
                            return Err(format!(
                                "the admin polled {} of a live instance and was told 404",
                                job.path
                            ));
                        }
                    }
                    (true, false) if status != 404 => {
                        return Err(format!(
                            "a stranger polled {} and was told {status} {body}",
                            job.path
                        ));
                    }
                    (true, false) => {}
                }
            }
        }
        Ok(())
    }

    /// Invariants 1 and 2 for a state job's answer, against the instance as it is now.
    fn check_state_job(&self, job: &Job, status: u16, state: &str) -> Result<(), Failure> {
        let o = self
            .stage
            .kube
            .object("CFServiceInstance", SPACE, &job.guid);
        let Some(o) = o else {
            return match status {
                404 => Ok(()),
                _ => Err(format!(
                    "{} answered {status} {state} for a gone instance",
                    job.path
                )),
            };
        };
        let json = o.json();
        let current = json["status"]["observedGeneration"].as_i64() == o.metadata.generation;
        let ready = json["status"]["conditions"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["type"] == "Ready"));
        let said = |key: &str| ready.map(|c| glance::text(c, &format!("/{key}")));
        match state {
            "COMPLETE" if !(current && said("status").as_deref() == Some("True")) => Err(format!(
                "{} is COMPLETE while {} is not Ready at generation {:?}",
                job.path, job.guid, o.metadata.generation
            )),
            "FAILED" if !(current && said("reason").as_deref() == Some(TERMINAL)) => Err(format!(
                "{} is FAILED while {} has no terminal failure at its generation",
                job.path, job.guid
            )),
            _ => Ok(()),
        }
    }

    /// Whether what a deletion job is about still exists (invariant 4).
    fn exists(&self, job: &Job) -> bool {
        let kube = self.stage.kube;
        if job.role {
            return kube
                .glance("RoleBinding", |o| glance::label(o, ROLE_GUID_LABEL))
                .iter()
                .any(|l| l.as_deref() == Some(job.guid.as_str()));
        }
        kube.exists("CFServiceInstance", SPACE, &job.guid)
    }

    /// An instance the seed picks: any, or only those not being deleted.
    fn pick_instance(&mut self, deleting_too: bool) -> Option<String> {
        let kube = self.stage.kube;
        let names: Vec<String> = instances(kube)
            .into_iter()
            .filter(|n| {
                deleting_too
                    || kube
                        .object("CFServiceInstance", SPACE, n)
                        .is_some_and(|o| o.metadata.deletion_timestamp.is_none())
            })
            .collect();
        if names.is_empty() {
            return None;
        }
        let index = self.stage.rng.random_range(0..names.len());
        names.into_iter().nth(index)
    }
}

/// The instances there are, by name, in order.
fn instances(kube: &FakeCluster) -> Vec<String> {
    kube.glance("CFServiceInstance", |o| glance::text(o, "/metadata/name"))
}

/// Korifi writes instance `name`'s status: it observed `generation`, and Ready is `status` for
/// `reason`.
fn report(kube: &FakeCluster, name: &str, generation: i64, status: &str, reason: &str) {
    kube.edit_status("CFServiceInstance", SPACE, name, |s| {
        *s = json!({"observedGeneration": generation, "conditions": [
            {"type": "Ready", "status": status, "reason": reason, "message": reason}]});
    });
}
