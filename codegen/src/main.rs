//! `cargo run -p kinject-codegen -- [--config codegen.toml] [--verify]`, and
//! `new-kind`: the generator's command line ([`kinject_codegen::cli`]).

fn main() -> std::process::ExitCode {
    kinject_codegen::cli::main()
}
