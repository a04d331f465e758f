//! What every reconciler of the webhook takes from the process's context.

use kinject_runtime::controller::{ControllerOptions, WorkqueueMetrics};
use kinject_runtime::injection::Context;
use kinject_runtime::reconciler::ThreadsPerController;

/// Workers and metrics for a webhook reconciler, from the context.
pub(crate) fn controller_options(ctx: &Context) -> ControllerOptions {
    let mut options =
        ControllerOptions::default().concurrency(ctx.get::<ThreadsPerController>().map_or(0, |t| t.0));
    if let Some(metrics) = ctx.get::<WorkqueueMetrics>() {
        options = options.metrics((*metrics).clone());
    }
    options
}
