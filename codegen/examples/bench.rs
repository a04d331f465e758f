//! Full regeneration time: parse, emit, format and write.
//!
//! ```sh
//! cargo run --release -p kinject-codegen --example bench
//! ```
//!
//! Measures the sample (the repository's `codegen.toml`, with reconcilers on)
//! and 200 synthetic kinds, each warm (after one untimed run) in two cases:
//! the output is already up to date (what `hack/update-codegen.sh` usually
//! finds: everything is rendered and compared, nothing written) and the
//! output directory is empty (every file written). Prints the median and
//! the slowest of the timed runs.

use std::path::Path;
use std::time::{Duration, Instant};

use kinject_codegen::{ApiModule, Config, Layout};

const RUNS: usize = 15;
const SYNTHETIC_KINDS: usize = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let scratch = std::env::temp_dir().join(format!("codegen-bench-{}", std::process::id()));

    let mut sample = Config::load(&root.join("codegen.toml"))?;
    sample.reconcilers = true;
    sample.output = scratch.join("sample-out");
    report("sample", &sample)?;

    let synthetic = synthetic_config(&scratch.join("synthetic-src"), &scratch.join("synthetic-out"))?;
    report(&format!("{SYNTHETIC_KINDS} synthetic kinds"), &synthetic)?;

    std::fs::remove_dir_all(&scratch)?;
    Ok(())
}

fn report(name: &str, config: &Config) -> Result<(), Box<dyn std::error::Error>> {
    // One untimed run warms the file system cache and the allocator.
    kinject_codegen::generate(config, &Layout::Crate)?.write(&config.output)?;
    let up_to_date = time(|| {
        let generated = kinject_codegen::generate(config, &Layout::Crate)?;
        let report = generated.write(&config.output)?;
        assert!(report.written.is_empty(), "the output was already up to date");
        Ok(generated.files.len())
    })?;
    let from_scratch = time(|| {
        std::fs::remove_dir_all(&config.output).map_err(|e| {
            kinject_codegen::Error::from(vec![kinject_codegen::Diagnostic::file(
                &config.output,
                e.to_string(),
            )])
        })?;
        let generated = kinject_codegen::generate(config, &Layout::Crate)?;
        generated.write(&config.output)?;
        Ok(generated.files.len())
    })?;
    let kinds = kinject_codegen::generate(config, &Layout::Crate)?.kinds;
    println!(
        "{name}: {} files for {kinds} kinds; up to date: median {} (max {}); empty output: median {} (max {})",
        up_to_date.0,
        ms(up_to_date.1),
        ms(up_to_date.2),
        ms(from_scratch.1),
        ms(from_scratch.2)
    );
    Ok(())
}

/// (files, median, max) over `RUNS` runs of `run`.
fn time(
    mut run: impl FnMut() -> Result<usize, kinject_codegen::Error>,
) -> Result<(usize, Duration, Duration), kinject_codegen::Error> {
    let mut times = Vec::with_capacity(RUNS);
    let mut files = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        files = run()?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok((files, times[RUNS / 2], times[RUNS - 1]))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// An API module of synthetic kinds spread over groups and versions, mixing
/// the shapes the generator distinguishes: namespaced with status and a
/// reconciler, class-filtered, cluster-scoped without status, and read-only.
fn synthetic_config(src: &Path, out: &Path) -> Result<Config, std::io::Error> {
    std::fs::create_dir_all(src)?;
    for i in 0..SYNTHETIC_KINDS {
        let group = format!("group{}.bench.dev", i % 10);
        let version = ["v1", "v1beta1"][i % 2];
        let (scope, markers, fields) = match i % 4 {
            0 => (
                "namespaced",
                "#[genclient]\n#[genreconciler]",
                "pub status: Option<S>,",
            ),
            1 => (
                "namespaced",
                "#[genclient]\n#[genreconciler(class = \"bench.dev/class\", finalizer = \"bench.dev/cleanup\")]",
                "pub status: Option<S>,",
            ),
            2 => (
                "cluster_scoped",
                "#[genclient(non_namespaced)]\n#[genreconciler(krshapedlogic = false)]",
                "",
            ),
            _ => (
                "namespaced",
                "#[genclient(only_verbs = [get, list, watch])]",
                "pub status: Option<S>,",
            ),
        };
        let text = format!(
            "use kinject_macros::Kind;\n\n/// Synthetic kind number {i}.\n#[derive(Kind, Clone, Debug, Default, PartialEq)]\n\
             #[kind(group = \"{group}\", version = \"{version}\", {scope})]\n{markers}\n\
             pub struct Kind{i} {{\n    pub metadata: ObjectMeta,\n    pub spec: Spec,\n    {fields}\n}}\n"
        );
        std::fs::write(src.join(format!("kind{i}.rs")), text)?;
    }
    let mut config = Config::new(out);
    config.apis.push(ApiModule::new("bench", "bench::api", src));
    Ok(config)
}
