//! The `testenv serve` binary: writes a kubeconfig, prints the URL, serves until SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[tokio::test]
async fn serve_writes_kubeconfig_prints_url_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("testenv-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kinject-testenv"))
        .args([
            "serve",
            "--route-service",
            "knative-samples/webhook=127.0.0.1:8443",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(config.cluster_url.to_string().trim_end_matches('/'), url);
    let client = kube::Client::try_from(config).unwrap();
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.minor, "33");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");

    let bad = Command::new(env!("CARGO_BIN_EXE_kinject-testenv"))
        .args(["serve"])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("the following required arguments were not provided")
            && stderr.contains("--kubeconfig"),
        "{stderr}"
    );

    for (route, says) in [
        ("knative-samples/webhook", "has no '='"),
        ("webhook=127.0.0.1:8443", "is not NS/NAME"),
        ("ns/webhook=nowhere", "is not an address"),
        ("ns/webhook:x=127.0.0.1:1", "is not a port"),
    ] {
        let bad = Command::new(env!("CARGO_BIN_EXE_kinject-testenv"))
            .args(["serve", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--route-service", route])
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(bad.status.code(), Some(2), "{route}");
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(
            stderr.contains(says) && stderr.contains("NS/NAME[:PORT]=ADDR"),
            "{route}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}
