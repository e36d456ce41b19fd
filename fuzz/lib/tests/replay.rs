//! Every committed seed (`fuzz/corpus/<target>/seed-*`) and regression input
//! (`fuzz/regressions/<target>/*`) through its target's function, once, on
//! stable Rust: what `make fuzz` replays before it fuzzes, as an ordinary
//! test in `make test`. The timed fuzzing itself (`make fuzz`, nightly,
//! cargo-fuzz) runs apart from CI.

use std::collections::BTreeSet;
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use kplug_fuzz::targets::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the fuzz directory")
}

/// The files of `dir`, sorted; none if it does not exist. Only `seed-*`
/// files of a corpus are committed: the rest are libFuzzer's own
/// additions, which a developer's `make fuzz` may have left there.
fn inputs(dir: &Path, only_seeds: bool) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("reading a corpus directory").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !only_seeds
                || p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_target_of_fuzz_cargo_toml_has_a_function() {
    let manifest =
        fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("reading fuzz/Cargo.toml");
    let bins: BTreeSet<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|name| *name != "kplug-fuzz-targets")
        .collect();
    let functions: BTreeSet<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        bins, functions,
        "fuzz/Cargo.toml's [[bin]]s and kplug_fuzz::targets::TARGETS differ"
    );
}

#[test]
fn every_committed_seed_and_regression_passes_its_target() {
    // The panics are collected and reported together below, not printed one
    // by one as they happen.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failures = Vec::new();
    let mut counts = Vec::new();
    for (name, target) in TARGETS {
        let seeds = inputs(&fuzz_dir().join("corpus").join(name), true);
        let regressions = inputs(&fuzz_dir().join("regressions").join(name), false);
        assert!(
            !seeds.is_empty(),
            "fuzz/corpus/{name} has no seed-* input: run fuzz/make-seeds.py"
        );
        for path in seeds.iter().chain(&regressions) {
            let data = fs::read(path).expect("reading a fuzz input");
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&data))) {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "(a panic without a message)".to_owned());
                failures.push(format!("{name}: {}: {message}", path.display()));
            }
        }
        counts.push(format!(
            "{name}: {} seeds, {} regressions",
            seeds.len(),
            regressions.len()
        ));
    }
    std::panic::set_hook(hook);
    kplug_fuzz::confinement::remove_tree();
    println!("replayed {}", counts.join("; "));
    assert!(
        failures.is_empty(),
        "{} input(s) broke an invariant (reproduce with KPLUG_FUZZ_DEBUG=1, see fuzz/README.md):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
