//! kubectl against the loopback server: apply a CRD and an instance, get (table and
//! YAML), watch a change, delete. Skips with a notice when kubectl is not installed
//! (and fails instead where `CI` or `TESTENV_REQUIRE_KUBECTL` is set).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether kubectl can be run. Not being on PATH is a reason to skip; a kubectl that is
/// there but fails is a broken setup, and fails the test.
pub(crate) fn kubectl_available() -> bool {
    match Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(out) if out.status.success() => true,
        Ok(out) => panic!(
            "kubectl is on PATH but `kubectl version --client` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => panic!("cannot run kubectl: {e}"),
    }
}

/// Reports a skipped test where it is seen: the harness captures `println!` and shows
/// it only for failures, so this writes to the process's stderr directly. With
/// `TESTENV_REQUIRE_KUBECTL` or `CI` set (CI has kubectl), skipping is a failure.
pub(crate) fn skip(why: &str) {
    use std::io::Write as _;
    for required in ["TESTENV_REQUIRE_KUBECTL", "CI"] {
        assert!(
            std::env::var_os(required).is_none(),
            "{required} is set but the kubectl test would skip: {why}"
        );
    }
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

pub(crate) struct Kubectl {
    pub(crate) kubeconfig: PathBuf,
    pub(crate) cache: PathBuf,
}

impl Kubectl {
    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        c
    }

    /// `kubectl create` through protobuf, which `-v=8` shows kubectl chose.
    fn create_through_protobuf(&self, cmd: &[String], ns: &[&str]) {
        let mut full: Vec<&str> = vec!["create", "-v=8"];
        full.extend(ns);
        full.extend(cmd.iter().map(String::as_str));
        let out = self.cmd(&full).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kubectl {full:?} failed:\n{stderr}");
        assert!(
            stderr.contains("Content-Type: application/vnd.kubernetes.protobuf"),
            "kubectl {full:?} did not send protobuf:\n{stderr}"
        );
    }

    /// `kubectl create` through JSON: the generator's output, created from a file.
    fn create_through_json(&self, dir: &Path, cmd: &[String], ns: &[&str], n: usize) {
        // The flags go first: a command's arguments after `--` are the container's.
        let mut full: Vec<&str> = vec!["create", "--dry-run=client", "-o", "json"];
        full.extend(ns);
        full.extend(cmd.iter().map(String::as_str));
        let json = self.run(&full);
        let file = write(dir, &format!("obj-{n}.json"), &json);
        let mut from_file: Vec<&str> = vec!["create", "-f", &file];
        from_file.extend(ns);
        self.run(&from_file);
    }

    /// The stored object without what differs between two objects made alike: name,
    /// namespace, revision, times and uid.
    fn get_comparable(&self, resource: &str, name: &str, ns: &[&str]) -> serde_json::Value {
        let mut full = vec!["get", resource, name, "-o", "json"];
        full.extend(ns);
        let mut v: serde_json::Value = serde_json::from_str(&self.run(&full)).unwrap();
        let meta = v["metadata"].as_object_mut().unwrap();
        for f in ["name", "namespace", "resourceVersion", "creationTimestamp"] {
            meta.remove(f);
        }
        for m in meta
            .get_mut("managedFields")
            .and_then(|m| m.as_array_mut())
            .into_iter()
            .flatten()
        {
            m.as_object_mut().unwrap().remove("time");
        }
        // A Job's selector and labels carry its uid.
        let uid = meta.remove("uid").unwrap();
        serde_json::from_str(&v.to_string().replace(uid.as_str().unwrap(), "UID")).unwrap()
    }

    /// Runs a command that must fail, and returns its stderr.
    pub(crate) fn fail(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "kubectl {args:?} succeeded:\n{stderr}");
        stderr
    }

    pub(crate) fn run(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{stdout}\n{stderr}"
        );
        stdout
    }
}

pub(crate) fn write(dir: &Path, name: &str, content: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_watch_delete() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = kinject_testenv::TestEnv::new();
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    server.write_kubeconfig(dir.join("kubeconfig")).unwrap();
    let k = Kubectl {
        kubeconfig: dir.join("kubeconfig"),
        cache: dir.join("cache"),
    };
    let crd = write(&dir, "crd.json", &common::crd().to_string());
    let instance = |svc: &str| {
        format!(
            "apiVersion: samples.knative.dev/v1alpha1\nkind: AddressableService\nmetadata:\n  name: rut\nspec:\n  serviceName: {svc}\n"
        )
    };
    let as1 = write(&dir, "as1.yaml", &instance("webhook"));
    let as2 = write(&dir, "as2.yaml", &instance("webhook2"));

    let dir2 = dir.clone();
    tokio::task::spawn_blocking(move || {
        let out = k.run(&["apply", "-f", &crd]);
        assert!(out.contains("customresourcedefinition.apiextensions.k8s.io/addressableservices.samples.knative.dev created"), "{out}");
        let out = k.run(&["apply", "-f", &as1]);
        assert!(out.contains("addressableservice.samples.knative.dev/rut created"), "{out}");

        let out = k.run(&["get", "addressableservices"]);
        assert!(out.starts_with("NAME"), "{out}");
        assert!(out.lines().nth(1).is_some_and(|l| l.starts_with("rut ")), "{out}");
        let out = k.run(&["get", "asvc", "rut", "-o", "yaml"]);
        assert!(out.contains("serviceName: webhook"), "{out}");
        assert!(out.contains("generation: 1"), "{out}");

        let mut watch = k
            .cmd(&["get", "addressableservices", "-w", "-o", "jsonpath={.spec.serviceName}{\"\\n\"}"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let sink = std::sync::Arc::clone(&lines);
        let stdout = watch.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let wait_for = |want: &str| {
            for _ in 0..200 {
                if lines.lock().unwrap().iter().any(|l| l == want) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            panic!("kubectl get -w never printed {want:?}: {:?}", lines.lock().unwrap());
        };
        wait_for("webhook");
        let out = k.run(&["apply", "-f", &as2]);
        assert!(out.contains("configured"), "{out}");
        wait_for("webhook2");
        let _ = watch.kill();
        let _ = watch.wait();
        let _ = reader.join();

        let out = k.run(&["scale", "addressableservice", "rut", "--replicas=3"]);
        assert!(out.contains("scaled"), "{out}");
        let out = k.run(&["get", "asvc", "rut", "-o", "jsonpath={.spec.replicas}"]);
        assert_eq!(out, "3");

        // Generator subcommands send protobuf bodies.
        k.run(&["create", "namespace", "team-a"]);
        k.run(&["create", "configmap", "cfg", "-n", "team-a", "--from-literal=k=v"]);
        let out = k.run(&["get", "configmap", "cfg", "-n", "team-a", "-o", "jsonpath={.data.k}"]);
        assert_eq!(out, "v");

        let out = k.run(&["delete", "-f", &as2]);
        assert!(out.contains("deleted"), "{out}");
        let out = k.run(&["get", "addressableservices", "-o", "name"]);
        assert!(out.trim().is_empty(), "{out}");
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir2);
    server.shutdown().await;
}

/// testenv's own manifests (`tests/fixtures`: a namespace, a CRD and an object of
/// its kind, a ConfigMap, a service account and its RBAC) apply as they would to a
/// cluster, and `kubectl api-resources` sees the short names kube-apiserver gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_the_fixture_manifests() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = kinject_testenv::TestEnv::new();
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-fixtures-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    server.write_kubeconfig(dir.join("kubeconfig")).unwrap();
    let k = Kubectl {
        kubeconfig: dir.join("kubeconfig"),
        cache: dir.join("cache"),
    };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files: Vec<String> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    // The numbers in their names order them as they depend on each other.
    files.sort();
    let dir2 = dir.clone();
    tokio::task::spawn_blocking(move || {
        for f in &files {
            let out = k.run(&["apply", "-f", f]);
            assert!(out.contains(" created"), "{f}: {out}");
        }
        // A second apply finds everything as the manifests say.
        for f in &files {
            let out = k.run(&["apply", "-f", f]);
            assert!(out.contains(" unchanged"), "{f}: {out}");
        }
        assert_fixtures_stored(&k);
        assert_short_names(&k);
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir2);
    server.shutdown().await;
}

/// What applying `tests/fixtures` stored, as `kubectl get` shows it.
fn assert_fixtures_stored(k: &Kubectl) {
    let out = k.run(&["get", "roles,rolebindings", "-n", "fixtures", "-o", "name"]);
    assert!(out.contains("role.rbac.authorization.k8s.io/"), "{out}");
    assert!(out.contains("rolebinding.rbac.authorization.k8s.io/"), "{out}");
    let out = k.run(&["get", "clusterroles,clusterrolebindings", "-o", "name"]);
    assert!(out.contains("clusterrole.rbac.authorization.k8s.io/"), "{out}");
    assert!(
        out.contains("clusterrolebinding.rbac.authorization.k8s.io/"),
        "{out}"
    );

    let out = k.run(&["get", "rolebindings", "-n", "fixtures"]);
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "ROLE", "AGE"], "{out}");
    assert!(out.contains("Role/sprocket-controller"), "{out}");
    let out = k.run(&["get", "clusterroles"]);
    assert!(out.starts_with("NAME") && out.contains("CREATED AT"), "{out}");

    let out = k.run(&["get", "spr", "-n", "fixtures"]);
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "TEETH"], "{out}");
    assert_eq!(rows[1], ["main-drive", "32"], "{out}");
    let out = k.run(&[
        "get",
        "configmap",
        "sprocket-settings",
        "-n",
        "fixtures",
        "-o",
        "jsonpath={.data.speed}",
    ]);
    assert_eq!(out, "fast");
    let out = k.run(&["get", "sa,quota,limits,pdb", "-n", "fixtures", "-o", "name"]);
    assert!(out.contains("serviceaccount/sprocket-controller"), "{out}");
}

fn assert_short_names(k: &Kubectl) {
    let out = k.run(&["api-resources", "--no-headers"]);
    for (short, resource) in [
        ("rs", "replicasets"),
        ("sts", "statefulsets"),
        ("ds", "daemonsets"),
        ("cj", "cronjobs"),
        ("pdb", "poddisruptionbudgets"),
        ("quota", "resourcequotas"),
        ("limits", "limitranges"),
        ("netpol", "networkpolicies"),
        ("pvc", "persistentvolumeclaims"),
        ("pv", "persistentvolumes"),
        ("ing", "ingresses"),
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(resource) && l.split_whitespace().nth(1) == Some(short)),
            "{resource} ({short}) missing:\n{out}"
        );
    }
}

/// A CRD of `kind` whose printer columns take what `[*]`, filters, negative indices
/// and missing fields give; `description` sizes it.
fn printer_column_crd(plural: &str, kind: &str, description: &str) -> String {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "description": description,
                    "x-kubernetes-preserve-unknown-fields": true}},
                "additionalPrinterColumns": [
                    {"name": "Active", "type": "string", "jsonPath": ".status.active[*].name"},
                    {"name": "Ready", "type": "string",
                     "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Missing", "type": "string", "jsonPath": ".status.missing"},
                    {"name": "Wide", "type": "string", "jsonPath": ".status.active[-1].name", "priority": 1}
                ]
            }]
        }
    })
    .to_string()
}

/// `kubectl get` prints a CRD's printer columns as against a cluster, `[*]` included;
/// a client-side `kubectl apply` of a CRD over 256 KiB fails on the annotation it would
/// store the CRD in, while a server-side apply of it stores no such annotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_printer_columns_and_meets_the_annotation_limit() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = kinject_testenv::TestEnv::new();
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-columns-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    server.write_kubeconfig(dir.join("kubeconfig")).unwrap();
    let k = Kubectl {
        kubeconfig: dir.join("kubeconfig"),
        cache: dir.join("cache"),
    };
    let widgets = write(
        &dir,
        "widgets.json",
        &printer_column_crd("widgets", "Widget", "small"),
    );
    let widget = write(
        &dir,
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  replicas: 3\nstatus:\n  \
         active:\n  - name: first\n  - name: second\n  conditions:\n  - type: Synced\n    status: \"False\"\n  \
         - type: Ready\n    status: \"True\"\n",
    );
    // Big enough that the copy client-side apply keeps in an annotation is over the limit.
    let big = write(
        &dir,
        "big.json",
        &printer_column_crd("bigs", "Big", &"x".repeat(300 * 1024)),
    );

    let dir2 = dir.clone();
    tokio::task::spawn_blocking(move || {
        k.run(&["apply", "-f", &widgets]);
        k.run(&["apply", "-f", &widget]);
        let out = k.run(&["get", "widgets"]);
        let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            rows,
            [
                vec!["NAME", "ACTIVE", "READY", "REPLICAS", "MISSING"],
                // kube-apiserver sends a missing value as a null cell, which kubectl
                // leaves blank (`<none>` is what its own custom columns print).
                vec!["w", "first", "True", "3"]
            ],
            "{out}"
        );
        let out = k.run(&["get", "widgets", "-o", "wide"]);
        let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0].last(), Some(&"WIDE"), "{out}");
        assert_eq!(rows[1].last(), Some(&"second"), "{out}");

        let out = k.cmd(&["apply", "-f", &big]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains(
                "The CustomResourceDefinition \"bigs.example.com\" is invalid: metadata.annotations: \
                 Too long: may not be more than 262144 bytes"
            ),
            "{stderr}"
        );
        let out = k.run(&["apply", "--server-side", "-f", &big]);
        assert!(
            out.contains("customresourcedefinition.apiextensions.k8s.io/bigs.example.com serverside-applied"),
            "{out}"
        );
        let out = k.run(&[
            "get",
            "crd",
            "bigs.example.com",
            "-o",
            "jsonpath={.metadata.annotations}",
        ]);
        assert!(out.is_empty(), "{out}");
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir2);
    server.shutdown().await;
}

pub(crate) fn uuid_like() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    )
}

/// Without kubectl the test above is skipped visibly, not passed in silence.
#[test]
fn a_missing_kubectl_is_a_visible_skip() {
    let empty = std::env::temp_dir().join(format!("testenv-no-kubectl-{}", uuid_like()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "kubectl::kubectl_apply_get_watch_delete",
            "--test-threads=1",
        ])
        .env("PATH", &empty)
        .env_remove("TESTENV_REQUIRE_KUBECTL")
        .env_remove("CI")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&empty);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("skipped: kubectl not found on PATH"),
        "stderr: {stderr}"
    );
}

/// Namespaced kinds `kubectl create` makes: (resource, arguments after `kubectl
/// create`); `NAME` is the object's name.
const NAMESPACED_GENERATORS: &[(&str, &[&str])] = &[
    (
        "configmap",
        &["configmap", "NAME", "--from-literal=a=b", "--from-literal=empty="],
    ),
    (
        "secret",
        &["secret", "generic", "NAME", "--from-literal=k=v", "--type=Opaque"],
    ),
    (
        "secret",
        &[
            "secret",
            "docker-registry",
            "NAME",
            "--docker-username=u",
            "--docker-password=p",
            "--docker-server=r.example",
        ],
    ),
    ("serviceaccount", &["serviceaccount", "NAME"]),
    (
        "service",
        &["service", "clusterip", "NAME", "--tcp=80:8080", "--tcp=443:https"],
    ),
    (
        "service",
        &[
            "service",
            "externalname",
            "NAME",
            "--external-name=db.example.com",
        ],
    ),
    (
        "deployment",
        &["deployment", "NAME", "--image=nginx", "--replicas=2", "--port=80"],
    ),
    ("job", &["job", "NAME", "--image=busybox", "--", "echo", "hi"]),
    (
        "cronjob",
        &[
            "cronjob",
            "NAME",
            "--image=busybox",
            "--schedule=*/5 * * * *",
            "--",
            "date",
        ],
    ),
    (
        "role",
        &[
            "role",
            "NAME",
            "--verb=get,list",
            "--resource=pods,deployments.apps",
            "--resource-name=a",
        ],
    ),
    (
        "rolebinding",
        &[
            "rolebinding",
            "NAME",
            "--role=NAME",
            "--user=alice",
            "--serviceaccount=pb:default",
        ],
    ),
    (
        "resourcequota",
        &[
            "quota",
            "NAME",
            "--hard=pods=3,requests.cpu=500m,requests.memory=1Gi",
        ],
    ),
    (
        "poddisruptionbudget",
        &[
            "poddisruptionbudget",
            "NAME",
            "--selector=app=NAME",
            "--min-available=50%",
        ],
    ),
    (
        "ingress",
        &[
            "ingress",
            "NAME",
            "--class=default",
            "--rule=foo.example/bar*=svc:8080",
            "--rule=baz.example/=svc2:http",
        ],
    ),
];

/// Cluster-scoped kinds `kubectl create` makes, as above.
const CLUSTER_GENERATORS: &[(&str, &[&str])] = &[
    (
        "clusterrole",
        &[
            "clusterrole",
            "NAME",
            "--verb=get",
            "--resource=nodes",
            "--non-resource-url=/logs/*",
        ],
    ),
    (
        "clusterrolebinding",
        &["clusterrolebinding", "NAME", "--clusterrole=view", "--group=devs"],
    ),
    (
        "priorityclass",
        &[
            "priorityclass",
            "NAME",
            "--value=1000",
            "--description=d",
            "--preemption-policy=Never",
        ],
    ),
];

/// `kubectl create <kind>` sends protobuf; the same object created from its JSON
/// (`--dry-run=client -o json`, then `kubectl create -f`) must be stored alike. The
/// namespaced kinds are made with one name in two namespaces, so that fields derived
/// from the name (a Deployment's labels) match too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators_send_protobuf() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = kinject_testenv::TestEnv::new();
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-pb-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    server.write_kubeconfig(dir.join("kubeconfig")).unwrap();
    let k = Kubectl {
        kubeconfig: dir.join("kubeconfig"),
        cache: dir.join("cache"),
    };
    let dir2 = dir.clone();
    tokio::task::spawn_blocking(move || {
        let args = |cmd: &[&str], name: &str| -> Vec<String> {
            cmd.iter().map(|a| a.replace("NAME", name)).collect()
        };
        k.run(&["create", "namespace", "pb"]);
        k.run(&["create", "namespace", "js"]);
        for (n, (resource, cmd)) in NAMESPACED_GENERATORS.iter().enumerate() {
            let name = format!("x{n}");
            k.create_through_protobuf(&args(cmd, &name), &["-n", "pb"]);
            k.create_through_json(&dir, &args(cmd, &name), &["-n", "js"], n);
            let (pb, js) = (
                k.get_comparable(resource, &name, &["-n", "pb"]),
                k.get_comparable(resource, &name, &["-n", "js"]),
            );
            assert_eq!(pb, js, "{cmd:?}");
        }
        for (n, (resource, cmd)) in CLUSTER_GENERATORS.iter().enumerate() {
            let (pb_name, js_name) = (format!("pb-{n}"), format!("js-{n}"));
            k.create_through_protobuf(&args(cmd, &pb_name), &[]);
            k.create_through_json(&dir, &args(cmd, &js_name), &[], NAMESPACED_GENERATORS.len() + n);
            let (pb, js) = (
                k.get_comparable(resource, &pb_name, &[]),
                k.get_comparable(resource, &js_name, &[]),
            );
            assert_eq!(pb, js, "{cmd:?}");
        }
        assert_generated_values(&k);
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir2);
    server.shutdown().await;
}

/// Spot checks that the generators' values arrived, not only that both paths agree.
fn assert_generated_values(k: &Kubectl) {
    let jsonpath = |resource: &str, name: &str, path: &str| {
        k.run(&[
            "get",
            resource,
            name,
            "-n",
            "pb",
            "-o",
            &format!("jsonpath={path}"),
        ])
    };
    assert_eq!(jsonpath("secret", "x1", "{.data.k}"), "dg==");
    assert_eq!(
        jsonpath("service", "x4", "{.spec.ports[*].targetPort}"),
        "8080 https"
    );
    assert_eq!(jsonpath("deployment", "x6", "{.spec.replicas}"), "2");
    assert_eq!(jsonpath("pdb", "x12", "{.spec.minAvailable}"), "50%");
    assert_eq!(jsonpath("quota", "x11", "{.spec.hard.requests\\.cpu}"), "500m");
}

/// A CRD whose fields are described, for `kubectl explain`.
fn widget_crd(size_description: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {{kind: Widget, plural: widgets, singular: widget}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              description: What the widget should be.
              properties:
                size:
                  type: integer
                  description: {size_description}
                colour:
                  type: string
"
    )
}

fn widget(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: default\nspec: {spec}\n"
    )
}

/// A server with the Widget CRD applied, and kubectl set up for it in a new directory.
async fn widget_setup(
    env: &kinject_testenv::TestEnv,
    name: &str,
) -> (kinject_testenv::Server, Kubectl, PathBuf) {
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-kubectl-{name}-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    server.write_kubeconfig(dir.join("kubeconfig")).unwrap();
    let k = Kubectl {
        kubeconfig: dir.join("kubeconfig"),
        cache: dir.join("cache"),
    };
    let crd = write(&dir, "crd.yaml", &widget_crd("How many teeth the widget has."));
    let out = tokio::task::spawn_blocking(move || (k.run(&["apply", "-f", &crd]), k))
        .await
        .unwrap();
    assert!(out.0.contains("widgets.example.com created"), "{}", out.0);
    (server, out.1, dir)
}

/// `kubectl explain` reads the OpenAPI v3 documents: a CRD's fields with their
/// descriptions, a built-in kind's nested fields, and a CRD's change although
/// kubectl caches the documents on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explains_crd_and_builtin_fields() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = kinject_testenv::TestEnv::new();
    let (server, k, dir) = widget_setup(&env, "explain").await;
    let changed = write(&dir, "crd2.yaml", &widget_crd("How many cogs it turns."));
    tokio::task::spawn_blocking(move || {
        let out = k.run(&["explain", "widgets.spec"]);
        assert!(out.contains("KIND:       Widget"), "{out}");
        assert!(out.contains("FIELD: spec <Object>"), "{out}");
        assert!(out.contains("What the widget should be."), "{out}");
        assert!(
            out.contains("size\t<integer>\n    How many teeth the widget has."),
            "{out}"
        );
        assert!(out.contains("colour\t<string>"), "{out}");

        let out = k.run(&["explain", "pods.spec.containers"]);
        assert!(out.contains("FIELD: containers <[]Container>"), "{out}");
        assert!(out.contains("image\t<string>"), "{out}");
        assert!(out.contains("name\t<string> -required-"), "{out}");
        let out = k.run(&["explain", "deployments.spec.replicas"]);
        assert!(out.contains("GROUP:      apps"), "{out}");
        assert!(out.contains("FIELD: replicas <integer>"), "{out}");

        k.run(&["apply", "-f", &changed]);
        let out = k.run(&["explain", "widgets.spec.size"]);
        assert!(out.contains("How many cogs it turns."), "{out}");
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    server.shutdown().await;
}

/// kubectl leaves a lone object's validation to a server whose OpenAPI offers
/// `fieldValidation`, as kube-apiserver's does, and validates the items of a `List`
/// itself against the OpenAPI v2 schemas: a wrong type or an unknown field is
/// refused before any request is made, in kubectl's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_validates_list_items_on_the_client() {
    if !kubectl_available() {
        skip("kubectl not found on PATH");
        return;
    }
    let env = kinject_testenv::TestEnv::new();
    let (server, k, dir) = widget_setup(&env, "validate").await;
    let good = write(&dir, "good.yaml", &widget("good", "{size: 3, colour: red}"));
    let list = |items: &[String]| {
        let items: Vec<String> = items
            .iter()
            .map(|i| format!("- {}", i.replace('\n', "\n  ")))
            .collect();
        format!("apiVersion: v1\nkind: List\nitems:\n{}\n", items.join("\n"))
    };
    let good_list = write(&dir, "good-list.yaml", &list(&[widget("in-list", "{size: 4}")]));
    let wrong_type = write(
        &dir,
        "wrong-type.yaml",
        &list(&[widget("wrong-type", "{size: three}")]),
    );
    let unknown = write(
        &dir,
        "unknown.yaml",
        &list(&[widget("unknown", "{size: 3, shape: round}")]),
    );
    let lone_wrong_type = write(&dir, "lone.yaml", &widget("lone", "{size: three}"));
    let env2 = env.clone();
    tokio::task::spawn_blocking(move || {
        let out = k.run(&["apply", "-f", &good]);
        assert!(out.contains("widget.example.com/good created"), "{out}");
        let out = k.run(&["apply", "-f", &good_list]);
        assert!(out.contains("widget.example.com/in-list created"), "{out}");
        let creates = env2.request_count("create", "widgets");

        let err = k.fail(&["apply", "-f", &wrong_type]);
        assert!(err.contains("error validating data: ValidationError(Widget.spec.size): invalid type for com.example.v1.Widget.spec.size: got \"string\", expected \"integer\""), "{err}");
        let err = k.fail(&["create", "-f", &unknown]);
        assert!(err.contains("error validating data: ValidationError(Widget.spec): unknown field \"shape\" in com.example.v1.Widget.spec"), "{err}");
        assert_eq!(env2.request_count("create", "widgets"), creates, "refused before any request");

        let err = k.fail(&["apply", "-f", &lone_wrong_type]);
        assert!(err.contains("spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""), "{err}");
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    server.shutdown().await;
}
