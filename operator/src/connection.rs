//! Dialing a plugin's socket, and noticing at once when the plugin dies.
//!
//! Every connection to a plugin is wrapped in a [`WatchedStream`] that fires
//! a [`Notify`] when the peer closes it (EOF) or it breaks. A killed plugin
//! process closes its sockets in the kernel immediately, and HTTP/2 always
//! has a read pending, so the operator learns of a SIGKILL within
//! milliseconds instead of waiting for the heartbeat TTL. The registry then
//! dials the socket once: a refused dial means the plugin is gone.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::sync::Notify;
use tonic::transport::{Channel, Endpoint};

/// A Unix stream that signals `closed` once when the peer hangs up or the
/// connection fails.
#[derive(Debug)]
pub struct WatchedStream {
    inner: UnixStream,
    closed: Option<Arc<Notify>>,
}

impl WatchedStream {
    fn signal_closed(&mut self) {
        if let Some(closed) = self.closed.take() {
            closed.notify_one();
        }
    }
}

impl AsyncRead for WatchedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let wanted = buf.remaining() > 0;
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &result {
            Poll::Ready(Ok(())) if wanted && buf.filled().len() == before => self.signal_closed(),
            Poll::Ready(Err(_)) => self.signal_closed(),
            _ => {}
        }
        result
    }
}

impl AsyncWrite for WatchedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(result, Poll::Ready(Err(_))) {
            self.signal_closed();
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Opens a gRPC channel to the plugin socket at `path`, connecting eagerly
/// so that a dead socket fails here. Every connection the channel makes
/// (including reconnects) notifies `closed` when it drops.
///
/// Every connection checks, first, that `path` still resolves to itself (no
/// symlink was swapped into it after it was confined), and then that the
/// process serving it runs as `uid`, the UID that registered the plugin:
/// another container's socket is never spoken to in its name.
pub async fn dial(
    path: &Path,
    uid: u32,
    connect_timeout: Duration,
    closed: Arc<Notify>,
) -> Result<Channel, tonic::transport::Error> {
    let path: PathBuf = path.to_owned();
    // The URI is required by the API but unused: the connector ignores it.
    Endpoint::from_static("http://plugin.kplug.invalid")
        .connect_timeout(connect_timeout)
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            let closed = closed.clone();
            async move {
                if std::fs::canonicalize(&path)? != path {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "{} now resolves elsewhere (a symlink was put in its place); not following it",
                            path.display()
                        ),
                    ));
                }
                let inner = UnixStream::connect(&path).await?;
                let served_by = inner.peer_cred()?.uid();
                if served_by != uid {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "{} is served by a process of UID {served_by}, not UID {uid} that registered the plugin (a socket replaced by another container?)",
                            path.display()
                        ),
                    ));
                }
                Ok::<_, io::Error>(TokioIo::new(WatchedStream {
                    inner,
                    closed: Some(closed),
                }))
            }
        }))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn peer_hang_up_is_signalled() {
        let (a, b) = UnixStream::pair().unwrap();
        let closed = Arc::new(Notify::new());
        let mut watched = WatchedStream {
            inner: a,
            closed: Some(closed.clone()),
        };
        drop(b);
        let mut buf = [0u8; 8];
        assert_eq!(watched.read(&mut buf).await.unwrap(), 0);
        tokio::time::timeout(Duration::from_secs(1), closed.notified())
            .await
            .expect("EOF must notify");
    }

    #[tokio::test]
    async fn data_does_not_signal() {
        use tokio::io::AsyncWriteExt;
        let (a, mut b) = UnixStream::pair().unwrap();
        let closed = Arc::new(Notify::new());
        let mut watched = WatchedStream {
            inner: a,
            closed: Some(closed.clone()),
        };
        b.write_all(b"hi").await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(watched.read(&mut buf).await.unwrap(), 2);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), closed.notified())
                .await
                .is_err(),
            "reading data must not look like a hang-up"
        );
    }
}
