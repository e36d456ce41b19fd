//! The `confinement` target's fixture and invariant: a real socket dir with
//! real sockets, files, directories and symlinks (inside and out), built
//! once per process in a temporary directory and removed at exit.

use std::os::unix::fs::{FileTypeExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::Arbitrary;

const PREFIX: &str = "kplug-fuzz-confinement-";

/// The temporary tree `confine` is fuzzed against. `root` is canonical:
/// ```text
/// sockets/                    the socket dir
///   registry.sock             socket
///   plugins/pg.sock           socket
///   plugins/file.sock         regular file
///   plugins/dir.sock/         directory
///   plugins/out.sock          -> <root>/outside/evil.sock  (absolute, out)
///   plugins/rel-out.sock      -> ../../outside/evil.sock   (relative, out)
///   plugins/in.sock           -> pg.sock                   (relative, in)
///   plugins/abs-in.sock       -> <root>/sockets/plugins/pg.sock
///   plugins/via-alias.sock    -> <root>/alias/plugins/pg.sock (in, via a symlinked dir)
///   plugins/dangling.sock     -> <root>/nowhere
///   plugins/loop.sock         -> loop.sock
///   out                       -> <root>/outside            (directory, out)
///   root                      -> /
///   sub/deep/x.sock           socket
/// sockets-evil/x.sock         socket (a sibling whose name extends "sockets")
/// outside/evil.sock           socket
/// outside/file                regular file
/// alias                       -> <root>/sockets
/// ```
pub struct Tree {
    /// The canonical temporary root.
    pub root: PathBuf,
    /// The canonical socket dir.
    pub sockets: PathBuf,
    _listeners: Vec<UnixListener>,
}

static TREE: OnceLock<Tree> = OnceLock::new();

/// Removes the tree, if it was built. libFuzzer leaves by `exit`, so the
/// `confinement` fuzz target registers this with `atexit`; the replay test
/// calls it when done. (A process that never gets here, a crash, leaves its
/// tree to the next one's `sweep_stale`.)
pub extern "C" fn remove_tree() {
    if let Some(tree) = TREE.get() {
        let _ = std::fs::remove_dir_all(&tree.root);
    }
}

/// Removes the trees of processes that are gone (a crash skips `atexit`).
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next() else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The tree, built on first use.
pub fn tree() -> &'static Tree {
    TREE.get_or_init(|| {
        sweep_stale();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .tempdir()
            .expect("a temporary directory")
            .keep();
        let root = dir.canonicalize().expect("a canonical temporary directory");
        let p = |rel: &str| root.join(rel);
        let mut listeners = Vec::new();
        let mut bind =
            |rel: &str| listeners.push(UnixListener::bind(p(rel)).expect("bind a socket"));
        for d in [
            "sockets/plugins/dir.sock",
            "sockets/sub/deep",
            "sockets-evil",
            "outside",
        ] {
            std::fs::create_dir_all(p(d)).expect("create a directory");
        }
        for s in [
            "sockets/registry.sock",
            "sockets/plugins/pg.sock",
            "sockets/sub/deep/x.sock",
            "sockets-evil/x.sock",
            "outside/evil.sock",
        ] {
            bind(s);
        }
        for f in ["sockets/plugins/file.sock", "outside/file"] {
            std::fs::write(p(f), b"not a socket").expect("write a file");
        }
        let links: [(PathBuf, &str); 10] = [
            (p("outside/evil.sock"), "sockets/plugins/out.sock"),
            (
                "../../outside/evil.sock".into(),
                "sockets/plugins/rel-out.sock",
            ),
            ("pg.sock".into(), "sockets/plugins/in.sock"),
            (p("sockets/plugins/pg.sock"), "sockets/plugins/abs-in.sock"),
            (p("alias/plugins/pg.sock"), "sockets/plugins/via-alias.sock"),
            (p("nowhere"), "sockets/plugins/dangling.sock"),
            ("loop.sock".into(), "sockets/plugins/loop.sock"),
            (p("outside"), "sockets/out"),
            ("/".into(), "sockets/root"),
            (p("sockets"), "alias"),
        ];
        for (target, link) in links {
            symlink(target, p(link)).expect("create a symlink");
        }
        Tree {
            sockets: p("sockets"),
            root,
            _listeners: listeners,
        }
    })
}

/// Path components the fuzzer combines (names from the tree, and ones
/// that are not there).
pub const SEGMENTS: &[&str] = &[
    "plugins",
    "pg.sock",
    "registry.sock",
    "file.sock",
    "dir.sock",
    "out.sock",
    "rel-out.sock",
    "in.sock",
    "abs-in.sock",
    "via-alias.sock",
    "dangling.sock",
    "loop.sock",
    "out",
    "root",
    "sub",
    "deep",
    "x.sock",
    "evil.sock",
    "file",
    "sockets",
    "sockets-evil",
    "outside",
    "alias",
    "tmp",
    "missing.sock",
];

/// The socket dir as configured: the same directory, spelled differently.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum SocketDir {
    /// Canonical.
    Canonical,
    /// Through the `alias` symlink.
    Alias,
    /// With a trailing slash.
    TrailingSlash,
    /// With a trailing `/.`.
    TrailingDot,
    /// With a `..` in it.
    DotDot,
}

/// Where a registered path starts.
#[derive(Arbitrary, Debug)]
pub enum Start {
    /// Relative.
    Relative,
    /// The socket dir as configured.
    SocketDir,
    /// The canonical socket dir.
    Canonical,
    /// The `alias` symlink.
    Alias,
    /// The tree's root (the socket dir's parent).
    Root,
    /// `/`.
    FilesystemRoot,
    /// The socket dir as configured, as a string prefix without a
    /// separator (so `<dir>` + `-evil/x.sock`, say).
    Glued,
}

/// One path component.
#[derive(Arbitrary, Debug)]
pub enum Segment {
    /// From [`SEGMENTS`].
    Known(u8),
    /// `.`
    Dot,
    /// `..`
    DotDot,
    /// Nothing (a doubled separator).
    Empty,
    /// As given (may contain separators, NULs, anything).
    Raw(String),
}

/// A registered socket path, from fuzz input.
#[derive(Arbitrary, Debug)]
pub struct PathInput {
    /// How the operator's socket dir is spelled.
    pub dir: SocketDir,
    start: Start,
    segments: Vec<Segment>,
    trailing_slash: bool,
}

impl PathInput {
    /// The socket dir to pass to `confine`.
    pub fn socket_dir(&self, tree: &Tree) -> PathBuf {
        let s = tree.sockets.to_str().expect("a UTF-8 temporary directory");
        match self.dir {
            SocketDir::Canonical => tree.sockets.clone(),
            SocketDir::Alias => tree.root.join("alias"),
            SocketDir::TrailingSlash => format!("{s}/").into(),
            SocketDir::TrailingDot => format!("{s}/.").into(),
            SocketDir::DotDot => tree.root.join("alias/../sockets"),
        }
    }

    /// The registered path.
    pub fn registered(&self, tree: &Tree) -> String {
        let dir = self.socket_dir(tree);
        let abs = |p: &Path| format!("{}/", p.to_str().expect("UTF-8"));
        let mut out = match self.start {
            Start::Relative => String::new(),
            Start::SocketDir => abs(&dir),
            Start::Canonical => abs(&tree.sockets),
            Start::Alias => abs(&tree.root.join("alias")),
            Start::Root => abs(&tree.root),
            Start::FilesystemRoot => "/".into(),
            Start::Glued => dir
                .to_str()
                .expect("UTF-8")
                .trim_end_matches('/')
                .to_owned(),
        };
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                out.push('/');
            }
            match segment {
                Segment::Known(k) => out.push_str(SEGMENTS[usize::from(*k) % SEGMENTS.len()]),
                Segment::Dot => out.push('.'),
                Segment::DotDot => out.push_str(".."),
                Segment::Empty => {}
                Segment::Raw(s) => out.push_str(s),
            }
        }
        if self.trailing_slash {
            out.push('/');
        }
        out
    }
}

/// Checks `confine(socket_dir, registered)`: it never panics, and a path it
/// accepts is a Unix socket, canonical, inside the canonical socket dir,
/// and was registered without `..` (and, if absolute, under the socket dir
/// as configured or as canonical).
pub fn check(tree: &Tree, socket_dir: &Path, registered: &str) {
    let result = kplug_checks::confinement::confine(socket_dir, registered);
    crate::debug(&result.as_ref().map_err(ToString::to_string));
    let path = match result {
        Err(e) => {
            assert!(!e.to_string().is_empty(), "a refusal without a reason");
            return;
        }
        Ok(path) => path,
    };
    let fail = |why: &str| -> ! {
        panic!(
            "confine({socket_dir:?}, {registered:?}) = Ok({path:?}): {why} (canonical socket dir {:?})",
            tree.sockets
        )
    };
    if !path.is_absolute() {
        fail("not absolute");
    }
    if !path.starts_with(&tree.sockets) {
        fail("outside the socket dir");
    }
    match std::fs::canonicalize(&path) {
        Ok(canonical) if canonical == path => {}
        Ok(_) => fail("not canonical"),
        Err(_) => fail("does not resolve"),
    }
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_socket() => {}
        Ok(_) => fail("not a Unix socket"),
        Err(_) => fail("cannot be inspected"),
    }
    let reg = Path::new(registered);
    if reg.components().any(|c| c == Component::ParentDir) {
        fail("registered with '..'");
    }
    if reg.is_absolute() && !reg.starts_with(socket_dir) && !reg.starts_with(&tree.sockets) {
        fail("registered as an absolute path outside the socket dir");
    }
}
