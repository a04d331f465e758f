//! The controller's image against real parts, as a cluster would meet it:
//! built without a daemon, pushed to Debian's `docker-registry` on loopback,
//! read back with `skopeo`, unpacked with `umoci`, and run from the unpacked
//! root filesystem as user 65532 under `chroot` against testenv, where it
//! converges an AddressableService.
//!
//! **Why it takes about 7 s warm:** compressing and hashing the 100 MB debug
//! controller, then unpacking and starting it.
//!
//! `.ci/run` installs the three programs. Without them the test says so and
//! passes, unless `CI` is set: there a missing one fails it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kinject_image::{Build, Credentials, NONROOT};
use kinject_testenv::TestEnv;
use serde_json::{Value, json};

const NS: &str = "knative-samples";
const PROGRAMS: [&str; 3] = ["docker-registry", "skopeo", "umoci"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A directory under the system's temporary directory, removed when dropped
/// (it holds the registry's storage and an unpacked image: hundreds of MB).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!("kinject-image-e2e-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The programs this test needs that are not on `PATH`.
fn missing_programs() -> Vec<&'static str> {
    PROGRAMS
        .into_iter()
        .filter(|program| {
            Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .stdout(Stdio::null())
                .status()
                .map_or(true, |status| !status.success())
        })
        .collect()
}

/// A process killed when the test ends, however it ends.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `program` and answers its standard output, failing with its
/// standard error.
fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_image_runs_from_a_registry_as_nonroot() {
    let missing = missing_programs();
    if !missing.is_empty() {
        let message = format!(
            "{missing:?} not installed; `.ci/run` installs them (apt-get install -y docker-registry skopeo umoci)"
        );
        assert!(std::env::var_os("CI").is_none(), "CI is set and {message}");
        println!("skipped: {message}");
        return;
    }
    let scratch = Scratch::new();
    let dir = &scratch.0;
    let registry = kinject_image::LocalRegistry::start(dir).unwrap();
    let address = registry.address().to_owned();

    let revision = kinject_image::source_revision(&repo());
    let image = Build::new(env!("CARGO_BIN_EXE_controller"), revision.as_str())
        .source("https://github.com/kinject/kinject")
        .build()
        .unwrap();
    println!(
        "controller image {}: {} entries, {} bytes compressed ({:.1} MB)",
        image.digest(),
        image.files().len(),
        image.compressed_size(),
        image.compressed_size() as f64 / 1e6
    );
    let pushed = kinject_image::push(&image, &format!("{address}/controller"), &Credentials::Anonymous)
        .await
        .unwrap();
    assert_eq!(pushed, format!("{address}/controller@{}", image.digest()));

    inspect(&pushed, &image, &revision);
    resolve_the_deployment(&pushed);
    let rootfs = unpack(dir, &image);
    run_from_rootfs(dir, &rootfs).await;
}

/// What a cluster's container runtime would read from the registry.
fn inspect(pushed: &str, image: &kinject_image::Image, revision: &str) {
    let docker = format!("docker://{pushed}");
    let inspected: Value =
        serde_json::from_str(&run("skopeo", &["inspect", "--tls-verify=false", &docker])).unwrap();
    assert_eq!(inspected["Digest"], image.digest());
    assert_eq!(inspected["Os"], "linux");
    assert_eq!(inspected["Labels"]["org.opencontainers.image.revision"], revision);
    assert_eq!(
        inspected["Labels"]["org.opencontainers.image.source"],
        "https://github.com/kinject/kinject"
    );
    assert_eq!(inspected["Layers"], json!([image.layer_digest()]));
    let config: Value = serde_json::from_str(&run(
        "skopeo",
        &["inspect", "--config", "--tls-verify=false", &docker],
    ))
    .unwrap();
    assert_eq!(config["config"]["User"], NONROOT.to_string());
    assert_eq!(config["config"]["Entrypoint"], json!(["/ko-app/controller"]));
}

/// config/controller.yaml naming the binary instead of an image resolves to
/// what was pushed, and nothing else of it changes.
fn resolve_the_deployment(pushed: &str) {
    let text = std::fs::read_to_string(repo().join("config/controller.yaml")).unwrap();
    let placeholder = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("image: "))
        .expect("config/controller.yaml names an image")
        .to_owned();
    let by_binary = text.replace(&format!("image: {placeholder}"), "image: kinject://controller");
    let resolved = kinject_image::resolve("config/controller.yaml", &by_binary, |binary| {
        assert_eq!(binary, "controller");
        Ok::<_, kinject_image::Error>(pushed.to_owned())
    })
    .unwrap();
    assert_eq!(
        resolved,
        text.replace(&format!("image: {placeholder}"), &format!("image: {pushed}"))
    );
}

/// The image written as an OCI layout and unpacked by umoci; the root
/// filesystem's path.
fn unpack(dir: &Path, image: &kinject_image::Image) -> PathBuf {
    let layout = dir.join("layout");
    image.write_layout(&layout, "latest").unwrap();
    let bundle = dir.join("bundle");
    let source = format!("{}:latest", layout.display());
    let mut args = vec!["unpack", "--image", &source];
    if !is_root() {
        args.push("--rootless");
    }
    let target = bundle.display().to_string();
    args.push(&target);
    run("umoci", &args);
    let rootfs = bundle.join("rootfs");
    assert!(rootfs.join("ko-app/controller").is_file());
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");
    rootfs
}

fn is_root() -> bool {
    run("id", &["-u"]).trim() == "0"
}

/// The controller from the unpacked root filesystem, under `chroot` as
/// 65532 with the image's environment only, against testenv over loopback.
async fn run_from_rootfs(dir: &Path, rootfs: &Path) {
    if !is_root() {
        println!(
            "not run from the root filesystem: chroot needs root, and this test runs as uid {}",
            run("id", &["-u"]).trim()
        );
        return;
    }
    let env = TestEnv::new();
    for file in [
        "100-namespace.yaml",
        "200-serviceaccount.yaml",
        "200-clusterrole.yaml",
        "200-role.yaml",
        "201-clusterrolebinding.yaml",
        "201-rolebinding.yaml",
        "300-addressableservice.yaml",
        "300-simpledeployment.yaml",
        "config-logging.yaml",
        "config-leader-election.yaml",
        "config-observability.yaml",
    ] {
        let text = std::fs::read_to_string(repo().join("config").join(file)).unwrap();
        env.create_from_yaml(file, &text)
            .unwrap_or_else(|e| panic!("applying {file}: {e}"));
    }
    let server = env.serve().await.unwrap();
    let token = env.service_account_token(NS, "controller");
    std::fs::write(rootfs.join("kubeconfig"), server.kubeconfig_with_token(&token)).unwrap();

    let log = dir.join("controller.log");
    // Found on this PATH: the controller's own (the image's) has no sbin.
    let chroot = run("sh", &["-c", "command -v chroot"]);
    let controller = Process(
        Command::new(chroot.trim())
            .arg(format!("--userspec={NONROOT}:{NONROOT}"))
            .arg(rootfs)
            .args(["/ko-app/controller", "--kubeconfig", "/kubeconfig"])
            .env_clear()
            .env("PATH", "/ko-app:/usr/local/bin:/usr/bin:/bin")
            .env("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
            .env("SYSTEM_NAMESPACE", NS)
            .env("POD_NAME", "controller-0")
            .env("METRICS_PROMETHEUS_PORT", "0")
            .env("PROBES_PORT", "0")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("controller.stderr")).unwrap())
            .spawn()
            .unwrap(),
    );
    converge(&env, dir, controller).await;
}

async fn converge(env: &TestEnv, dir: &Path, mut controller: Process) {
    env.create_object(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "webhook", "namespace": NS},
        "spec": {"ports": [{"port": 443, "targetPort": 8443}]}}))
        .unwrap();
    env.create_object(
        json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "from-the-image", "namespace": NS}, "spec": {"serviceName": "webhook"}}),
    )
    .unwrap();
    let started = Instant::now();
    loop {
        let ready = env
            .get_object(
                "samples.knative.dev",
                "v1alpha1",
                "addressableservices",
                Some(NS),
                "from-the-image",
            )
            .is_some_and(|o| {
                o["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
        if ready {
            break;
        }
        let exited = controller.0.try_wait().unwrap();
        let stderr = std::fs::read_to_string(dir.join("controller.stderr")).unwrap_or_default();
        assert!(
            exited.is_none(),
            "the controller in the image exited ({exited:?}):\n{stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the AddressableService was not Ready after 60 s; stderr:\n{stderr}\nrequests refused: {:#?}",
            env.denied_requests()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // chroot execs the controller: the process is the controller's.
    let status = std::fs::read_to_string(format!("/proc/{}/status", controller.0.id())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or_default();
    assert_eq!(uid.split_whitespace().nth(1), Some("65532"), "{uid}");
    println!(
        "converged {:?} after the controller started from the image",
        started.elapsed()
    );
}
