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

use std::os::fd::AsRawFd;

use futures::{Stream, StreamExt};
use nix::sys::socket::{MsgFlags, recv};
use tokio::io::Interest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tonic::transport::server::{Connected, UdsConnectInfo};

/// An accepted connection and its permit.
#[derive(Debug)]
pub(crate) struct Bounded {
    stream: UnixStream,
    _permit: OwnedSemaphorePermit,
}

/// The connections accepted on `listener`: at most `max` open at once, and
/// each handed to the server only once its client has sent something.
///
/// A connection that sends nothing within `first_byte` is closed: HTTP/2's
/// keepalive and the maximum connection age only start once a client has
/// spoken, so without this a client holding `max` silent connections kept
/// every plugin out (measured: 300 idle connections, no registration within
/// 30 s). Waiting happens in a task per connection, so a silent client never
/// delays the accept of the next one.
pub(crate) fn incoming(
    listener: UnixListener,
    max: usize,
    first_byte: Duration,
) -> impl Stream<Item = io::Result<Bounded>> {
    let permits = Arc::new(Semaphore::new(max.max(1)));
    let (spoke, spoken) = mpsc::channel::<Bounded>(max.max(1));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                // The server stopped: stop accepting.
                () = spoke.closed() => return,
            };
            match accepted {
                Ok((stream, _)) => match Arc::clone(&permits).try_acquire_owned() {
                    Ok(permit) => {
                        let spoke = spoke.clone();
                        tokio::spawn(async move {
                            match tokio::time::timeout(first_byte, spoken_to(&stream)).await {
                                Ok(Ok(())) => {
                                    let _ = spoke
                                        .send(Bounded {
                                            stream,
                                            _permit: permit,
                                        })
                                        .await;
                                }
                                Ok(Err(_)) => {}
                                Err(_) => tracing::debug!(
                                    after = ?first_byte,
                                    "registry socket: closing a connection that sent nothing"
                                ),
                            }
                        });
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
    });
    tokio_stream::wrappers::ReceiverStream::new(spoken).map(Ok)
}

/// Waits until the client has sent something (or hung up), without
/// consuming it: the bytes stay for the server (a peek).
async fn spoken_to(stream: &UnixStream) -> io::Result<()> {
    let mut byte = [0u8; 1];
    loop {
        // Readiness can be reported before any data (a fresh socket is
        // "ready" at first); a peek that would block clears it.
        stream.readable().await?;
        let peeked = stream.try_io(Interest::READABLE, || {
            recv(
                stream.as_raw_fd(),
                &mut byte,
                MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
            )
            .map_err(io::Error::from)
        });
        match peeked {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
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
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn connections_past_the_bound_are_closed_and_permits_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut accepted = std::pin::pin!(incoming(listener, 2, Duration::from_secs(5)));
        let mut a = UnixStream::connect(&path).await.unwrap();
        let mut b = UnixStream::connect(&path).await.unwrap();
        a.write_all(b"x").await.unwrap();
        b.write_all(b"x").await.unwrap();
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
        let mut d = UnixStream::connect(&path).await.unwrap();
        d.write_all(b"x").await.unwrap();
        let fourth = tokio::time::timeout(Duration::from_secs(5), accepted.next()).await;
        assert!(matches!(fourth, Ok(Some(Ok(_)))));
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed_and_frees_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut accepted = std::pin::pin!(incoming(listener, 1, Duration::from_millis(200)));
        // Silent: never yielded, closed after the first-byte timeout.
        let mut silent = UnixStream::connect(&path).await.unwrap();
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut silent, &mut buf),
        )
        .await
        .expect("closed, not held");
        assert_eq!(read.unwrap(), 0);
        // Its place is free again, and a client that speaks is served.
        let mut speaking = UnixStream::connect(&path).await.unwrap();
        speaking.write_all(b"PRI").await.unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), accepted.next()).await;
        assert!(matches!(next, Ok(Some(Ok(_)))));
    }
}
