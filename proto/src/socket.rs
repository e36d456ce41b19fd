//! Binding the Unix sockets of the socket dir, the same way on both sides.
//!
//! A socket file left behind by a crashed container must not stop the next
//! process from starting, but a live socket must never be stolen and a file
//! that is not a socket must never be deleted. [`bind`] applies that rule.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};
use tonic::transport::{Channel, Endpoint};

/// Why a socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Another live process serves the path.
    #[error("{path} is served by another live process; stop it or choose another name")]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// The path exists and is not a socket; it is left alone.
    #[error(
        "{path} exists and is not a socket; refusing to replace it (remove it by hand if it is stale)"
    )]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Creating the directory, removing the stale socket or binding failed.
    #[error("cannot bind {path}: {source}")]
    Io {
        /// The socket path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Binds `path`, creating its parent directory and removing a stale socket
/// (one whose connect is refused) first.
///
/// # Errors
/// [`BindError::InUse`] when a live process accepts connections on `path`,
/// [`BindError::NotASocket`] when `path` is some other kind of file, and
/// [`BindError::Io`] for everything else.
pub async fn bind(path: &Path) -> Result<UnixListener, BindError> {
    let io_err = |source| BindError::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(io_err)?;
        // Plugins of one pod run as different UIDs: the directory is open to
        // all and sticky (like /tmp), so each can add its socket and only
        // remove its own. Only its owner can change its mode; the others
        // (and the operator, for the socket dir itself) leave it as it is.
        let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o1777));
    }
    match tokio::fs::symlink_metadata(path).await {
        Ok(meta) if meta.file_type().is_socket() => {
            if is_live(path).await {
                return Err(BindError::InUse {
                    path: path.to_owned(),
                });
            }
            match tokio::fs::remove_file(path).await {
                Ok(()) => {}
                // Someone else cleaned it up first; fine.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        Ok(_) => {
            return Err(BindError::NotASocket {
                path: path.to_owned(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(e)),
    }
    let listener = UnixListener::bind(path).map_err(io_err)?;
    // Anyone in the pod may connect: callers are told apart by their
    // credentials (SO_PEERCRED), not by file modes, and containers of one
    // pod usually run as different UIDs.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(io_err)?;
    Ok(listener)
}

/// Whether a process may be serving the socket at `path`. Only a refused
/// connect or a missing file mean nobody does (the socket is stale); any
/// other failure (a full backlog, no permission) is taken as live, so that a
/// busy socket is never removed.
pub async fn is_live(path: &Path) -> bool {
    match UnixStream::connect(path).await {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound
        ),
    }
}

/// A gRPC channel to the Unix socket at `path`. It connects lazily and
/// reconnects on demand, so a peer that restarts is found again by the next
/// call.
pub fn channel(path: &Path) -> Channel {
    let path = path.to_owned();
    // The URI is required by the API but unused: the connector ignores it,
    // and it only ends up in `:authority`, which must be a valid host name.
    Endpoint::from_static("http://localhost").connect_with_connector_lazy(tower::service_fn(
        move |_| {
            let path = path.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(&path).await?)) }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugins/a.sock");
        let first = bind(&path).await.unwrap();
        drop(first); // the file stays, nobody listens: stale
        assert!(path.exists());
        let _second = bind(&path).await.expect("stale socket must be replaced");
        assert!(is_live(&path).await);
    }

    #[tokio::test]
    async fn live_socket_is_not_stolen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.sock");
        let _live = bind(&path).await.unwrap();
        let err = bind(&path).await.unwrap_err();
        assert!(matches!(err, BindError::InUse { .. }), "{err}");
        assert!(is_live(&path).await, "the live socket must survive");
    }

    #[tokio::test]
    async fn regular_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.sock");
        std::fs::write(&path, b"precious").unwrap();
        let err = bind(&path).await.unwrap_err();
        assert!(matches!(err, BindError::NotASocket { .. }), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    }
}
