//! `rbac`: writes the rules of `config/200-clusterrole.yaml` and
//! `config/200-role.yaml` from what the controllers of `main` ask for;
//! `hack/update-codegen.sh` runs it, `hack/verify-codegen.sh` runs it with
//! `--verify`.
//!
//! ```sh
//! cargo run -p controller --bin rbac -- config
//! ```

fn main() -> std::process::ExitCode {
    kinject_sharedmain::rbac::main(reconcilers::controllers())
}
