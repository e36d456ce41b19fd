//! The Dockerfiles, without a container engine: each passes hadolint (the
//! plugin-author template in docs/plugin-images.md too), is multi-stage,
//! pinned and non-root; everything it copies exists in the build context
//! and is not excluded by .dockerignore; and what it builds, builds: the
//! copied files alone form a workspace whose Cargo.lock is up to date and
//! whose `-p` package has the binary the image copies, the Python plugin
//! installs from exactly the copied files into a fresh virtualenv, and the
//! Go module of kube-testenv resolves from them.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kplug_deploy_tests::dockerfile::{self, Dockerfile, Stage};
use kplug_deploy_tests::dockerignore::DockerIgnore;
use kplug_deploy_tests::repo_root;
use kplug_deploy_tests::tools::{hadolint, run};
use serde_json::Value;

/// Every Dockerfile of the repository, by what it builds. The Rust images
/// are the targets of one Dockerfile, so the workspace compiles once.
const RUST_DOCKERFILE: &str = "Dockerfile";
const RUST_TARGETS: [&str; 5] = [
    "kplug-operator",
    "sqlite-plugin",
    "mariadb-plugin",
    "postgresql-server-plugin",
    "backup-plugin",
];
const PYTHON_IMAGE: &str = "examples/database-table/postgresql-plugin/Dockerfile";
const GO_IMAGE: &str = "deploy/compose/kube-testenv.Dockerfile";
/// docs/deploy.md's worked example of a plugin image of your own.
const HELLO_PYTHON_IMAGE: &str = "examples/hello/python.Dockerfile";
/// The stand-in base images (deploy/images/standins.sh), linted like the rest.
const STANDINS: [&str; 7] = [
    "deploy/images/standins/rust.Dockerfile",
    "deploy/images/standins/python.Dockerfile",
    "deploy/images/standins/distroless-cc.Dockerfile",
    "deploy/images/standins/golang.Dockerfile",
    "deploy/images/standins/kubectl.Dockerfile",
    "deploy/images/standins/postgres.Dockerfile",
    "deploy/images/standins/mariadb.Dockerfile",
];

/// What `make images` builds to seed kube-testenv's Go build cache.
const GO_CACHE_SEED: &str = "deploy/images/go-cache-seed.Dockerfile";

fn all_dockerfiles() -> Vec<&'static str> {
    [RUST_DOCKERFILE, PYTHON_IMAGE, GO_IMAGE, HELLO_PYTHON_IMAGE].into()
}

/// The images a Dockerfile makes: its named target stages for the Rust
/// Dockerfile, else its last stage.
fn images_of<'a>(path: &str, file: &'a Dockerfile) -> Vec<(String, &'a Stage)> {
    if path != RUST_DOCKERFILE {
        return vec![(path.to_owned(), file.image())];
    }
    RUST_TARGETS
        .iter()
        .map(|target| {
            let stage = file
                .target(target)
                .unwrap_or_else(|| panic!("{path} has no target stage {target}"));
            (format!("{path} --target {target}"), stage)
        })
        .collect()
}

fn read(path: &str) -> String {
    let full = repo_root().join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| {
        panic!(
            "{path} cannot be read ({e}); every image of the repository needs its Dockerfile \
             (if the component is not written yet, this test fails until it is)"
        )
    })
}

fn parse(path: &str) -> Dockerfile {
    dockerfile::parse(&read(path)).unwrap_or_else(|e| panic!("{path}: {e:#}"))
}

/// The Dockerfile templates in docs/plugin-images.md (its ```dockerfile
/// blocks).
fn documented_templates() -> Vec<String> {
    let doc = std::fs::read_to_string(repo_root().join("docs/plugin-images.md")).unwrap();
    let blocks: Vec<String> = doc
        .split("```dockerfile\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap().to_owned())
        .collect();
    assert!(
        !blocks.is_empty(),
        "docs/plugin-images.md has ```dockerfile blocks"
    );
    blocks
}

// --- lint ----------------------------------------------------------------------

fn hadolint_text(text: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("Dockerfile");
    std::fs::write(&file, text)?;
    hadolint_file(&file)
}

/// Any finding fails, style included; a justified exception is an inline
/// `# hadolint ignore=DLxxxx` with a comment saying why.
fn hadolint_file(file: &Path) -> anyhow::Result<()> {
    run(Command::new(hadolint())
        .args(["--no-color", "--failure-threshold", "style"])
        .arg(file))
    .map(drop)
}

#[test]
fn every_dockerfile_passes_hadolint() {
    let mut failures = Vec::new();
    for path in all_dockerfiles()
        .into_iter()
        .chain(STANDINS)
        .chain([GO_CACHE_SEED])
    {
        let file = repo_root().join(path);
        if !file.is_file() {
            failures.push(format!("{path}: missing"));
        } else if let Err(e) = hadolint_file(&file) {
            failures.push(format!("{path}: {e:#}"));
        }
    }
    for (index, template) in documented_templates().iter().enumerate() {
        if let Err(e) = hadolint_text(template) {
            failures.push(format!(
                "template {} of docs/plugin-images.md: {e:#}",
                index + 1
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// hadolint does find problems (so a pass above means something).
#[test]
fn hadolint_refuses_a_bad_dockerfile() {
    let err =
        hadolint_text("FROM debian\nRUN apt-get update && apt-get install -y curl\nUSER root\n")
            .expect_err("an untagged image, unpinned apt packages and root");
    let message = format!("{err:#}");
    for rule in ["DL3006", "DL3008", "DL3002"] {
        assert!(message.contains(rule), "{rule} in {message}");
    }
}

// --- shape -----------------------------------------------------------------------

/// Problems of the file as a whole: one stage only, a base not pinned, or a
/// `# syntax=` directive (it makes BuildKit pull a frontend image, which
/// fails where no registry is reachable and is not needed: the built-in
/// frontend knows every instruction used here).
fn check_file(text: &str, file: &Dockerfile) -> Vec<String> {
    let mut problems = Vec::new();
    if file.stages.len() < 2 {
        problems.push("not multi-stage".to_owned());
    }
    if let Some(line) = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .find(|l| l.trim_start_matches('#').trim().starts_with("syntax="))
    {
        problems.push(format!("`{line}`: a frontend image would be pulled"));
    }
    let stage_names: Vec<&str> = file
        .stages
        .iter()
        .filter_map(|s| s.name.as_deref())
        .collect();
    for stage in &file.stages {
        if stage_names.contains(&stage.image.as_str()) {
            continue;
        }
        let tag = stage
            .image
            .rsplit_once(':')
            .map(|(_, tag)| tag)
            .filter(|tag| !tag.contains('/'));
        if !matches!(tag, Some(tag) if tag != "latest") && !stage.image.contains('@') {
            problems.push(format!("{} is not pinned by tag", stage.image));
        }
    }
    problems
}

/// Problems of one image (a final stage): root, no exec-form ENTRYPOINT, or
/// (for a kplug container) no socket dir.
fn check_image(path: &str, image: &Stage) -> Vec<String> {
    let mut problems = Vec::new();
    match image.last("USER").map(|u| u.args.as_str()) {
        Some(user) => {
            let uid = user.split(':').next().unwrap_or_default();
            if uid.parse::<u32>().map_or(true, |uid| uid == 0) {
                problems.push(format!("USER {user}: not a numeric non-root uid"));
            }
        }
        None => problems.push("the image sets no USER".to_owned()),
    }
    match image.last("ENTRYPOINT") {
        Some(entrypoint) if entrypoint.args.starts_with('[') => {}
        _ => problems.push("no exec-form ENTRYPOINT".to_owned()),
    }
    if path != GO_IMAGE
        && !image
            .env()
            .contains(&("KPLUG_SOCKET_DIR".to_owned(), "/var/run/kplug".to_owned()))
    {
        problems.push("does not set KPLUG_SOCKET_DIR=/var/run/kplug".to_owned());
    }
    problems
}

#[test]
fn images_are_multi_stage_pinned_and_non_root() {
    let mut failures = Vec::new();
    for path in all_dockerfiles() {
        let file = parse(path);
        let problems = check_file(&read(path), &file);
        if !problems.is_empty() {
            failures.push(format!("{path}: {}", problems.join("; ")));
        }
        for (image, stage) in images_of(path, &file) {
            let problems = check_image(path, stage);
            if !problems.is_empty() {
                failures.push(format!("{image}: {}", problems.join("; ")));
            }
        }
    }
    for (index, text) in documented_templates().iter().enumerate() {
        let template = dockerfile::parse(text).expect("the template parses");
        let mut problems = check_file(text, &template);
        problems.extend(check_image("docs/plugin-images.md", template.image()));
        if !problems.is_empty() {
            failures.push(format!(
                "template {} of docs/plugin-images.md: {}",
                index + 1,
                problems.join("; ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The shape checks do find a `# syntax=` line, an unpinned base and root.
#[test]
fn the_shape_checks_find_a_syntax_line_an_unpinned_base_and_root() {
    let text = "# syntax=docker/dockerfile:1\nFROM a AS build\nFROM b:1\nUSER 0\n";
    let file = dockerfile::parse(text).unwrap();
    let problems = check_file(text, &file).join("\n");
    assert!(problems.contains("frontend image"), "{problems}");
    assert!(problems.contains("a is not pinned"), "{problems}");
    let problems = check_image("test", file.image()).join("\n");
    assert!(problems.contains("USER 0"), "{problems}");
    assert!(problems.contains("ENTRYPOINT"), "{problems}");
}

// --- the build context -------------------------------------------------------------

fn dockerignore() -> DockerIgnore {
    DockerIgnore::parse(&std::fs::read_to_string(repo_root().join(".dockerignore")).unwrap())
}

/// The context paths a COPY source names: itself, or what its glob matches
/// (a `*` in the last component only, which is all the Dockerfiles use).
fn expand(source: &str) -> Vec<String> {
    let source = source.trim_start_matches("./");
    let Some((dir, pattern)) = source.rsplit_once('/').filter(|(_, p)| p.contains('*')) else {
        return vec![source.to_owned()];
    };
    let ignore = DockerIgnore::parse(pattern);
    let Ok(entries) = std::fs::read_dir(repo_root().join(dir)) else {
        return Vec::new();
    };
    let mut matched: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| ignore.excludes(name))
        .map(|name| format!("{dir}/{name}"))
        .collect();
    matched.sort();
    matched
}

fn check_copies(path: &str, file: &Dockerfile) -> Vec<String> {
    let ignore = dockerignore();
    let mut problems = Vec::new();
    let mut earlier_stages = BTreeSet::new();
    for stage in &file.stages {
        let copies = Dockerfile {
            stages: vec![stage.clone()],
        }
        .copies()
        .unwrap_or_else(|e| panic!("{path}: {e:#}"));
        for copy in copies {
            if let Some(from) = &copy.from {
                if !earlier_stages.contains(from.as_str()) {
                    problems.push(format!(
                        "line {}: COPY --from={from}: no earlier stage of that name",
                        copy.line
                    ));
                }
                continue;
            }
            for source in &copy.sources {
                let paths = expand(source);
                if paths.is_empty() {
                    problems.push(format!("line {}: {source} matches nothing", copy.line));
                }
                for relative in paths {
                    if !repo_root().join(&relative).exists() {
                        problems.push(format!("line {}: {relative} does not exist", copy.line));
                    } else if ignore.excludes(&relative) {
                        problems.push(format!(
                            "line {}: {relative} is excluded by .dockerignore",
                            copy.line
                        ));
                    }
                }
            }
        }
        if let Some(name) = &stage.name {
            earlier_stages.insert(name.clone());
        }
    }
    problems
}

/// What git ignores (build outputs, virtualenvs, generated stubs) is kept
/// out of the build context too. One such file in a copied directory makes
/// its COPY layer new whenever a build rewrites it (`make test` builds the
/// SDKs beside the background `make images`), and with it the release
/// build of the whole workspace. Checked against what the tree holds now:
/// in `make test` the SDKs' builds have run.
#[test]
fn what_git_ignores_is_not_in_the_build_context() {
    let output = Command::new("git")
        .args([
            "ls-files",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ])
        .current_dir(repo_root())
        .output()
        .expect("git ls-files (git is needed to list what it ignores)");
    assert!(
        output.status.success(),
        "git ls-files: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let ignore = dockerignore();
    let leaked: Vec<&str> = std::str::from_utf8(&output.stdout)
        .unwrap()
        .lines()
        .map(|path| path.trim_end_matches('/'))
        .filter(|path| !ignore.excludes(path))
        .collect();
    assert!(
        leaked.is_empty(),
        "git ignores these, but .dockerignore lets them into every image's build context; add \
         them to .dockerignore:\n  {}",
        leaked.join("\n  ")
    );
}

#[test]
fn everything_copied_exists_in_the_build_context() {
    let mut failures = Vec::new();
    for path in all_dockerfiles() {
        let problems = check_copies(path, &parse(path));
        if !problems.is_empty() {
            failures.push(format!("{path}:\n  {}", problems.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The context check finds a missing path and an excluded one.
#[test]
fn the_context_check_finds_missing_and_excluded_paths() {
    let file = dockerfile::parse(
        "FROM a:1 AS build\nCOPY no-such-dir x\nCOPY target/debug x\nCOPY --from=nowhere /a /b\nFROM b:1\n",
    )
    .unwrap();
    let problems = check_copies("test", &file).join("\n");
    assert!(
        problems.contains("no-such-dir does not exist"),
        "{problems}"
    );
    assert!(problems.contains("target/debug is excluded"), "{problems}");
    assert!(problems.contains("--from=nowhere"), "{problems}");
}

/// Copies what the build stages of `file` copy from the context into `dest`
/// (mirroring the context layout, honouring .dockerignore), so a build step
/// can be tried against exactly those files.
fn materialize(file: &Dockerfile, dest: &Path) {
    let ignore = dockerignore();
    for copy in file.copies().unwrap() {
        if copy.from.is_some() {
            continue;
        }
        for source in &copy.sources {
            for relative in expand(source) {
                copy_tree(&repo_root(), &relative, dest, &ignore);
            }
        }
    }
}

fn copy_tree(root: &Path, relative: &str, dest: &Path, ignore: &DockerIgnore) {
    if ignore.excludes(relative) {
        return;
    }
    let from = root.join(relative);
    let to = dest.join(relative);
    let meta =
        std::fs::symlink_metadata(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    if meta.is_dir() {
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let name = entry.unwrap().file_name();
            copy_tree(
                root,
                &format!("{relative}/{}", name.to_string_lossy()),
                dest,
                ignore,
            );
        }
    } else if meta.is_file() {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
}

// --- what is built -------------------------------------------------------------------

/// Cargo, run from this test as from a shell: without the variables Cargo
/// sets for a test process (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...).
/// Build scripts track some of them (ring's `rerun-if-env-changed`), and
/// Cargo compares what it inherits: with this test's values, the nested
/// `cargo check` re-ran ring's build script in the shared target dir, and
/// the next ordinary build recompiled ring, rustls and everything above
/// them (80 s of a cold CI run, in its longest path).
fn cargo() -> Command {
    let mut command = Command::new(env!("CARGO"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo_for_tests = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix));
        if set_by_cargo_for_tests {
            command.env_remove(&*name);
        }
    }
    command
}

/// The workspace's packages: (name, manifest directory relative to the
/// root, bin target names).
fn workspace_packages() -> Vec<(String, String, BTreeSet<String>)> {
    let output = run(cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(repo_root()))
    .expect("cargo metadata");
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let root = repo_root();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
            let dir = manifest
                .parent()
                .unwrap()
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let bins = p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["kind"].as_array().unwrap().contains(&"bin".into()))
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            (p["name"].as_str().unwrap().to_owned(), dir, bins)
        })
        .collect()
}

/// The packages of the Rust Dockerfile's `cargo build ... -p <package>...`
/// and the binaries its build step installs from `target/release/`.
fn packages_and_binaries(file: &Dockerfile) -> (Vec<String>, Vec<String>) {
    let path = RUST_DOCKERFILE;
    let build = file
        .run_commands()
        .into_iter()
        .find(|c| c.contains("cargo build"))
        .unwrap_or_else(|| panic!("{path} runs no cargo build"));
    let words: Vec<&str> = build.split_whitespace().collect();
    for flag in ["--release", "--locked"] {
        assert!(
            words.contains(&flag),
            "{path}: cargo build without {flag}: {build}"
        );
    }
    let packages: Vec<String> = words
        .windows(2)
        .filter(|w| w[0] == "-p" || w[0] == "--package")
        .map(|w| w[1].to_owned())
        .collect();
    assert!(
        !packages.is_empty(),
        "{path}: cargo build without -p: {build}"
    );
    let binaries: Vec<String> = words
        .iter()
        .filter_map(|w| w.strip_prefix("target/release/"))
        .map(str::to_owned)
        .collect();
    assert!(
        !binaries.is_empty(),
        "{path}: nothing taken from target/release: {build}"
    );
    (packages, binaries)
}

/// The binary a target stage copies from the build stage into
/// /usr/local/bin (its ENTRYPOINT).
fn binary_of_target(stage: &Stage) -> Option<String> {
    Dockerfile {
        stages: vec![stage.clone()],
    }
    .copies()
    .unwrap()
    .into_iter()
    .filter(|c| c.from.as_deref() == Some("build") && c.dest.starts_with("/usr/local/bin/"))
    .find_map(|c| c.sources.first()?.rsplit('/').next().map(str::to_owned))
}

/// The Rust Dockerfile copies the whole workspace (cargo needs every member
/// to load it) and builds, in one `cargo build`, the member packages whose
/// binaries its targets take; the copied files alone load as a workspace
/// with an up-to-date Cargo.lock (`cargo metadata --locked`; it may fetch
/// crates.io packages that only other platforms use, which the build did
/// not); and those packages compile together, as in the image, with their
/// binaries linked by the workspace build (in the debug profile: the machine
/// is small, and release adds nothing to the question "does it build").
#[test]
fn rust_images_build_workspace_packages_from_the_copied_files() {
    let path = RUST_DOCKERFILE;
    let packages = workspace_packages();
    let mut failures = Vec::new();
    let file = parse(path);
    let (built, installed) = packages_and_binaries(&file);
    let copied: Vec<String> = file
        .copies()
        .unwrap()
        .into_iter()
        .filter(|c| c.from.is_none())
        .flat_map(|c| c.sources)
        .map(|s| s.trim_start_matches("./").trim_end_matches('/').to_owned())
        .collect();
    for needed in ["Cargo.toml", "Cargo.lock"] {
        if !copied.iter().any(|c| c == needed) {
            failures.push(format!("{path}: does not copy {needed}"));
        }
    }
    for (name, dir, _) in &packages {
        if !copied
            .iter()
            .any(|c| dir == c || dir.starts_with(&format!("{c}/")))
        {
            failures.push(format!(
                "{path}: does not copy {dir}, the workspace member {name} \
                 (add `COPY {dir} {dir}`)"
            ));
        }
    }
    for package in &built {
        if !packages.iter().any(|(name, _, _)| name == package) {
            failures.push(format!("{path}: -p {package} is not a workspace package"));
        }
    }
    let mut binaries = Vec::new();
    for (image, stage) in images_of(path, &file) {
        let Some(binary) = binary_of_target(stage) else {
            failures.push(format!("{image}: copies no binary from the build stage"));
            continue;
        };
        if !installed.contains(&binary) {
            failures.push(format!(
                "{image}: {binary} is not installed from target/release by the build step"
            ));
        }
        if !packages
            .iter()
            .any(|(name, _, bins)| built.contains(name) && bins.contains(&binary))
        {
            failures.push(format!(
                "{image}: no package of `cargo build -p {}` has the binary {binary}",
                built.join(" -p ")
            ));
        }
        binaries.push(binary);
    }
    let context = tempfile::tempdir().unwrap();
    materialize(&file, context.path());
    if let Err(e) = run(cargo()
        .args(["metadata", "--locked", "--format-version", "1"])
        .current_dir(context.path()))
    {
        failures.push(format!(
            "{path}: the copied files do not load as a workspace with an up-to-date \
             Cargo.lock: {e:#}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The packages together, as in the image build (cargo unifies features
    // over the packages of one build). `cargo check`, not `build`: it
    // type-checks them exactly as the image build compiles them, and keeps
    // its artifacts apart from the workspace build's (a `build -p` would
    // rebuild dependencies with other features in place, every time, for
    // everyone sharing target/).
    let mut check = cargo();
    check.args(["check", "--locked", "--bins"]);
    for package in &built {
        check.args(["-p", package]);
    }
    if let Err(e) = run(check.current_dir(repo_root())) {
        panic!("{built:?} do not build: {e:#}");
    }
    // Linked by the workspace build (`make build`, or `cargo test
    // --workspace`, which `make test` runs before this).
    for binary in &binaries {
        kplug_testenv::workspace_binary(binary);
    }
}

/// The Python plugin installs from exactly the files its Dockerfile copies,
/// with the same pip command, into a fresh virtualenv, and provides the
/// image's ENTRYPOINT command.
#[test]
fn the_python_image_installs_from_the_copied_files() {
    let file = parse(PYTHON_IMAGE);
    let build = &file.stages[0];
    let workdir = build
        .last("WORKDIR")
        .map(|w| w.args.clone())
        .expect("the build stage sets WORKDIR");
    let context = tempfile::tempdir().unwrap();
    materialize(&file, context.path());
    let install = file
        .run_commands()
        .into_iter()
        .find(|c| c.contains("pip install"))
        .expect("a pip install");
    let after = install.split("pip install").nth(1).unwrap();
    let requirements: Vec<&str> = after
        .split_whitespace()
        .take_while(|w| *w != "&&")
        .filter(|w| !w.starts_with('-'))
        .collect();
    assert!(
        requirements.iter().all(|r| r.starts_with("./")),
        "only paths of the context are installed: {requirements:?}"
    );

    let venv = context.path().join(".venv-image");
    run(Command::new("python3").arg("-m").arg("venv").arg(&venv)).expect("venv");
    let mut pip = Command::new(venv.join("bin/pip"));
    pip.args(["install", "--quiet", "--disable-pip-version-check"])
        .args(&requirements)
        .current_dir(context.path());
    // The build stage's ENV, with its WORKDIR mapped to the copy.
    for (key, value) in build.env() {
        pip.env(
            key,
            value.replace(&workdir, &context.path().to_string_lossy()),
        );
    }
    if let Err(e) = run(&mut pip) {
        panic!(
            "{PYTHON_IMAGE}: pip install of {requirements:?} from the copied files failed: {e:#}"
        );
    }
    let entrypoint = dockerfile::words(&file.image().last("ENTRYPOINT").unwrap().args).unwrap();
    assert!(
        venv.join("bin").join(&entrypoint[0]).is_file(),
        "{PYTHON_IMAGE}: ENTRYPOINT {} is not installed by the plugin",
        entrypoint[0]
    );
    run(Command::new(venv.join("bin/python"))
        .args(["-c", "import kplug, kplug._proto, kplug_postgresql_plugin"]))
    .expect("the SDK (with its generated stubs) and the plugin import");
}

/// kube-testenv's Go module is complete in the copied files: `go list
/// -deps` resolves every package from them, offline (the root Makefile's
/// `make testenv` builds the same files).
#[test]
fn the_kube_testenv_image_has_a_complete_go_module() {
    let file = parse(GO_IMAGE);
    let context = tempfile::tempdir().unwrap();
    materialize(&file, context.path());
    let module = context.path().join("testenv");
    let copied: Vec<String> = std::fs::read_dir(&module)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(copied.iter().any(|f| f == "main.go"), "{copied:?}");
    if let Err(e) = run(Command::new("go")
        .args(["list", "-deps", "-test=false", "."])
        .env("GOFLAGS", "-mod=readonly")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .current_dir(&module))
    {
        panic!("{GO_IMAGE}: the copied module does not resolve: {e:#}");
    }
}
