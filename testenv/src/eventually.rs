//! Polling until something holds.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often [`eventually`] polls.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Calls `f` every 100 ms until it returns `Ok`, and returns that value.
///
/// `Err` is an observation ("status.phase is Pending"), kept for the panic
/// message. A call that hangs is cut off at the deadline too.
///
/// # Panics
///
/// When `timeout` passes without an `Ok`, naming `what` and the last
/// observation.
pub async fn eventually<F, Fut, T, E>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Debug,
{
    let deadline = Instant::now() + timeout;
    let mut last: Option<E> = None;
    loop {
        match tokio::time::timeout_at(deadline, f()).await {
            Ok(Ok(value)) => return value,
            Ok(Err(observation)) => last = Some(observation),
            Err(_) => break,
        }
        if Instant::now() + POLL_INTERVAL >= deadline {
            break;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    match last {
        Some(observation) => panic!("{what}: not within {timeout:?}; last seen: {observation:?}"),
        None => panic!("{what}: not within {timeout:?}; the first check did not even finish"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_ok() {
        let mut calls = 0;
        let value = eventually("third call", Duration::from_secs(5), || {
            calls += 1;
            let calls = calls;
            async move {
                if calls < 3 {
                    Err(calls)
                } else {
                    Ok(calls * 10)
                }
            }
        })
        .await;
        assert_eq!(value, 30);
    }

    #[tokio::test]
    #[should_panic(expected = "the answer: not within 300ms; last seen: \"still 41\"")]
    async fn panics_with_the_last_observation() {
        eventually("the answer", Duration::from_millis(300), || async {
            Err::<(), _>("still 41")
        })
        .await;
    }

    #[tokio::test]
    #[should_panic(expected = "the first check did not even finish")]
    async fn cuts_off_a_hanging_check() {
        eventually("hang", Duration::from_millis(200), || async {
            std::future::pending::<Result<(), ()>>().await
        })
        .await;
    }
}
