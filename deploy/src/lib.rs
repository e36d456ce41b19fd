//! Support for the tests of kplug's deployment artefacts: the kustomize
//! manifests in `manifests/`, `compose.yaml` and the Dockerfiles.
//!
//! The tests themselves are in `deploy/tests/`. They run the pinned tools
//! that `make -C deploy tools` installs into `deploy/.tools` (kustomize,
//! hadolint, composecheck), and the ones that talk to Kubernetes use the real
//! kube-apiserver of `kplug-testenv`.

pub mod dockerfile;
pub mod dockerignore;
pub mod docs;
pub mod http;
pub mod tools;
pub mod yaml;

use std::path::PathBuf;

/// The root of the kplug repository (the parent of `deploy/`).
pub fn repo_root() -> PathBuf {
    deploy_dir()
        .parent()
        .expect("deploy/ has a parent directory")
        .to_path_buf()
}

/// The `deploy/` directory of this crate.
pub fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
