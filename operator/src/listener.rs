//! The registry socket's connections, bounded in number.
//!
//! Every container in the pod can connect to `registry.sock`. Each accepted
//! connection holds a permit; past [`crate::registry::RegistryConfig::max_connections`]
//! new connections are closed at once instead of being held, so a client
//! that opens thousands cannot grow the operator's memory. Idle and
//! half-open connections are closed by the server's keepalive and maximum
//! connection age (see `Registry::serve_on`), which returns their permits.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, UdsConnectInfo};

/// An accepted connection and its permit.
#[derive(Debug)]
pub(crate) struct Bounded {
    stream: UnixStream,
    _permit: OwnedSemaphorePermit,
}

/// The connections accepted on `listener`, at most `max` open at once.
pub(crate) fn incoming(
    listener: UnixListener,
    max: usize,
) -> impl Stream<Item = io::Result<Bounded>> {
    let permits = Arc::new(Semaphore::new(max.max(1)));
    futures::stream::unfold((listener, permits), move |(listener, permits)| async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => match Arc::clone(&permits).try_acquire_owned() {
                    Ok(permit) => {
                        let conn = Bounded {
                            stream,
                            _permit: permit,
                        };
                        return Some((Ok(conn), (listener, permits)));
                    }
                    Err(_) => {
                        tracing::warn!(
                            max,
                            "registry socket: too many connections; closing a new one"
                        );
                    }
                },
                // Out of file descriptors and the like: wait, do not stop
                // serving the plugins that are connected.
                Err(error) => {
                    tracing::warn!(%error, "registry socket: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
}

impl Connected for Bounded {
    type ConnectInfo = UdsConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Bounded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Bounded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn connections_past_the_bound_are_closed_and_permits_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut accepted = std::pin::pin!(incoming(listener, 2));
        let _a = UnixStream::connect(&path).await.unwrap();
        let _b = UnixStream::connect(&path).await.unwrap();
        let first = accepted.next().await.unwrap().unwrap();
        let _second = accepted.next().await.unwrap().unwrap();
        // A third is closed by the server: its read sees EOF.
        let mut c = UnixStream::connect(&path).await.unwrap();
        let next = tokio::time::timeout(Duration::from_millis(300), accepted.next()).await;
        assert!(next.is_err(), "the third connection must not be yielded");
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut c, &mut buf),
        )
        .await
        .expect("closed, not held");
        assert_eq!(read.unwrap(), 0);
        // Closing one returns its permit.
        drop(first);
        let _d = UnixStream::connect(&path).await.unwrap();
        let fourth = tokio::time::timeout(Duration::from_secs(5), accepted.next()).await;
        assert!(matches!(fourth, Ok(Some(Ok(_)))));
    }
}
