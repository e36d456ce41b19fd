//! Keeping plugin sockets inside the socket dir.
//!
//! A plugin names its socket in its heartbeat. The operator will dial that
//! path, so a path outside the shared socket dir would let a heartbeat make
//! the operator connect to any socket on its filesystem (a container
//! runtime's, say). [`confine`] refuses:
//! - absolute paths outside the socket dir,
//! - any `..` component (even one that would land back inside),
//! - symlinks whose target is outside the socket dir,
//! - anything that is not a Unix socket.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

/// Why a socket path was refused. Messages name the path and the socket dir.
#[derive(Debug, thiserror::Error)]
pub enum ConfinementError {
    /// No path was given.
    #[error(
        "the socket path is empty; register it relative to the socket dir, e.g. plugins/<name>/plugin.sock"
    )]
    Empty,
    /// The path contains `..`.
    #[error("socket path {0:?} contains '..'; register it relative to the socket dir without '..'")]
    ParentComponent(String),
    /// An absolute path outside the socket dir.
    #[error("socket path {path:?} is outside the socket dir {dir}")]
    Outside {
        /// The path as registered.
        path: String,
        /// The socket dir.
        dir: PathBuf,
    },
    /// The path resolves (through a symlink) to somewhere outside.
    #[error("socket path {path:?} resolves to {resolved}, outside the socket dir {dir}")]
    Escapes {
        /// The path as registered.
        path: String,
        /// Where it really points.
        resolved: PathBuf,
        /// The socket dir.
        dir: PathBuf,
    },
    /// The path does not exist or cannot be inspected.
    #[error("socket {path:?} in {dir}: {source}")]
    Unreachable {
        /// The path as registered.
        path: String,
        /// The socket dir.
        dir: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The path exists but is not a Unix socket.
    #[error("{resolved} is not a Unix socket")]
    NotASocket {
        /// The resolved path.
        resolved: PathBuf,
    },
}

/// Resolves a registered socket path against `socket_dir` and checks that it
/// is a Unix socket inside it. Returns the canonical path to dial.
pub fn confine(socket_dir: &Path, registered: &str) -> Result<PathBuf, ConfinementError> {
    if registered.is_empty() {
        return Err(ConfinementError::Empty);
    }
    let path = Path::new(registered);
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(ConfinementError::ParentComponent(registered.to_owned()));
    }
    let unreachable = |source| ConfinementError::Unreachable {
        path: registered.to_owned(),
        dir: socket_dir.to_owned(),
        source,
    };
    let dir = socket_dir.canonicalize().map_err(unreachable)?;
    let joined = if path.is_absolute() {
        // Compare lexically first: an absolute path elsewhere is refused
        // without touching it.
        if !path.starts_with(socket_dir) && !path.starts_with(&dir) {
            return Err(ConfinementError::Outside {
                path: registered.to_owned(),
                dir: socket_dir.to_owned(),
            });
        }
        path.to_owned()
    } else {
        dir.join(path)
    };
    let resolved = joined.canonicalize().map_err(unreachable)?;
    if !resolved.starts_with(&dir) {
        return Err(ConfinementError::Escapes {
            path: registered.to_owned(),
            resolved,
            dir: socket_dir.to_owned(),
        });
    }
    let meta = std::fs::metadata(&resolved).map_err(unreachable)?;
    if !meta.file_type().is_socket() {
        return Err(ConfinementError::NotASocket { resolved });
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    struct Dirs {
        _root: tempfile::TempDir,
        sockets: PathBuf,
        outside: PathBuf,
    }

    fn dirs() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        let sockets = root.path().join("sockets");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(sockets.join("plugins")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        Dirs {
            _root: root,
            sockets,
            outside,
        }
    }

    #[test]
    fn relative_socket_inside_is_accepted() {
        let d = dirs();
        let _l = UnixListener::bind(d.sockets.join("plugins/pg.sock")).unwrap();
        let got = confine(&d.sockets, "plugins/pg.sock").unwrap();
        assert_eq!(
            got,
            d.sockets.canonicalize().unwrap().join("plugins/pg.sock")
        );
    }

    #[test]
    fn absolute_socket_inside_is_accepted() {
        let d = dirs();
        let path = d.sockets.join("plugins/pg.sock");
        let _l = UnixListener::bind(&path).unwrap();
        assert!(confine(&d.sockets, path.to_str().unwrap()).is_ok());
    }

    #[test]
    fn absolute_path_elsewhere_is_refused() {
        let d = dirs();
        let path = d.outside.join("evil.sock");
        let _l = UnixListener::bind(&path).unwrap();
        let err = confine(&d.sockets, path.to_str().unwrap()).unwrap_err();
        assert!(matches!(err, ConfinementError::Outside { .. }), "{err}");
    }

    #[test]
    fn dot_dot_is_refused_even_if_it_comes_back() {
        let d = dirs();
        let _l = UnixListener::bind(d.sockets.join("plugins/pg.sock")).unwrap();
        for p in ["../outside/evil.sock", "plugins/../plugins/pg.sock"] {
            let err = confine(&d.sockets, p).unwrap_err();
            assert!(
                matches!(err, ConfinementError::ParentComponent(_)),
                "{p}: {err}"
            );
        }
    }

    #[test]
    fn symlink_out_is_refused() {
        let d = dirs();
        let target = d.outside.join("evil.sock");
        let _l = UnixListener::bind(&target).unwrap();
        std::os::unix::fs::symlink(&target, d.sockets.join("plugins/link.sock")).unwrap();
        let err = confine(&d.sockets, "plugins/link.sock").unwrap_err();
        assert!(matches!(err, ConfinementError::Escapes { .. }), "{err}");
        // A symlinked directory is caught the same way.
        std::os::unix::fs::symlink(&d.outside, d.sockets.join("out")).unwrap();
        let err = confine(&d.sockets, "out/evil.sock").unwrap_err();
        assert!(matches!(err, ConfinementError::Escapes { .. }), "{err}");
    }

    #[test]
    fn regular_file_and_missing_file_are_refused() {
        let d = dirs();
        std::fs::write(d.sockets.join("plugins/file.sock"), b"x").unwrap();
        let err = confine(&d.sockets, "plugins/file.sock").unwrap_err();
        assert!(matches!(err, ConfinementError::NotASocket { .. }), "{err}");
        let err = confine(&d.sockets, "plugins/missing.sock").unwrap_err();
        assert!(matches!(err, ConfinementError::Unreachable { .. }), "{err}");
        assert!(matches!(
            confine(&d.sockets, ""),
            Err(ConfinementError::Empty)
        ));
    }
}
