//! Dialing a plugin's socket, and noticing at once when the plugin dies.
//!
//! Every connection to a plugin is wrapped in a [`WatchedStream`] that fires
//! a [`Notify`] when the peer closes it (EOF) or it breaks. A killed plugin
//! process closes its sockets in the kernel immediately, and HTTP/2 always
//! has a read pending, so the operator learns of a SIGKILL within
//! milliseconds instead of waiting for the heartbeat TTL. The registry then
//! dials the socket once: a refused dial means the plugin is gone.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat2};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::sync::Notify;
use tonic::transport::{Channel, Endpoint};

/// A Unix stream that signals `closed` once when the peer hangs up or the
/// connection fails.
#[derive(Debug)]
pub(crate) struct WatchedStream {
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
/// Every connection is made without following a symlink anywhere on `path`
/// (see `connect_no_follow`: one swapped in after the path was confined is
/// refused, not followed), and then checks that the process serving it runs
/// as `uid`, the UID that registered the plugin: another container's socket
/// is never spoken to in its name.
pub(crate) async fn dial(
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
                let inner = connect_no_follow(&path).await?;
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

/// Whether a registered plugin's socket still leads to it, after its
/// connection dropped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Its process accepts connections (or the dial failed in a way that
    /// says nothing; the channel will find out).
    Live,
    /// It is gone, and why, for the removal's message.
    Gone(String),
}

/// Dials `path` as [`dial`] does (no symlink followed, served by `uid`), to
/// tell whether the plugin that registered it is still there. A refused or
/// missing socket means its process exited; a symlink in its place, or a
/// socket served by another UID, means it is not the plugin's any more.
/// Nothing outside the socket dir is ever connected to.
pub(crate) async fn liveness(path: &Path, uid: u32) -> Liveness {
    match connect_no_follow(path).await {
        Ok(stream) => match stream.peer_cred().map(|c| c.uid()) {
            Ok(served_by) if served_by != uid => Liveness::Gone(format!(
                "{} is now served by a process of UID {served_by}, not UID {uid} that registered the plugin",
                path.display()
            )),
            _ => Liveness::Live,
        },
        Err(e) => match e.kind() {
            io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound => Liveness::Gone(format!(
                "{} refuses connections (the process exited)",
                path.display()
            )),
            io::ErrorKind::PermissionDenied => Liveness::Gone(e.to_string()),
            _ => Liveness::Live,
        },
    }
}

/// Connects to the socket at `path` (absolute and canonical) without
/// following a symlink anywhere on it: the path is opened as an `O_PATH`
/// handle with `openat2(RESOLVE_NO_SYMLINKS)`, and the connection goes
/// through that handle (`/proc/self/fd/N` names the socket's inode). A check
/// followed by a connect by path would leave a window for a swap; this
/// leaves none.
async fn connect_no_follow(path: &Path) -> io::Result<UnixStream> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let handle = openat2(AT_FDCWD, path, how).map_err(|errno| match errno {
        Errno::ELOOP => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} now resolves through a symlink (one was put in its place); not following it",
                path.display()
            ),
        ),
        errno => io::Error::from(errno),
    })?;
    let stream = UnixStream::connect(format!("/proc/self/fd/{}", handle.as_raw_fd())).await;
    drop(handle);
    stream
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
    async fn a_symlink_anywhere_on_the_path_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let outside = dir.join("outside.sock");
        let listener = tokio::net::UnixListener::bind(&outside).unwrap();
        // The real path connects.
        connect_no_follow(&outside).await.unwrap();
        listener.accept().await.unwrap();
        // A symlink to it, as the last component or as a directory on the
        // way, is refused before any connection is made.
        std::fs::create_dir(dir.join("plugins")).unwrap();
        let link = dir.join("plugins/swapped.sock");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        std::os::unix::fs::symlink(&dir, dir.join("linked-dir")).unwrap();
        for path in [link, dir.join("linked-dir/outside.sock")] {
            let err = connect_no_follow(&path).await.unwrap_err();
            assert_eq!(
                err.kind(),
                io::ErrorKind::PermissionDenied,
                "{path:?}: {err}"
            );
            assert!(err.to_string().contains("not following it"), "{err}");
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(100), listener.accept())
                .await
                .is_err(),
            "nothing reached the socket through a symlink"
        );
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
