//! How a kplug process (the operator, a plugin) learns that it must stop.

use std::future::Future;

/// Installs the SIGTERM and SIGINT handlers at once, and returns a future
/// that resolves on either signal.
///
/// At once, not when the future is first polled: a server polls its
/// shutdown future only after it has started serving, and on a loaded
/// machine a SIGTERM sent right after the first answer came before that and
/// found the default action (the process died without unregistering or
/// releasing its Lease). Call it before binding anything. When a handler
/// cannot be installed, the future never resolves.
pub fn termination() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        match handlers {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nix::sys::signal::{Signal, raise};

    use super::termination;

    /// A SIGTERM that comes before the future is first polled resolves it
    /// (and does not kill the process: before the handlers were installed
    /// up front, this test's process died here).
    #[tokio::test]
    async fn a_sigterm_before_the_first_poll_is_not_lost() {
        let shutdown = termination();
        raise(Signal::SIGTERM).expect("SIGTERM raised");
        tokio::time::timeout(Duration::from_secs(5), shutdown)
            .await
            .expect("the SIGTERM resolves the shutdown future");
    }
}
