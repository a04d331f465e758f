//! What a small cluster's nodes and kube-controller-manager do, for a local
//! cluster: a kubelet that starts pods (an IP each, Running and Ready, and
//! run to completion when their restart policy says they end), and Job,
//! ReplicaSet and Deployment controllers that create, scale and report on
//! pods. Each pass reads the whole API server and writes only what changed,
//! every half second: a demonstration cluster, not a scheduler. A
//! controller that owns Jobs or Deployments can be tried end to end here.
//!
//! It sits above [`TestEnv`] and talks to it as any client would, through
//! its in-process object API, so the API server's rules apply to every
//! write it makes.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};

use crate::TestEnv;

/// The annotation that decides how a pod that runs to completion ends:
/// its exit code (`0` when absent: it succeeds).
pub const EXIT_CODE_ANNOTATION: &str = "local.kinject.dev/exit-code";

/// Every node of the local cluster is this one.
const HOST_IP: &str = "10.0.0.10";

/// Which parts of a small cluster [`TestEnv::run_workloads`] plays.
///
/// ```
/// use kinject_testenv::{TestEnv, Workloads};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let env = TestEnv::new();
/// // The kubelet and the Job, ReplicaSet and Deployment controllers, but
/// // not for knative-samples/controller, which the caller runs itself.
/// let workloads = Workloads::all().run_in_process("knative-samples", "controller");
/// env.run_workloads(workloads, std::future::ready(())).await;
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Workloads {
    /// Start pods: Running and Ready, or run to completion.
    pub kubelet: bool,
    /// Job, ReplicaSet and Deployment controllers.
    pub controllers: bool,
    /// Deployments (namespace, name) that get no pods: their one replica is
    /// the caller's own process.
    pub in_process: Vec<(String, String)>,
}

impl Workloads {
    /// The kubelet and the workload controllers.
    pub fn all() -> Self {
        Workloads {
            kubelet: true,
            controllers: true,
            in_process: Vec::new(),
        }
    }

    /// Whether to run the kubelet.
    pub fn kubelet(mut self, on: bool) -> Self {
        self.kubelet = on;
        self
    }

    /// Whether to run the Job, ReplicaSet and Deployment controllers.
    pub fn controllers(mut self, on: bool) -> Self {
        self.controllers = on;
        self
    }

    /// Deployment `namespace/name` runs in the caller's process: it gets no
    /// ReplicaSet or pods.
    pub fn run_in_process(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.in_process.push((namespace.into(), name.into()));
        self
    }
}

impl TestEnv {
    /// Plays the parts of a small cluster that `workloads` names, a pass
    /// every half second, until `stop` completes (a pass has always run by
    /// then). Spawn it beside [`serve`](Self::serve) for a local cluster in
    /// which pods run and Jobs finish.
    pub async fn run_workloads(&self, workloads: Workloads, stop: impl Future<Output = ()>) {
        let mut node = Kubelet::default();
        let mut refused = Refused::default();
        let mut stop = std::pin::pin!(stop);
        loop {
            if workloads.kubelet {
                node.pass(self);
            }
            if workloads.controllers {
                // One list of pods for both pod owners: a Job's creates are
                // not a ReplicaSet's, and the kubelet has already run.
                let pods = list(self, "", "v1", "pods");
                jobs(self, &pods, &mut refused);
                deployments(self, &workloads.in_process, &mut refused);
                replica_sets(self, &pods, &mut refused);
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}

/// Creates the controllers' objects; a create the API server refuses (an
/// invalid pod template, say) is logged once per owner and reason, as a
/// cluster's controllers record a `FailedCreate` event, not every pass.
#[derive(Default)]
struct Refused(std::collections::BTreeSet<String>);

impl Refused {
    fn create(&mut self, env: &TestEnv, owner: &Value, obj: Value) {
        if let Err(e) = env.create_object(obj) {
            let what = format!("{}/{}: {e}", namespace(owner), name(owner));
            if self.0.insert(what.clone()) {
                eprintln!("warning: the local cluster cannot create what {what} asks for");
            }
        }
    }
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// The objects of a built-in resource, everywhere.
fn list(env: &TestEnv, group: &str, version: &str, plural: &str) -> Vec<Value> {
    env.list_objects(group, version, plural, None)
}

fn uid(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn namespace(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some()
}

/// The pods whose controller is `owner`.
fn owned<'a>(pods: &'a [Value], owner: &Value) -> Vec<&'a Value> {
    pods.iter()
        .filter(|pod| {
            pod.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r["uid"] == uid(owner) && r["controller"] == true)
                })
        })
        .collect()
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending")
}

fn int(obj: &Value, pointer: &str, default: i64) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(default)
}

/// A pod of `template` controlled by `owner` (`kind`), named after it.
fn pod_from(template: &Value, owner: &Value, api_version: &str, kind: &str, labels: Value) -> Value {
    let mut metadata = template.get("metadata").cloned().unwrap_or_else(|| json!({}));
    metadata["generateName"] = json!(format!("{}-", name(owner)));
    metadata["namespace"] = json!(namespace(owner));
    let mut all_labels = metadata.get("labels").cloned().unwrap_or_else(|| json!({}));
    if let (Some(all), Some(extra)) = (all_labels.as_object_mut(), labels.as_object()) {
        all.extend(extra.clone());
    }
    metadata["labels"] = all_labels;
    metadata["ownerReferences"] = json!([{
        "apiVersion": api_version, "kind": kind, "name": name(owner), "uid": uid(owner),
        "controller": true, "blockOwnerDeletion": true,
    }]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
}

/// Writes a status when it differs from what is stored (so a pass that
/// changes nothing writes nothing); a conflict waits for the next pass.
fn set_status(env: &TestEnv, mut obj: Value, status: Value) {
    if obj.get("status") == Some(&status) {
        return;
    }
    obj["status"] = status;
    let _ = env.update_status(obj);
}

/// The kubelet stand-in: the pod IPs it handed out, by pod uid.
#[derive(Default)]
struct Kubelet {
    next_ip: u32,
    ips: BTreeMap<String, String>,
}

impl Kubelet {
    /// A pod IP of 10.244.0.0/16, as a cluster's pod network hands out.
    fn ip_for(&mut self, uid: &str) -> String {
        if let Some(ip) = self.ips.get(uid) {
            return ip.clone();
        }
        self.next_ip += 1;
        let n = self.next_ip;
        let ip = format!("10.244.{}.{}", (n / 250) % 256, n % 250 + 2);
        self.ips.insert(uid.to_owned(), ip.clone());
        ip
    }

    /// Starts every pending pod; a pod whose restart policy lets it end
    /// (`Never`, `OnFailure`, as a Job's) ends on the pass after it started,
    /// with the exit code its annotation asks for.
    fn pass(&mut self, env: &TestEnv) {
        for pod in list(env, "", "v1", "pods") {
            if deleting(&pod) || matches!(phase(&pod), "Succeeded" | "Failed") {
                continue;
            }
            let ip = self.ip_for(uid(&pod));
            let ends = matches!(
                pod.pointer("/spec/restartPolicy").and_then(Value::as_str),
                Some("Never" | "OnFailure")
            );
            let running = phase(&pod) == "Running";
            let now = now();
            let exit_code: i64 = pod
                .pointer(&format!(
                    "/metadata/annotations/{}",
                    EXIT_CODE_ANNOTATION.replace('/', "~1")
                ))
                .and_then(Value::as_str)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let (phase, ready, state) = if ends && running {
                let reason = if exit_code == 0 { "Completed" } else { "Error" };
                let state = json!({"terminated": {"exitCode": exit_code, "reason": reason,
                    "startedAt": pod.pointer("/status/startTime").cloned().unwrap_or(json!(now)), "finishedAt": now}});
                (if exit_code == 0 { "Succeeded" } else { "Failed" }, false, state)
            } else if running {
                continue;
            } else {
                ("Running", true, json!({"running": {"startedAt": now}}))
            };
            let statuses: Vec<Value> = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| {
                    json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": ready,
                           "started": ready, "restartCount": 0, "state": state})
                })
                .collect();
            let ready_status = if ready { "True" } else { "False" };
            let status = json!({
                "phase": phase,
                "conditions": [{"type": "Ready", "status": ready_status, "lastTransitionTime": now}],
                "containerStatuses": statuses,
                "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}],
                "podIP": ip, "podIPs": [{"ip": ip}],
                "startTime": pod.pointer("/status/startTime").cloned().unwrap_or(json!(now)),
            });
            set_status(env, pod, status);
        }
    }
}

/// The Job controller: keeps `parallelism` pods running until
/// `completions` have succeeded (Complete), or more than `backoffLimit`
/// have failed (Failed).
fn jobs(env: &TestEnv, pods: &[Value], refused: &mut Refused) {
    for job in list(env, "batch", "v1", "jobs") {
        let finished = job
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
            });
        if deleting(&job) || finished || job.pointer("/spec/suspend") == Some(&json!(true)) {
            continue;
        }
        let mine = owned(pods, &job);
        let count =
            |p: &str| i64::try_from(mine.iter().filter(|pod| phase(pod) == p).count()).unwrap_or(i64::MAX);
        let (succeeded, failed) = (count("Succeeded"), count("Failed"));
        let active = i64::try_from(mine.len()).unwrap_or(i64::MAX) - succeeded - failed;
        let completions = int(&job, "/spec/completions", 1);
        let parallelism = int(&job, "/spec/parallelism", 1);
        let now = now();
        let mut status = json!({
            "active": active, "succeeded": succeeded, "failed": failed,
            "ready": active, "terminating": 0, "uncountedTerminatedPods": {},
            "startTime": job.pointer("/status/startTime").cloned().unwrap_or(json!(now)),
        });
        if succeeded >= completions {
            status["active"] = json!(0);
            status["ready"] = json!(0);
            status["completionTime"] = json!(now);
            status["conditions"] = json!([
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
            ]);
        } else if failed > int(&job, "/spec/backoffLimit", 6) {
            status["conditions"] = json!([
                {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit", "lastProbeTime": now, "lastTransitionTime": now},
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit", "lastProbeTime": now, "lastTransitionTime": now},
            ]);
        } else {
            let wanted = parallelism.min(completions - succeeded) - active;
            let labels = json!({
                "batch.kubernetes.io/job-name": name(&job), "job-name": name(&job),
                "batch.kubernetes.io/controller-uid": uid(&job), "controller-uid": uid(&job),
            });
            for _ in 0..wanted.max(0) {
                let pod = pod_from(&job["spec"]["template"], &job, "batch/v1", "Job", labels.clone());
                refused.create(env, &job, pod);
            }
        }
        set_status(env, job, status);
    }
}

/// The ReplicaSet controller: `replicas` pods of the template, no more.
fn replica_sets(env: &TestEnv, pods: &[Value], refused: &mut Refused) {
    for rs in list(env, "apps", "v1", "replicasets") {
        if deleting(&rs) {
            continue;
        }
        let mine: Vec<&Value> = owned(pods, &rs).into_iter().filter(|p| !deleting(p)).collect();
        let replicas = int(&rs, "/spec/replicas", 1);
        let have = i64::try_from(mine.len()).unwrap_or(i64::MAX);
        for _ in have..replicas {
            let pod = pod_from(&rs["spec"]["template"], &rs, "apps/v1", "ReplicaSet", json!({}));
            refused.create(env, &rs, pod);
        }
        for surplus in mine.iter().skip(usize::try_from(replicas.max(0)).unwrap_or(0)) {
            let _ = env.delete_object("", "v1", "pods", Some(namespace(surplus)), name(surplus));
        }
        let ready = i64::try_from(mine.iter().filter(|p| phase(p) == "Running").count()).unwrap_or(0);
        let status = json!({
            "replicas": have.min(replicas), "fullyLabeledReplicas": have.min(replicas),
            "readyReplicas": ready.min(replicas), "availableReplicas": ready.min(replicas),
            "observedGeneration": int(&rs, "/metadata/generation", 1),
        });
        set_status(env, rs, status);
    }
}

/// A short, stable hash of a pod template: the name suffix and
/// `pod-template-hash` label of its ReplicaSet.
fn template_hash(template: &Value) -> String {
    let text = template.to_string();
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{:x}", hash & 0xff_ffff_ffff)
}

/// The Deployment controller: one ReplicaSet per template (the current one
/// at `replicas`, older ones at zero, as `Recreate` does), and the
/// Deployment's status from the current one.
fn deployments(env: &TestEnv, in_process: &[(String, String)], refused: &mut Refused) {
    let sets = list(env, "apps", "v1", "replicasets");
    for deployment in list(env, "apps", "v1", "deployments") {
        if deleting(&deployment)
            || in_process
                .iter()
                .any(|(ns, n)| ns == namespace(&deployment) && n == name(&deployment))
        {
            continue;
        }
        let mut template = deployment["spec"]["template"].clone();
        let hash = template_hash(&template);
        template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
        let replicas = int(&deployment, "/spec/replicas", 1);
        let mine = owned(&sets, &deployment);
        let current_name = format!("{}-{hash}", name(&deployment));
        for old in mine.iter().filter(|rs| name(rs) != current_name) {
            if int(old, "/spec/replicas", 0) != 0 {
                let mut scaled = (*old).clone();
                scaled["spec"]["replicas"] = json!(0);
                let _ = env.update_object(scaled);
            }
        }
        let current = mine.iter().find(|rs| name(rs) == current_name);
        match current {
            None => {
                let mut selector = deployment["spec"]["selector"].clone();
                selector["matchLabels"]["pod-template-hash"] = json!(hash);
                let replica_set = json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {
                        "name": current_name, "namespace": namespace(&deployment),
                        "labels": template["metadata"]["labels"],
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                            "name": name(&deployment), "uid": uid(&deployment),
                            "controller": true, "blockOwnerDeletion": true}],
                    },
                    "spec": {"replicas": replicas, "selector": selector, "template": template},
                });
                refused.create(env, &deployment, replica_set);
            }
            Some(rs) if int(rs, "/spec/replicas", 0) != replicas => {
                let mut scaled = (*rs).clone();
                scaled["spec"]["replicas"] = json!(replicas);
                let _ = env.update_object(scaled);
            }
            Some(_) => {}
        }
        let status = deployment_status(&deployment, current.copied(), &current_name, replicas);
        // Timestamps change every pass; compare without them.
        let strip = |v: &Value| {
            let mut v = v.clone();
            for c in v
                .get_mut("conditions")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                c.as_object_mut().map(|c| {
                    c.remove("lastUpdateTime");
                    c.remove("lastTransitionTime")
                });
            }
            v
        };
        if deployment.get("status").map(strip) != Some(strip(&status)) {
            set_status(env, deployment, status);
        }
    }
}

/// A Deployment's status from its current ReplicaSet (`None` before it is
/// created), as kube-controller-manager reports it.
fn deployment_status(
    deployment: &Value,
    current: Option<&Value>,
    current_name: &str,
    replicas: i64,
) -> Value {
    let available = current.map_or(0, |rs| int(rs, "/status/availableReplicas", 0));
    let now = now();
    let condition = |kind: &str, ok: bool, reason: &str, message: &str| {
        json!({"type": kind, "status": if ok { "True" } else { "False" }, "reason": reason,
               "message": message, "lastUpdateTime": now, "lastTransitionTime": now})
    };
    let (reason, message) = if available >= replicas {
        ("MinimumReplicasAvailable", "Deployment has minimum availability.")
    } else {
        (
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    json!({
        "observedGeneration": int(deployment, "/metadata/generation", 1),
        "replicas": current.map_or(0, |rs| int(rs, "/status/replicas", 0)),
        "updatedReplicas": current.map_or(0, |rs| int(rs, "/status/replicas", 0)),
        "readyReplicas": current.map_or(0, |rs| int(rs, "/status/readyReplicas", 0)),
        "availableReplicas": available,
        "conditions": [
            condition("Available", available >= replicas, reason, message),
            condition("Progressing", true, "NewReplicaSetAvailable",
                &format!("ReplicaSet \"{current_name}\" has successfully progressed.")),
        ],
    })
}
