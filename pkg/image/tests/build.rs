//! Building images without a registry: what goes in, and that the same
//! inputs give the same bytes; and pushing them to a registry that asks for
//! a token, or cannot be reached.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::path::{Path, PathBuf};

use kinject_image::{Build, Error, elf};
use serde_json::Value;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kinject-image-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The smallest static x86-64 executable: one loadable segment that calls
/// `exit(0)`. No interpreter, no dynamic section.
fn static_executable(dir: &Path) -> PathBuf {
    let code = [0xb8, 0x3c, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05]; // mov eax,60; xor edi,edi; syscall
    let size = (64 + 56 + code.len()) as u64;
    let mut elf = Vec::new();
    elf.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    elf.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    elf.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    elf.extend_from_slice(&1u32.to_le_bytes());
    elf.extend_from_slice(&(0x40_0000u64 + 120).to_le_bytes()); // entry
    elf.extend_from_slice(&64u64.to_le_bytes()); // program headers
    elf.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    elf.extend_from_slice(&0u32.to_le_bytes());
    for half in [64u16, 56, 1, 64, 0, 0] {
        elf.extend_from_slice(&half.to_le_bytes());
    }
    elf.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    elf.extend_from_slice(&5u32.to_le_bytes()); // R+X
    for word in [0u64, 0x40_0000, 0x40_0000, size, size, 0x1000] {
        elf.extend_from_slice(&word.to_le_bytes());
    }
    elf.extend_from_slice(&code);
    let path = dir.join("hello");
    std::fs::write(&path, elf).unwrap();
    path
}

/// One entry of the layer: path, uid, gid, mode, mtime, user name, data.
type Entry = (String, u64, u64, u32, u64, String, Vec<u8>);

/// Every entry of the layer, in order.
fn entries(layer: &[u8]) -> Vec<Entry> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(layer));
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let header = entry.header().clone();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            (
                entry.path().unwrap().to_string_lossy().into_owned(),
                header.uid().unwrap(),
                header.gid().unwrap(),
                header.mode().unwrap(),
                header.mtime().unwrap(),
                header.username().unwrap().unwrap_or_default().to_owned(),
                data,
            )
        })
        .collect()
}

fn config_json(image: &kinject_image::Image) -> Value {
    serde_json::from_slice(image.config()).unwrap()
}

#[test]
fn a_static_executable_gets_no_libraries() {
    let dir = temp_dir("static");
    let linked = elf::linked(&static_executable(&dir)).unwrap();
    assert_eq!(linked.interpreter, None);
    assert!(linked.libraries.is_empty(), "{linked:?}");
    assert_eq!(linked.architecture, "amd64");

    let image = Build::new(static_executable(&dir), "0123abc").build().unwrap();
    assert_eq!(
        image.files(),
        [
            "etc",
            "etc/group",
            "etc/passwd",
            "etc/ssl",
            "etc/ssl/certs",
            "etc/ssl/certs/ca-certificates.crt",
            "home",
            "home/nonroot",
            "ko-app",
            "ko-app/hello",
            "tmp",
        ]
    );
    println!("static image: {} bytes compressed", image.compressed_size());
}

#[test]
fn a_dynamic_executable_gets_exactly_what_the_loader_loads() {
    // This test's own executable links glibc dynamically.
    let exe = std::env::current_exe().unwrap();
    let linked = elf::linked(&exe).unwrap();
    let interpreter = linked
        .interpreter
        .clone()
        .expect("a dynamic executable names its loader");
    assert!(interpreter.is_absolute(), "{interpreter:?}");
    let names: Vec<String> = linked
        .libraries
        .iter()
        .map(|l| l.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"libc.so.6".to_owned()), "{names:?}");
    // The loader is loaded once, under its own path, not again by soname.
    assert!(
        !names.contains(&interpreter.file_name().unwrap().to_string_lossy().into_owned()),
        "{names:?}"
    );

    let image = Build::new(&exe, "0123abc").name("app").build().unwrap();
    for path in linked.interpreter.iter().chain(&linked.libraries) {
        let relative = path.to_string_lossy().trim_start_matches('/').to_owned();
        assert!(
            image.files().contains(&relative),
            "{relative} missing from {:?}",
            image.files()
        );
    }
    assert!(image.files().contains(&"ko-app/app".to_owned()));
    let libraries = image.files().iter().filter(|f| f.contains(".so")).count();
    assert_eq!(libraries, 1 + linked.libraries.len(), "{:?}", image.files());
}

#[test]
fn the_same_inputs_give_the_same_digest() {
    let one = temp_dir("same-one");
    let two = temp_dir("same-two");
    let first = Build::new(static_executable(&one), "0123abc")
        .epoch(0)
        .build()
        .unwrap();
    // Another path, another file time: the same image.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = Build::new(static_executable(&two), "0123abc")
        .epoch(0)
        .build()
        .unwrap();
    assert_eq!(first.digest(), second.digest());
    assert_eq!(first.layer(), second.layer());
    assert!(first.digest().starts_with("sha256:") && first.digest().len() == 71);

    let later = Build::new(static_executable(&one), "0123abc")
        .epoch(1_700_000_000)
        .build()
        .unwrap();
    assert_ne!(first.digest(), later.digest());
    let other_commit = Build::new(static_executable(&one), "4567def")
        .epoch(0)
        .build()
        .unwrap();
    assert_ne!(first.digest(), other_commit.digest());
    assert_eq!(
        first.layer_digest(),
        other_commit.layer_digest(),
        "the revision is in the config only"
    );
}

#[test]
fn the_layer_is_owned_by_root_at_one_time_with_no_names() {
    let dir = temp_dir("layer");
    let image = Build::new(static_executable(&dir), "0123abc")
        .epoch(1_700_000_000)
        .build()
        .unwrap();
    // gzip: no modification time (bytes 4..8), no file name (flag 0x08).
    assert_eq!(&image.layer()[4..8], &[0, 0, 0, 0]);
    assert_eq!(image.layer()[3] & 0x08, 0);
    let entries = entries(image.layer());
    let paths: Vec<&str> = entries.iter().map(|e| e.0.trim_end_matches('/')).collect();
    assert_eq!(paths, image.files());
    for (path, uid, gid, mode, mtime, user, _) in &entries {
        assert_eq!(*mtime, 1_700_000_000, "{path}");
        assert_eq!(user, "", "{path}");
        let owner = if path.starts_with("home/nonroot") {
            65532
        } else {
            0
        };
        assert_eq!((*uid, *gid), (owner, owner), "{path}");
        if path == "ko-app/hello" {
            assert_eq!(*mode, 0o755);
        }
    }
}

#[test]
fn passwd_and_group_have_the_nonroot_user() {
    let dir = temp_dir("passwd");
    let image = Build::new(static_executable(&dir), "0123abc").build().unwrap();
    let file = |name: &str| {
        let entries = entries(image.layer());
        let entry = entries.into_iter().find(|e| e.0 == name).unwrap();
        String::from_utf8(entry.6).unwrap()
    };
    let passwd = file("etc/passwd");
    assert!(
        passwd.lines().any(|l| l.starts_with("nonroot:x:65532:65532:")),
        "{passwd}"
    );
    assert!(file("etc/group").lines().any(|l| l == "nonroot:x:65532:"));
    let certificates = file("etc/ssl/certs/ca-certificates.crt");
    assert!(certificates.contains("BEGIN CERTIFICATE"));
}

#[test]
fn the_config_runs_as_nonroot_with_labels() {
    let dir = temp_dir("config");
    let image = Build::new(static_executable(&dir), "0123abc")
        .source("https://example.com/repo")
        .epoch(0)
        .build()
        .unwrap();
    let config = config_json(&image);
    assert_eq!(config["config"]["User"], "65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/ko-app/hello"])
    );
    let env = config["config"]["Env"].as_array().unwrap();
    assert!(
        env.contains(&"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt".into()),
        "{env:?}"
    );
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.revision"], "0123abc");
    assert_eq!(
        labels["org.opencontainers.image.source"],
        "https://example.com/repo"
    );
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    assert_eq!(config["created"], "1970-01-01T00:00:00Z");
    assert_eq!(config["rootfs"]["diff_ids"].as_array().unwrap().len(), 1);

    let without = Build::new(static_executable(&dir), "0123abc").build().unwrap();
    assert_eq!(
        config_json(&without)["config"]["Labels"]
            .as_object()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn the_layout_names_the_image_by_tag() {
    let dir = temp_dir("layout");
    let image = Build::new(static_executable(&dir), "0123abc").build().unwrap();
    let layout = dir.join("oci");
    image.write_layout(&layout, "v1").unwrap();
    let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifest = &index["manifests"][0];
    assert_eq!(manifest["digest"], image.digest());
    assert_eq!(manifest["annotations"]["org.opencontainers.image.ref.name"], "v1");
    for digest in [image.digest(), image.config_digest(), image.layer_digest()] {
        let blob = layout
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:"));
        assert!(blob.is_file(), "{blob:?}");
    }
    let manifest: Value = serde_json::from_slice(image.manifest()).unwrap();
    assert_eq!(manifest["layers"][0]["size"], image.compressed_size());
    assert!(matches!(
        image.write_layout(&layout, "-bad"),
        Err(Error::InvalidName { what: "the tag", .. })
    ));
}

#[test]
fn errors_say_what_where_and_how_to_fix() {
    let dir = temp_dir("errors");
    let missing = Build::new(dir.join("nothing"), "0123abc").build().unwrap_err();
    assert!(matches!(missing, Error::Read { .. }), "{missing}");
    assert!(missing.to_string().contains("nothing"), "{missing}");

    let text = dir.join("script");
    std::fs::write(&text, "#!/bin/sh\n").unwrap();
    let not_elf = Build::new(&text, "0123abc").build().unwrap_err();
    assert!(matches!(not_elf, Error::NotElf { .. }), "{not_elf}");

    let no_bundle = Build::new(static_executable(&dir), "0123abc")
        .ca_certificates(dir.join("none.crt"))
        .build()
        .unwrap_err();
    assert!(
        no_bundle.to_string().contains("apt-get install ca-certificates"),
        "{no_bundle}"
    );
}

/// A registry as the hosted ones behave: every `/v2/` request without the
/// token gets `401` and a `Bearer` challenge, the token comes from the realm
/// for the right basic credentials only, uploads start at a relative
/// Location that carries a query, and the manifest's digest comes back in
/// `Docker-Content-Digest`. Answers what it stored: path → body.
mod token_registry {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use axum::body::{Body, Bytes};
    use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
    use axum::response::Response;
    use sha2::Digest as _;

    fn sha256(data: &[u8]) -> String {
        let hex: String = sha2::Sha256::digest(data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("sha256:{hex}")
    }

    pub(super) type Stored = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

    pub(super) async fn serve() -> (String, Stored) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let stored = Stored::default();
        let state = (address.clone(), stored.clone());
        let app =
            axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (address, stored) = state.clone();
                async move { answer(&address, &stored, &method, &uri, &headers, body) }
            });
        tokio::spawn(async move { axum::serve(listener, app).await });
        (address, stored)
    }

    fn reply(status: StatusCode, headers: &[(header::HeaderName, String)], body: &str) -> Response {
        let mut response = Response::builder().status(status);
        for (name, value) in headers {
            response = response.header(name, value);
        }
        response.body(Body::from(body.to_owned())).unwrap()
    }

    fn answer(
        address: &str,
        stored: &Stored,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Response {
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|a| a.to_str().ok())
            .unwrap_or_default();
        let path = uri.path();
        if path == "/token" {
            // base64("robot:s3cret")
            return if authorization == "Basic cm9ib3Q6czNjcmV0"
                && uri
                    .query()
                    .unwrap_or_default()
                    .contains("scope=repository%3Ateam%2Fhello%3Apull%2Cpush")
            {
                reply(StatusCode::OK, &[], r#"{"token":"t0k","expires_in":300}"#)
            } else {
                reply(
                    StatusCode::UNAUTHORIZED,
                    &[],
                    r#"{"details":"incorrect username or password"}"#,
                )
            };
        }
        if authorization != "Bearer t0k" {
            let challenge = format!(
                r#"Bearer realm="http://{address}/token",service="fake",scope="repository:team/hello:pull,push""#
            );
            return reply(
                StatusCode::UNAUTHORIZED,
                &[(header::WWW_AUTHENTICATE, challenge)],
                r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
            );
        }
        match (method.as_str(), path) {
            ("HEAD", _) => reply(StatusCode::NOT_FOUND, &[], ""),
            ("POST", "/v2/team/hello/blobs/uploads/") => reply(
                StatusCode::ACCEPTED,
                &[(header::LOCATION, "/upload/7?_state=abc".to_owned())],
                "",
            ),
            ("PUT", "/upload/7") => {
                let query = uri.query().unwrap_or_default();
                let Some(digest) = query.split('&').find_map(|p| p.strip_prefix("digest=")) else {
                    return reply(StatusCode::BAD_REQUEST, &[], "no digest");
                };
                let digest = digest.replace("%3A", ":");
                let actual = sha256(&body);
                if !query.contains("_state=abc") || digest != actual {
                    return reply(
                        StatusCode::BAD_REQUEST,
                        &[],
                        r#"{"errors":[{"code":"DIGEST_INVALID","message":"provided digest did not match uploaded content"}]}"#,
                    );
                }
                stored.lock().unwrap().insert(digest, body.to_vec());
                reply(StatusCode::CREATED, &[], "")
            }
            ("PUT", "/v2/team/hello/manifests/v1") => {
                let digest = sha256(&body);
                stored
                    .lock()
                    .unwrap()
                    .insert("manifest".to_owned(), body.to_vec());
                reply(
                    StatusCode::CREATED,
                    &[("docker-content-digest".parse().unwrap(), digest)],
                    "",
                )
            }
            _ => reply(StatusCode::NOT_FOUND, &[], "{}"),
        }
    }
}

#[tokio::test]
async fn a_push_answers_the_registrys_token_challenge() {
    let dir = temp_dir("token-push");
    let image = Build::new(static_executable(&dir), "0123abc").build().unwrap();
    let (address, stored) = token_registry::serve().await;
    let repository = format!("localhost:{}/team/hello:v1", address.rsplit(':').next().unwrap());
    let credentials = kinject_image::Credentials::Basic {
        username: "robot".into(),
        password: "s3cret".into(),
    };

    let pushed = kinject_image::push(&image, &repository, &credentials)
        .await
        .unwrap();

    assert_eq!(
        pushed,
        format!("{}@{}", repository.trim_end_matches(":v1"), image.digest())
    );
    let stored = stored.lock().unwrap().clone();
    assert_eq!(stored[image.layer_digest()], image.layer());
    assert_eq!(stored[image.config_digest()], image.config());
    assert_eq!(stored["manifest"], image.manifest());

    let wrong = kinject_image::Credentials::Basic {
        username: "robot".into(),
        password: "wrong".into(),
    };
    let refused = kinject_image::push(&image, &repository, &wrong)
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(matches!(refused, Error::Push { .. }), "{message}");
    assert!(message.contains("incorrect username or password"), "{message}");
    assert!(message.contains("KINJECT_REGISTRY_PASSWORD"), "{message}");

    let anonymous = kinject_image::push(&image, &repository, &Default::default())
        .await
        .unwrap_err();
    assert!(
        anonymous.to_string().contains("/token answered 401"),
        "{anonymous}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_registry_that_cannot_be_reached_is_named_with_the_cause() {
    let dir = temp_dir("unreachable");
    let image = Build::new(static_executable(&dir), "0123abc").build().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let error = kinject_image::push(&image, &format!("127.0.0.1:{port}/hello"), &Default::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!("cannot reach http://127.0.0.1:{port}/v2/hello/blobs/")),
        "{error}"
    );
    assert!(error.to_lowercase().contains("refused"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}
