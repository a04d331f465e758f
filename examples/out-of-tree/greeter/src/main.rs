//! Runs the Greeting controller:
//! `SYSTEM_NAMESPACE=greeter cargo run -p greeter -- --kubeconfig ~/.kube/config`.

fn main() -> std::process::ExitCode {
    kinject_sharedmain::main("greeter", greeter::controllers())
}
