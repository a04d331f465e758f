//! A registry on this machine, for tests and trying `kinject apply` without
//! a cloud account: Debian's `docker-registry` (the distribution project's
//! reference registry) on a free loopback port, its storage and log in a
//! directory of the caller's, stopped when dropped.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A running `docker-registry`; dropping it stops the process.
#[derive(Debug)]
pub struct LocalRegistry {
    child: Child,
    address: String,
    log: PathBuf,
}

/// Why the registry did not start: the program is missing, or it did not
/// listen within 20 s (its log says why).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LocalRegistryError(String);

impl LocalRegistry {
    /// Starts `docker-registry` on a free loopback port with its storage
    /// under `dir/registry` and its output in `dir/registry.log`, and waits
    /// until it listens.
    ///
    /// # Errors
    /// When the program cannot be started (install Debian's
    /// `docker-registry`), or does not listen within 20 s.
    pub fn start(dir: &Path) -> Result<LocalRegistry, LocalRegistryError> {
        Self::start_on(dir, 0)
    }

    /// [`start`](Self::start) on loopback port `port` (0: a free one), with
    /// no authentication: Debian's own configuration asks every client for
    /// a password, so `kinject apply` could not push to it.
    ///
    /// # Errors
    /// As [`start`](Self::start), and when `port` is taken.
    pub fn start_on(dir: &Path, port: u16) -> Result<LocalRegistry, LocalRegistryError> {
        let failed = LocalRegistryError;
        // A taken port is said at once: docker-registry would only say so in
        // its log, after the wait below has run out.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .and_then(|l| l.local_addr())
            .map_err(|e| match port {
                0 => failed(format!("no free loopback port: {e}")),
                port => failed(format!(
                    "port {port} on 127.0.0.1 is taken ({e}); pick another with --port"
                )),
            })?
            .port();
        let address = format!("127.0.0.1:{port}");
        let config = dir.join("registry.yml");
        let log = dir.join("registry.log");
        // Warnings only: it logs every HEAD of a blob it lacks, the first
        // step of each push, as an error otherwise.
        let text = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
            dir.join("registry").display()
        );
        let written = std::fs::write(&config, text).and_then(|()| std::fs::File::create(&log));
        let log_file = written.map_err(|e| failed(format!("cannot write in {}: {e}", dir.display())))?;
        let stderr = log_file
            .try_clone()
            .map_err(|e| failed(format!("cannot write {}: {e}", log.display())))?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(log_file)
            .stderr(stderr)
            .spawn()
            .map_err(|e| {
                failed(format!(
                    "cannot run docker-registry: {e}; install it (apt-get install docker-registry)"
                ))
            })?;
        let mut registry = LocalRegistry { child, address, log };
        let started = Instant::now();
        while TcpStream::connect(&registry.address).is_err() {
            if let Some(status) = registry.exited() {
                return Err(failed(format!(
                    "docker-registry exited ({status}) before it listened on {}; see {}",
                    registry.address,
                    registry.log.display()
                )));
            }
            if started.elapsed() > Duration::from_secs(20) {
                return Err(failed(format!(
                    "docker-registry did not listen on {} within 20 s; see {}",
                    registry.address,
                    registry.log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(registry)
    }

    /// `127.0.0.1:<port>`: a repository prefix for [`push`](crate::push).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Where the registry writes its log.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// How the registry ended, once it has ended on its own.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the sources of the checkout at `dir` can be fetched, for an
/// image's `org.opencontainers.image.source` label: the URL of its
/// `origin` remote (else its first remote) as a web address, so registries
/// such as GHCR link the image to its repository. An SSH remote
/// (`git@github.com:team/shop.git`) becomes `https://github.com/team/shop`;
/// user names and tokens in the URL are left out, so no credential reaches
/// an image. `None` outside a git checkout, without a remote, or for a
/// remote that is a local path.
pub fn source_url(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let remote = git(&["remote", "get-url", "origin"]).or_else(|| {
        let first = git(&["remote"])?.lines().next()?.to_owned();
        git(&["remote", "get-url", &first])
    })?;
    web_address(&remote)
}

/// A git remote's URL as the web address of its repository.
fn web_address(remote: &str) -> Option<String> {
    let remote = remote.trim();
    let (host, path) = if let Some((scheme, rest)) = remote.split_once("://") {
        if !["https", "http", "ssh", "git"].contains(&scheme) {
            return None;
        }
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        // An SSH port is no port of the web address.
        let host = if scheme == "ssh" {
            host.split_once(':').map_or(host, |(host, _)| host)
        } else {
            host
        };
        (host, path)
    } else {
        // scp-like: `[user@]host:path`; a path with no host is local.
        let (authority, path) = remote.split_once(':')?;
        if authority.contains('/') || path.starts_with('/') && authority.is_empty() {
            return None;
        }
        (
            authority.rsplit_once('@').map_or(authority, |(_, host)| host),
            path,
        )
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    (!host.is_empty() && !path.is_empty()).then(|| format!("https://{host}/{path}"))
}

/// The commit `dir` is checked out at (`git rev-parse HEAD`), the revision
/// an image's `org.opencontainers.image.revision` label names; `unknown`
/// outside a git checkout.
pub fn source_revision(dir: &Path) -> String {
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        )
}

#[cfg(test)]
mod tests {
    use super::web_address;

    #[test]
    fn remotes_become_web_addresses_without_credentials() {
        for (remote, want) in [
            (
                "git@github.com:team/shop.git",
                Some("https://github.com/team/shop"),
            ),
            (
                "https://github.com/team/shop.git",
                Some("https://github.com/team/shop"),
            ),
            (
                "https://x-token:ghp_secret@github.com/team/shop",
                Some("https://github.com/team/shop"),
            ),
            (
                "ssh://git@gitlab.example.com:2222/team/shop.git",
                Some("https://gitlab.example.com/team/shop"),
            ),
            ("git://example.com/shop/", Some("https://example.com/shop")),
            ("/srv/git/shop.git", None),
            ("../shop", None),
            ("file:///srv/git/shop.git", None),
        ] {
            assert_eq!(web_address(remote).as_deref(), want, "{remote}");
        }
    }
}
