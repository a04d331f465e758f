//! `testenv serve --kubeconfig <path> [--port N] [--route-service NS/NAME[:PORT]=ADDR]...`:
//! runs the in-memory API server on 127.0.0.1 until SIGINT or SIGTERM. A route
//! sends the API server's calls to a Service (an admission webhook's, a
//! conversion webhook's) to a local address, as a cluster's network would.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kinject_testenv::serve::{ServeArgs, serve};

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
    Serve(ServeArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let Command::Serve(args) = Cli::parse().command;
    serve(args).await
}
