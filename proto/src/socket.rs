//! Binding the Unix sockets of the socket dir, the same way on both sides.
//!
//! A socket file left behind by a crashed container must not stop the next
//! process from starting, but a live socket must never be stolen and a file
//! that is not a socket must never be deleted. [`bind`] applies that rule.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
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
    /// The plugin's directory exists and this process cannot create its
    /// socket there.
    #[error(
        "cannot create a socket in {dir}: it belongs to {} and this process may not write to it. Another container holds this plugin's name: give each plugin a volume of its own at {dir} (docs/security.md)",
        owner.map_or_else(|| "another UID".to_owned(), |uid| format!("UID {uid}"))
    )]
    DirTaken {
        /// The plugin's directory.
        dir: PathBuf,
        /// Its owner, when it could be read.
        owner: Option<u32>,
    },
    /// The socket dir does not exist. A plugin never creates it (nor
    /// `plugins/` in it): it is the volume shared with the operator, so a
    /// missing one means a wrong setting.
    #[error(
        "the socket dir {dir} does not exist (a plugin does not create the socket dir: it is a volume shared with the operator)"
    )]
    NoSocketDir {
        /// The socket dir.
        dir: PathBuf,
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
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|source| BindError::Io {
                path: path.to_owned(),
                source,
            })?;
        // Containers of one pod run as different UIDs: the directory is
        // open to all and sticky (like /tmp), so each can add a file and
        // only remove its own. Only its owner can change its mode; the
        // others leave it as it is.
        let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o1777));
    }
    bind_here(path).await
}

/// Binds the socket of the plugin `name` in `socket_dir`
/// ([`crate::plugin_socket`]), creating `plugins/` (open to all, sticky)
/// and the plugin's own directory (writable by this process's UID only)
/// when they are missing. In Kubernetes the plugin's directory is a volume
/// of its own and exists already. The socket dir itself must exist: it is
/// the volume shared with the operator, and is never created here.
///
/// # Errors
/// As [`bind`]; [`BindError::NoSocketDir`] when `socket_dir` does not
/// exist; [`BindError::DirTaken`] when the plugin's directory exists and
/// this process may not create its socket there (it belongs to another
/// UID: another container took the name).
pub async fn bind_plugin(socket_dir: &Path, name: &str) -> Result<UnixListener, BindError> {
    let path = socket_dir.join(crate::plugin_socket(name));
    let io_err = |source| BindError::Io {
        path: path.clone(),
        source,
    };
    match tokio::fs::metadata(socket_dir).await {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(BindError::NoSocketDir {
                dir: socket_dir.to_owned(),
            });
        }
        // Not a directory, or not readable: creating plugins/ says why.
        _ => {}
    }
    let plugins = socket_dir.join(crate::PLUGINS_DIR);
    if create_dir(&plugins).await.map_err(io_err)? {
        let _ = std::fs::set_permissions(&plugins, std::fs::Permissions::from_mode(0o1777));
    }
    let own = plugins.join(name);
    if create_dir(&own).await.map_err(io_err)? {
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).map_err(io_err)?;
    }
    bind_here(&path).await.map_err(|e| match e {
        BindError::Io { source, .. } if source.kind() == io::ErrorKind::PermissionDenied => {
            BindError::DirTaken {
                owner: std::fs::metadata(&own).map(|m| m.uid()).ok(),
                dir: own.clone(),
            }
        }
        other => other,
    })
}

/// Removes the plugin `name`'s own directory, `plugins/<name>/` in
/// `socket_dir`, if it is empty: what a plugin does on a clean exit, once
/// its socket is removed. A directory that holds anything (a newer
/// instance's socket, a file) stays, and so does one that cannot be removed
/// (a volume mounted there, in Kubernetes); whether it was removed.
pub fn remove_plugin_dir(socket_dir: &Path, name: &str) -> bool {
    // rmdir removes only an empty directory, atomically: nothing that
    // appears in it is ever lost.
    std::fs::remove_dir(socket_dir.join(crate::PLUGINS_DIR).join(name)).is_ok()
}

/// Creates `dir` (not its parents); whether it was created here.
async fn create_dir(dir: &Path) -> io::Result<bool> {
    match tokio::fs::create_dir(dir).await {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Binds `path` in an existing directory, removing a stale socket first.
async fn bind_here(path: &Path) -> Result<UnixListener, BindError> {
    let io_err = |source| BindError::Io {
        path: path.to_owned(),
        source,
    };
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
    async fn a_plugin_gets_a_directory_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let _listener = bind_plugin(dir.path(), "sqlite").await.unwrap();
        let socket = dir.path().join("plugins/sqlite/plugin.sock");
        assert!(is_live(&socket).await);
        let mode = |p: &str| {
            std::fs::metadata(dir.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("plugins"), 0o1777, "plugins/ is open to all, sticky");
        assert_eq!(
            mode("plugins/sqlite"),
            0o755,
            "only the plugin writes its directory"
        );
        assert_eq!(mode("plugins/sqlite/plugin.sock") & 0o777, 0o666);
        // A second instance of the same plugin is refused, not let in.
        assert!(matches!(
            bind_plugin(dir.path(), "sqlite").await,
            Err(BindError::InUse { .. })
        ));
    }

    #[tokio::test]
    async fn a_missing_socket_dir_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("sockets");
        let err = bind_plugin(&missing, "sqlite").await.unwrap_err();
        assert!(
            matches!(&err, BindError::NoSocketDir { dir } if *dir == missing),
            "{err}"
        );
        assert!(err.to_string().contains(&missing.display().to_string()));
        assert!(
            !missing.exists(),
            "neither the socket dir nor plugins/ is made"
        );
    }

    #[tokio::test]
    async fn only_an_empty_plugin_directory_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let listener = bind_plugin(dir.path(), "sqlite").await.unwrap();
        let own = dir.path().join("plugins/sqlite");
        assert!(
            !remove_plugin_dir(dir.path(), "sqlite"),
            "it holds a socket"
        );
        assert!(own.join("plugin.sock").exists());
        drop(listener);
        std::fs::remove_file(own.join("plugin.sock")).unwrap();
        std::fs::write(own.join("notes"), b"kept").unwrap();
        assert!(!remove_plugin_dir(dir.path(), "sqlite"), "it holds a file");
        std::fs::remove_file(own.join("notes")).unwrap();
        assert!(remove_plugin_dir(dir.path(), "sqlite"));
        assert!(!own.exists());
        assert!(dir.path().join("plugins").is_dir(), "plugins/ stays");
    }

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
