//! `testenv serve --kubeconfig <path> [--port N]`: runs the in-memory API server on
//! 127.0.0.1 until SIGINT or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: testenv serve --kubeconfig <path> [--port N]";

fn parse(args: &[String]) -> Result<(PathBuf, u16), String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("serve") => {}
        Some(other) => return Err(format!("unknown command {other:?}\n{USAGE}")),
        None => return Err(USAGE.to_owned()),
    }
    let mut kubeconfig = None;
    let mut port = 0u16;
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kubeconfig" => kubeconfig = it.next().map(PathBuf::from),
            "--port" => {
                let p = it.next().ok_or(format!("--port needs a value\n{USAGE}"))?;
                port = p
                    .parse()
                    .map_err(|_| format!("--port {p:?} is not a port number (0-65535)"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let kubeconfig = kubeconfig.ok_or(format!("--kubeconfig <path> is required\n{USAGE}"))?;
    Ok((kubeconfig, port))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (kubeconfig, port) = match parse(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let env = kinject_testenv::TestEnv::builder().port(port).build();
    let server = match env.serve().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("testenv: {e}; pick another --port or free this one");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = server.write_kubeconfig(&kubeconfig) {
        eprintln!("testenv: {e}; check that the directory exists and is writable");
        return ExitCode::FAILURE;
    }
    println!("{}", server.url());
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("testenv: cannot listen for SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}
