//! `testenv serve --kubeconfig <path> [--port N]`: runs the in-memory API server on
//! 127.0.0.1 until SIGINT or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// An in-memory Kubernetes API server for tests and local runs.
#[derive(Debug, Parser)]
#[command(name = "testenv")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the API on 127.0.0.1 until SIGINT or SIGTERM, printing its URL.
    Serve {
        /// Where to write a kubeconfig that points at the server.
        #[arg(long, value_name = "PATH")]
        kubeconfig: PathBuf,
        /// The port to listen on; 0 picks a free one.
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let Command::Serve { kubeconfig, port } = Cli::parse().command;
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
