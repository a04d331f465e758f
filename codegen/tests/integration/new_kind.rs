#![allow(
    clippy::too_many_lines,
    reason = "a scenario test reads best top to bottom, in one function"
)]

//! `hack/new-kind.sh` on a copy of the sample app, following
//! `docs/tutorial.md`'s tested commands: kinds in a new group, a cluster-scoped
//! one, one in the sample's group and a second version all build, test,
//! format and dump with no hand edit, and a refused scaffold changes nothing.
//! Then the tutorial's step 9: a new hub version with a field of another
//! shape, on the local cluster, and the old version dropped.
//!
//! **Why it is slow (about 16 s warm on two cores):** the copy's crates are
//! built once with the new kinds and their tests run; nothing else is
//! compiled (see `copies`).

use std::path::{Path, PathBuf};

use crate::copies::*;

/// The files of a tree with their contents, to show a refused scaffold
/// changed nothing (the framework's linked folders left out).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if entry.file_type().unwrap().is_symlink() {
            continue;
        }
        if path.is_dir() {
            out.extend(snapshot(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

/// Tutorial step 5, as written, in the copy with every kind scaffolded
/// above: the local job applies them all with their samples, the Widget
/// becomes Ready, a change of its spec is logged at info by its reconciler
/// and its status follows, and nothing is logged at WARN or ERROR.
fn step_4_runs_as_written(copy: &Path) {
    let job = tutorial_commands("<!-- tested: the local job -->");
    let beside = tutorial_commands("<!-- tested beside the local job -->");
    assert!(job.len() == 1 && beside.len() == 3, "{job:?} {beside:?}");
    if !installed("kubectl", "the tutorial's step 5") {
        return;
    }
    let (mut running, log) = start_local_job(copy, &job[0], "local.log");
    until_output(copy, &beside[0], &log, |out| {
        out.lines()
            .any(|l| l.contains("example-widget") && l.split_whitespace().nth(2) == Some("True"))
    });
    let run = shell(copy, &beside[1]);
    assert!(run.ok, "{}: {}", beside[1], run.stderr);
    until_output(copy, &beside[2], &log, |out| out.trim() == "2");
    // What the rules refuse, with the API server's words, as the tutorial shows them.
    let refused = tutorial_commands("<!-- tested beside the local job: refused -->");
    let said = [
        "The Widget \"example-widget\" is invalid: spec.zone: Forbidden: zone cannot change once set",
        "The Widget \"example-widget\" is invalid: spec.minReplicas: Invalid value: \"object\": minReplicas (5) \
         must not be above maxReplicas (3)",
    ];
    assert_eq!(refused.len(), said.len(), "{refused:?}");
    let tutorial = std::fs::read_to_string(repo_root().join("docs/tutorial.md")).unwrap();
    for (command, words) in refused.iter().zip(said) {
        assert!(tutorial.contains(words), "the tutorial no longer shows: {words}");
        let run = shell(copy, command);
        assert!(
            !run.ok && run.stderr.contains(words),
            "{command}: {}{}",
            run.stdout,
            run.stderr
        );
    }
    let changed = || {
        let text = std::fs::read_to_string(&log).unwrap();
        lines_at(&text, &["info"]).iter().any(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            line.contains("reconciling a changed spec")
                && line.contains("example-widget")
                && v["generation"] == 2
        })
    };
    // The status was written by the reconcile that logged the line.
    assert!(
        changed(),
        "no info line for the change; the log: {}",
        log.display()
    );
    stop_local_job(&mut running, &log);
}

/// The tutorial's local job (`command`), built first so that waits are for
/// the job, not the compiler; its log goes to `log_name` in the copy.
fn start_local_job(copy: &Path, command: &str, log_name: &str) -> (Running, PathBuf) {
    let run = cargo(copy, &["build", "-p", "controller", "--example", "local"]);
    assert!(run.ok, "{}", run.stderr);
    let log = copy.join(log_name);
    // The controller's default ports may be held by another test.
    let line = format!("PROBES_PORT=0 METRICS_PROMETHEUS_PORT=0 {command}");
    let running = background(copy, &line, &log);
    (running, log)
}

/// Stops the local job with Ctrl-C, which must end it cleanly, after a run
/// that logged nothing at WARN or ERROR.
fn stop_local_job(running: &mut Running, log: &Path) {
    assert!(interrupt(running), "Ctrl-C did not stop the local job cleanly");
    let text = std::fs::read_to_string(log).unwrap();
    let loud = loud_lines(&text);
    assert!(loud.is_empty(), "a healthy run logged:\n{loud:#?}");
}

#[test]
fn a_new_kind_builds_and_passes_its_tests_with_no_hand_edit() {
    let _one = ONE_COPY_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    build_the_generator_here();
    let built = artifacts();
    let copy = sample_copy("new-kind", 2);

    // Names that break a rule are refused, all at once, and nothing changes.
    let before = snapshot(&copy);
    let run = script_with(
        &copy,
        "new-kind.sh",
        &["--group", "batch", "--version", "V_1", "--kind", "widget"],
    );
    assert!(!run.ok);
    for rule in [
        "--kind \"widget\" must start with an upper-case letter",
        "--group \"batch\" must contain a dot",
        "--version \"V_1\" must match",
        "no file was changed",
    ] {
        assert!(run.stderr.contains(rule), "{rule}: {}", run.stderr);
    }
    assert!(snapshot(&copy) == before, "a refused scaffold changed files");

    // The tutorial, as written: a namespaced Widget in a new group. Its
    // first command (the scaffold) runs now; the rest (generate, test,
    // dump) after the other kinds below are scaffolded, so one generation
    // and one build serve both.
    let commands = tutorial_commands("<!-- tested -->");
    assert!(commands.len() >= 4, "{commands:?}");
    assert!(commands[0].starts_with("hack/new-kind.sh"), "{commands:?}");
    let run = shell(&copy, &commands[0]);
    assert!(run.ok, "{}:\n{}{}", commands[0], run.stdout, run.stderr);
    // Step 2, as written: the Widget's rules replace the scaffolded spec.
    for (path, block) in tutorial_rust_blocks("<!-- tested: replaces an item of ") {
        let file = copy.join(&path);
        let source = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, replace_item(&source, &block)).unwrap();
    }

    // The same kind again is refused, and changes nothing.
    let before = snapshot(&copy);
    let widget = [
        "--group",
        "tutorial.example.com",
        "--version",
        "v1alpha1",
        "--kind",
        "Widget",
    ];
    let run = script_with(&copy, "new-kind.sh", &widget);
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("kind Widget of group tutorial.example.com already exists"),
        "{}",
        run.stderr
    );
    assert!(snapshot(&copy) == before, "a refused scaffold changed files");

    // A cluster-scoped kind in a group named like Kubernetes' batch, and a
    // namespaced one in the sample's existing group and version.
    let run = script_with(
        &copy,
        "new-kind.sh",
        &[
            "--group",
            "batch.tutorial.example.io",
            "--version",
            "v1",
            "--kind",
            "Gizmo",
            "--scope",
            "cluster",
        ],
    );
    assert!(run.ok, "{}", run.stderr);
    assert!(
        run.stderr.contains("created reconcilers/src/gizmo.rs"),
        "{}",
        run.stderr
    );
    let run = script_with(
        &copy,
        "new-kind.sh",
        &[
            "--group",
            "samples.knative.dev",
            "--version",
            "v1alpha1",
            "--kind",
            "Gadget",
        ],
    );
    assert!(run.ok, "{}", run.stderr);
    // A second version of Gadget: a spoke of v1alpha1, which becomes the
    // hub, with its own copy of the fields, its conversion and the
    // project's round-trip test, with no second reconciler. (The tutorial's
    // Widget gets its second version as the new hub, in step 9 below.)
    let gadget_v1beta1 = [
        "--group",
        "samples.knative.dev",
        "--version",
        "v1beta1",
        "--kind",
        "Gadget",
    ];
    let run = script_with(&copy, "new-kind.sh", &gadget_v1beta1);
    assert!(run.ok, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "started version v1beta1 of Gadget (samples.knative.dev), with its own copy of the fields of \
             v1alpha1 and a conversion to and from it, the hub"
        ),
        "{}",
        run.stdout
    );
    for file in [
        "gadget_types.rs",
        "gadget_conversion.rs",
        "created reconcilers/tests/conversion.rs",
        "edited config/200-webhook-clusterrole.yaml",
    ] {
        assert!(run.stderr.contains(file), "{file}: {}", run.stderr);
    }
    assert!(!run.stderr.contains("reconcilers/src"), "{}", run.stderr);

    // A marker that shapes the schema, as a user adds one: the schema
    // command's tests below then check `dump` against the CRD it writes.
    let gizmo_types = copy.join("apis/src/batch_tutorial_example_io/v1/gizmo_types.rs");
    let types = std::fs::read_to_string(&gizmo_types).unwrap();
    let scaffolded = r#"#[kind(group = "batch.tutorial.example.io", version = "v1", cluster_scoped)]"#;
    let edited = "#[kind(\n    group = \"batch.tutorial.example.io\",\n    version = \"v1\",\n    \
                  cluster_scoped,\n    max_description_len = 20\n)]";
    assert!(types.contains(scaffolded), "{types}");
    std::fs::write(&gizmo_types, types.replacen(scaffolded, edited, 1)).unwrap();

    // The tutorial's other commands, as written, now over every kind.
    for command in &commands[1..] {
        let Run { ok, stdout, stderr } = shell(&copy, command);
        assert!(ok, "{command}:\n{stdout}{stderr}");
        if command.starts_with("hack/update-codegen.sh") {
            assert!(stderr.contains("wrote config/300-gizmo.yaml"), "{stderr}");
        }
        if command.starts_with("cargo test") {
            assert!(
                stdout.contains("widget::a_valid_object_becomes_ready ... ok"),
                "{stdout}"
            );
        }
        if command.contains("dump Widget") {
            assert!(
                stdout.contains("x-kubernetes-validations") && stdout.contains("zone cannot change once set"),
                "{stdout}"
            );
        }
    }
    let run = script(&copy, "verify-codegen.sh");
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    step_4_runs_as_written(&copy);

    // The app's own tests and those of its binaries that read the registry
    // (the schema command, the webhook's rules and admission), now with four
    // kinds more, a cluster-scoped one and one with a second version among them.
    let run = cargo(
        &copy,
        &[
            "test",
            "-p",
            "apis",
            "-p",
            "reconcilers",
            "-p",
            "schema",
            "-p",
            "webhook",
        ],
    );
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    for test in [
        "widget::a_valid_object_becomes_ready ... ok",
        "gizmo::an_invalid_spec_is_reported_not_retried ... ok",
        "gadget::a_valid_object_becomes_ready ... ok",
        "batch_tutorial_example_io::v1::gizmo_validation::tests::a_long_description_names_the_field ... ok",
        "dump_equals_the_schema_in_the_checked_in_crd ... ok",
        "every_sample_kind_is_defaulted_and_validated_from_the_registry ... ok",
        "every_version_round_trips_through_its_hub ... ok",
    ] {
        assert!(run.stdout.contains(test), "{test}:\n{}", run.stdout);
    }
    let run = cargo(&copy, &["fmt", "--all", "--check"]);
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    let crd = std::fs::read_to_string(copy.join("config/300-gizmo.yaml")).unwrap();
    assert!(crd.contains("scope: Cluster"), "{crd}");
    let crd = std::fs::read_to_string(copy.join("config/300-gadget.yaml")).unwrap();
    assert!(
        crd.contains("    - name: v1beta1\n      served: true\n      storage: false\n")
            && crd.contains("    - name: v1alpha1\n      served: true\n      storage: true\n")
            && crd.contains("    strategy: Webhook\n")
            && crd.contains("        path: /resource-conversion\n"),
        "one CRD serves both versions of Gadget, stores the hub and converts through the webhook:\n{crd}"
    );
    let run = cargo(
        &copy,
        &[
            "run",
            "-q",
            "-p",
            "schema",
            "--",
            "dump",
            "Widget",
            "--version",
            "v1alpha1",
        ],
    );
    assert!(
        run.ok && run.stdout.contains("self.minReplicas <= self.maxReplicas"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert!(
        std::fs::read_to_string(copy.join("generated/src/batch_tutorial_example_io/v1/gizmo.rs")).is_ok(),
        "a custom group named like batch gets a module of its own"
    );
    // update-codegen generated the RBAC of the new reconcilers.
    let role = std::fs::read_to_string(copy.join("config/200-clusterrole.yaml")).unwrap();
    for plural in ["widgets", "gizmos", "gadgets"] {
        assert!(role.contains(&format!("\"{plural}/status\"")), "{role}");
    }
    // Each scaffolded kind has defaults and validate hooks, so the admission
    // webhook defaults and validates it with no hand edit.
    let registry = std::fs::read_to_string(copy.join("generated/src/registry.rs")).unwrap();
    for kind in ["Gizmo", "Gadget", "Widget"] {
        let entry = registry
            .split("CustomKind::of::<")
            .find(|entry| {
                entry
                    .split(">()")
                    .next()
                    .is_some_and(|path| path.ends_with(&format!("::{kind}")))
            })
            .unwrap_or_else(|| panic!("{kind} is not registered:\n{registry}"));
        assert!(
            entry.contains(".defaulted::<") && entry.contains(".validated::<"),
            "{kind} is not registered for admission:\n{registry}"
        );
    }
    // Each new reconciler joins the sample's, in name order, whatever
    // reconcilers the sample has.
    let modules = |lib: &str| -> Vec<String> {
        lib.lines()
            .filter_map(|l| l.trim().strip_prefix("pub mod "))
            .map(|m| m.trim_end_matches(';').to_owned())
            .collect()
    };
    let before_lib = std::fs::read_to_string(repo_root().join("reconcilers/src/lib.rs")).unwrap();
    let lib = std::fs::read_to_string(copy.join("reconcilers/src/lib.rs")).unwrap();
    let mut want = modules(&before_lib);
    want.extend(["gadget", "gizmo", "widget"].map(str::to_owned));
    want.sort();
    assert_eq!(modules(&lib), want, "{lib}");

    step_9_runs_as_written(&copy);

    assert_only_own_crates_compiled(&copy, &built);
    std::fs::remove_dir_all(&copy).unwrap();
}

/// Tutorial step 9, as written, after steps 1 to 5: Widget v1beta1 becomes
/// the hub with `zones` for `zone`, the round trips hold, a v1alpha1 client
/// reads the sample written in v1beta1 on the local cluster, and v1alpha1
/// is dropped.
fn step_9_runs_as_written(copy: &Path) {
    let scaffold = tutorial_commands("<!-- tested: a second version -->");
    assert_eq!(scaffold.len(), 1, "{scaffold:?}");
    let run = shell(copy, &scaffold[0]);
    assert!(run.ok, "{}:\n{}{}", scaffold[0], run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("started version v1beta1 of Widget (tutorial.example.com) as its hub"),
        "{}",
        run.stdout
    );
    for file in [
        "created apis/src/tutorial/v1beta1/widget_types.rs",
        "created apis/src/tutorial/v1beta1/widget_lifecycle.rs",
        "created apis/src/tutorial/v1alpha1/widget_conversion.rs",
        "edited apis/src/tutorial/v1alpha1/widget_types.rs",
        "edited reconcilers/src/widget.rs",
        "edited reconcilers/tests/tables/widget.rs",
        "created config/samples/tutorial_v1beta1_widget.yaml",
        "removed config/samples/tutorial_v1alpha1_widget.yaml",
    ] {
        assert!(run.stderr.contains(file), "{file}: {}", run.stderr);
    }
    for (path, block) in tutorial_rust_blocks("<!-- tested in a second version: replaces an item of ") {
        let file = copy.join(&path);
        let source = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, replace_item(&source, &block)).unwrap();
    }
    for command in tutorial_commands("<!-- tested: a second version, after the edits -->") {
        let Run { ok, stdout, stderr } = shell(copy, &command);
        assert!(ok, "{command}:\n{stdout}{stderr}");
        if command.starts_with("cargo test") {
            for test in [
                "every_version_round_trips_through_its_hub ... ok",
                "widget::a_valid_object_becomes_ready ... ok",
            ] {
                assert!(stdout.contains(test), "{test}:\n{stdout}");
            }
        }
    }
    let crd = std::fs::read_to_string(copy.join("config/300-widget.yaml")).unwrap();
    assert!(
        crd.contains("    - name: v1beta1\n      served: true\n      storage: true\n")
            && crd.contains("    - name: v1alpha1\n      served: true\n      storage: false\n")
            && crd.contains("    strategy: Webhook\n"),
        "the Widget CRD serves both versions, stores v1beta1 and converts through the webhook:\n{crd}"
    );

    // On the local cluster, v1alpha1 reads what the sample wrote in v1beta1.
    let job = tutorial_commands("<!-- tested: the local job -->");
    let beside = tutorial_commands("<!-- tested beside the local job: a second version -->");
    assert_eq!(beside.len(), 2, "{beside:?}");
    let tutorial = std::fs::read_to_string(repo_root().join("docs/tutorial.md")).unwrap();
    assert!(
        tutorial.contains("```text\nexample\n[\"example\"]\n```"),
        "the tutorial no longer shows what the two commands print"
    );
    if installed("kubectl", "the tutorial's step 9") {
        let (mut running, log) = start_local_job(copy, &job[0], "local-v1beta1.log");
        until_output(copy, &beside[0], &log, |out| out.trim() == "example");
        let run = shell(copy, &beside[1]);
        assert!(
            run.ok && run.stdout.trim() == r#"["example"]"#,
            "{}: {}{}",
            beside[1],
            run.stdout,
            run.stderr
        );
        stop_local_job(&mut running, &log);
    }

    for command in tutorial_commands("<!-- tested: dropping the old version -->") {
        let Run { ok, stdout, stderr } = shell(copy, &command);
        assert!(ok, "{command}:\n{stdout}{stderr}");
        if command.starts_with("cargo test") {
            assert!(
                stdout.contains("widget::a_valid_object_becomes_ready ... ok"),
                "{stdout}"
            );
        }
    }
    assert!(!copy.join("apis/src/tutorial/v1alpha1").exists());
    let crd = std::fs::read_to_string(copy.join("config/300-widget.yaml")).unwrap();
    assert!(
        !crd.contains("name: v1alpha1") && !crd.contains("conversion:"),
        "the Widget CRD serves v1beta1 alone, with no conversion:\n{crd}"
    );
    let run = script(copy, "verify-codegen.sh");
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    let run = cargo(copy, &["fmt", "--all", "--check"]);
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
}

/// `drop-version` and `new-kind --hub` refuse, naming the fix, what would
/// break the project, and change nothing then; a version nothing needs goes
/// with its samples and the hub marker of the version left. No build: the
/// scaffold reads the sources.
#[test]
fn retiring_a_version_refuses_what_still_needs_it() {
    let _one = ONE_COPY_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    build_the_generator_here();
    let copy = sample_copy("drop-version", 3);
    let gadget = |version: &str, extra: &[&'static str]| -> Run {
        let mut args = vec![
            "--group",
            "samples.knative.dev",
            "--version",
            version,
            "--kind",
            "Gadget",
        ];
        args.extend(extra);
        script_with(&copy, "new-kind.sh", &args)
    };
    let drop = |version: &str, kind: &str| -> Run {
        script_with(
            &copy,
            "drop-version.sh",
            &[
                "--group",
                "samples.knative.dev",
                "--version",
                version,
                "--kind",
                kind,
            ],
        )
    };
    let refused = |run: &Run, words: &str| {
        assert!(!run.ok, "not refused: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(words) && run.stderr.contains("no file was changed"),
            "{words}: {}",
            run.stderr
        );
    };
    assert!(gadget("v1alpha1", &[]).ok);

    let before = snapshot(&copy);
    // A kind's only version, and a version it does not have.
    refused(
        &drop("v1alpha1", "Gadget"),
        "v1alpha1 is the only version of Gadget",
    );
    refused(
        &drop("v2", "Gadget"),
        "Gadget (samples.knative.dev) has no version v2; its versions are v1alpha1",
    );
    assert!(snapshot(&copy) == before, "a refused drop changed files");

    let run = gadget("v1beta1", &[]);
    assert!(run.ok, "{}", run.stderr);
    // --hub takes over a kind with one version only.
    refused(
        &gadget("v1", &["--hub"]),
        "Gadget has 2 versions; --hub makes a new version the hub of a kind with one",
    );
    let before = snapshot(&copy);
    // The hub, which is also the version stored.
    refused(
        &drop("v1alpha1", "Gadget"),
        "Gadget v1alpha1 is the hub every other version converts through, and the version stored",
    );
    // A version a reconciler still names.
    let reader = copy.join("reconcilers/src/gadget_reader.rs");
    std::fs::write(&reader, "use apis::v1beta1::Gadget;\n").unwrap();
    refused(
        &drop("v1beta1", "Gadget"),
        "reconcilers/src/gadget_reader.rs still names the types of Gadget v1beta1",
    );
    std::fs::remove_file(&reader).unwrap();
    assert!(snapshot(&copy) == before, "a refused drop changed files");

    let run = drop("v1beta1", "Gadget");
    assert!(run.ok, "{}", run.stderr);
    // Gadget was all v1beta1 held: the module goes, with its entry.
    for change in [
        "removed apis/src/v1beta1\n",
        "edited codegen.toml",
        "edited apis/src/lib.rs",
    ] {
        assert!(run.stderr.contains(change), "{change}: {}", run.stderr);
    }
    let hub = std::fs::read_to_string(copy.join("apis/src/v1alpha1/gadget_types.rs")).unwrap();
    assert!(!hub.contains("hub"), "the version left alone is no hub:\n{hub}");
    std::fs::remove_dir_all(&copy).unwrap();
}
