//! The process around a component: the async runtime, the environment, the
//! phases in order, and an exit code.

use std::process::ExitCode;

use clap::Parser;
use kinject_runtime::injection::Constructor;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::env::Env;
use crate::error::MainError;
use crate::flags::Flags;
use crate::setup::Setup;
use crate::signals::handle_signals;

/// Runs `constructors` as the controllers of `component` until a signal; the
/// exit code to return from `main`. See the module docs.
pub fn main(component: &str, constructors: impl IntoIterator<Item = Constructor>) -> ExitCode {
    let constructors: Vec<Constructor> = constructors.into_iter().collect();
    let flags = Flags::parse();
    process(component, |env, shutdown| async move {
        run(component, &constructors, flags, env, shutdown).await
    })
}

/// The process around a component's `run`: a multi-threaded runtime, the
/// environment, a shutdown token that signals cancel ([`handle_signals`]),
/// and exit 1 with `<component>: <what failed and how to fix it>` on any
/// error. Every binary's `main` (the controller's, the webhook's) is this.
pub fn process<F, Fut>(component: &str, run: F) -> ExitCode
where
    F: FnOnce(Env, CancellationToken) -> Fut,
    Fut: std::future::Future<Output = Result<(), MainError>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(component, &MainError::Runtime(e.to_string())),
    };
    let env = match Env::from_process() {
        Ok(env) => env,
        Err(e) => return fail(component, &e),
    };
    let shutdown = CancellationToken::new();
    runtime.spawn(handle_signals(shutdown.clone()));
    match runtime.block_on(run(env, shutdown)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(component, &e),
    }
}

fn fail(component: &str, err: &MainError) -> ExitCode {
    eprintln!("{component}: {err}");
    ExitCode::FAILURE
}

/// Everything `main` does once the runtime is up; returns when the controllers
/// have stopped after `shutdown`. The phases, each callable on its own:
/// [`Setup::read`], [`Setup::context`], [`Setup::construct`], [`Setup::run`].
pub async fn run(
    component: &str,
    constructors: &[Constructor],
    flags: Flags,
    env: Env,
    shutdown: CancellationToken,
) -> Result<(), MainError> {
    let setup = Setup::read(component, constructors, flags, env).await?;
    let span = setup.component_span();
    async {
        let ctx = setup.context();
        let controllers = setup.construct(&ctx, constructors)?;
        setup.run(&ctx, controllers, shutdown).await
    }
    .instrument(span)
    .await
}
