//! The crate layering the README promises: API types and the derive stay free of
//! I/O and code-formatting crates, so depending on them is cheap.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Package names in `package`'s normal dependency tree (build scripts and
/// proc-macros included, dev-dependencies not).
fn normal_dependencies(package: &str) -> BTreeSet<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = match Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            package,
        ])
        .current_dir(&workspace)
        .output()
    {
        Ok(output) => output,
        Err(e) => unreachable!("cargo, which runs this test, could not be run again: {e}"),
    };
    assert!(
        output.status.success(),
        "`cargo tree -p {package}` failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn assert_free_of(package: &str, forbidden: &[&str]) {
    let deps = normal_dependencies(package);
    assert!(
        deps.contains(package),
        "cargo tree did not list {package} itself: {deps:?}"
    );
    let found: Vec<&&str> = forbidden.iter().filter(|f| deps.contains(**f)).collect();
    assert!(
        found.is_empty(),
        "{package} depends on {found:?}; its dependencies: {deps:?}"
    );
}

#[test]
fn api_types_need_no_io_crates() {
    let io = [
        "tokio",
        "hyper",
        "axum",
        "tower",
        "clap",
        "prometheus-client",
        "kube",
        "kube-client",
        "kinject-runtime",
    ];
    assert_free_of("kinject-types", &io);
    assert_free_of("apis", &io);
}

#[test]
fn the_derive_needs_no_generator_or_kubernetes_crates() {
    assert_free_of(
        "kinject-macros",
        &[
            "prettyplease",
            "toml",
            "kube",
            "kube-core",
            "k8s-openapi",
            "tokio",
            "kinject-codegen",
        ],
    );
}
