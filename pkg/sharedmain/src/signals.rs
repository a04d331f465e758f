//! Termination signals: the first stops the process gracefully, a second at once.

use tokio_util::sync::CancellationToken;

/// First SIGTERM/SIGINT: cancels `shutdown` (graceful shutdown). Second: exits
/// the process at once (status 1). Spawn it once, at the start of a `main`.
///
/// The listeners are registered once, before the first signal: a listener
/// registered after the first signal was handled would miss a second one sent
/// in between.
pub async fn handle_signals(shutdown: CancellationToken) {
    let mut signals = TerminationSignals::register();
    signals.recv().await;
    tracing::info!("Received a termination signal; shutting down (a second signal exits at once)");
    shutdown.cancel();
    signals.recv().await;
    eprintln!("second termination signal; exiting without waiting");
    std::process::exit(1);
}

/// SIGTERM and SIGINT (Ctrl-C elsewhere), each delivery seen once.
struct TerminationSignals {
    #[cfg(unix)]
    unix: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl TerminationSignals {
    fn register() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let unix = match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
                (Ok(term), Ok(int)) => Some((term, int)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the process");
                    None
                }
            };
            TerminationSignals { unix }
        }
        #[cfg(not(unix))]
        TerminationSignals {}
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some((term, int)) = &mut self.unix {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}
