//! This project's generator: `hack/update-codegen.sh`, `hack/verify-codegen.sh`
//! and `hack/new-kind.sh` run it with `cargo run -p codegen`. It is a binary of
//! the project rather than an installed tool so that the generator is always
//! the version `Cargo.lock` pins for the runtime the generated code uses, and
//! works the same whether the framework comes by path, git or version.
//!
//! ```sh
//! cargo run -p codegen -- --config codegen.toml            # regenerate generated/
//! cargo run -p codegen -- --config codegen.toml --verify   # exit 1 if stale
//! cargo run -p codegen -- new-kind --group G --version V --kind K
//! ```

fn main() -> std::process::ExitCode {
    kinject_codegen::cli::main()
}
