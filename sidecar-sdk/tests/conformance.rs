//! Runs the shared SDK conformance cases (`sidecar-sdk/conformance/cases.json`)
//! and every protocol check of `kplug-conformance` against the Rust
//! conformance plugin (`examples/conformance.rs`), a real process on a real
//! socket. The plugin's behaviour is specified in
//! `sidecar-sdk/conformance/README.md`; the other SDKs' plugins run through
//! the same kit in `make conformance`.

use std::path::PathBuf;
use std::time::Duration;

use kplug_conformance::checks::Verdict;
use kplug_conformance::{Options, report};

/// `target/<profile>/examples/conformance`, which `cargo test` builds.
fn example() -> PathBuf {
    kplug_testenv::workspace_binary("examples/conformance")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_sdk_passes_the_conformance_kit_and_the_shared_cases() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        socket_dir: dir.path().join("sockets"),
        command: vec![example().display().to_string()],
        only: None,
        cases: Some(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/conformance/cases.json"
        ))),
        only_cases: Vec::new(),
        start_timeout: Duration::from_secs(30),
    };
    let outcomes = kplug_conformance::run(&options).await.unwrap();
    let text = report::text("examples/conformance", &outcomes);
    assert!(report::passed(&outcomes), "{text}");
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o.verdict, Verdict::Pass(_))),
        "every check applies to the conformance plugin, cases included:\n{text}"
    );
}
