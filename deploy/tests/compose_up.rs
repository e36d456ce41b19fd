//! `docker compose up` of `compose.yaml`, for real, the way a user runs it:
//! the commands of docs/deploy.md's compose quick start are read from the
//! page and run word for word, in order, from the repository root. Between
//! the quick start's last command and its `docker compose down -v`, the test
//! checks what a user would rely on:
//! - the walkthrough's `users` table is Ready on MariaDB, and a table per
//!   other implementation converges on PostgreSQL and SQLite (every plugin
//!   and database of the stack is exercised);
//! - the operator's `/readyz`, published on 127.0.0.1:8080, answers 200;
//! - the MariaDB plugin's process, SIGKILLed from the host, comes back by the
//!   container's restart policy, registers again, and a table created right
//!   after the kill converges on it.
//!
//! Then `down -v` must leave nothing: no container, volume or network of the
//! project, and nothing on the machine (processes, mounts, network
//! interfaces and namespaces, iptables rules, sysctls; `HostSnapshot`); and
//! no packet may have left the machine meanwhile (`Egress`).
//!
//! Needs the Docker engine with Compose v2 and the images and stand-ins of
//! `make images`; without them it fails, saying so.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario, top to bottom, with its checks beside its steps"
)]

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::{Duration, Instant};

use kplug_deploy_tests::docs::{self, sh};
use kplug_deploy_tests::http;
use kplug_deploy_tests::repo_root;
use kplug_testenv::{Egress, HostSnapshot};
use serde_json::Value;

/// compose.yaml's `name:`.
const PROJECT: &str = "kplug";
/// Where compose.yaml publishes the operator's HTTP port.
const OPERATOR_PORT: u16 = 8080;
const DOWN: &str = "docker compose down -v";

fn docker() -> Command {
    Command::new(std::env::var("DOCKER").unwrap_or_else(|_| "docker".to_owned()))
}

/// The quick start of docs/deploy.md, one command per line.
fn quick_start() -> Vec<String> {
    let commands = docs::commands("docs/deploy.md", "Local: `compose.yaml`");
    assert!(
        commands
            .first()
            .is_some_and(|c| c.starts_with("docker compose up"))
            && commands.last().is_some_and(|c| c == DOWN),
        "docs/deploy.md's compose quick start must start with `docker compose up` and end \
         with `{DOWN}`: {commands:#?}"
    );
    commands
}

/// The project's containers, volumes and networks that exist now, one line
/// each (`container kplug-operator-1` ...).
fn project_resources() -> Vec<String> {
    let label = format!("label=com.docker.compose.project={PROJECT}");
    let mut found = Vec::new();
    for (what, args) in [
        ("container", vec!["ps", "-a", "--format", "{{.Names}}"]),
        ("volume", vec!["volume", "ls", "--format", "{{.Name}}"]),
        ("network", vec!["network", "ls", "--format", "{{.Name}}"]),
    ] {
        let output = docker()
            .args(&args)
            .args(["--filter", &label])
            .output()
            .unwrap();
        assert!(output.status.success(), "docker {args:?} failed");
        found.extend(
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .map(|name| format!("{what} {name}")),
        );
    }
    found
}

/// Takes the stack down when dropped, so that a failing test leaves nothing
/// running; the test itself takes it down with the docs' own command.
struct Stack {
    up: bool,
}

impl Drop for Stack {
    fn drop(&mut self) {
        if self.up {
            let _ = docker()
                .args(["compose", "down", "-v", "--remove-orphans"])
                .current_dir(repo_root())
                .status();
        }
    }
}

/// The object as JSON, through the stack's own kubectl.
fn table(name: &str) -> Value {
    let printed = sh(
        &format!("docker compose run --rm kubectl get databasetable {name} -o json"),
        None,
    );
    serde_json::from_str(&printed.stdout).unwrap_or_else(|e| panic!("{e}: {}", printed.all))
}

fn ready_on(name: &str, implementation: &str) {
    sh(
        &format!(
            "docker compose run --rm kubectl wait --for=condition=Ready databasetable/{name} \
             --timeout=120s"
        ),
        None,
    );
    let object = table(name);
    assert_eq!(
        object["status"]["implementation"], implementation,
        "{name} is Ready, but not on {implementation}: {:#}",
        object["status"]
    );
}

fn apply_table(name: &str, implementation: &str) {
    let manifest = format!(
        "apiVersion: myorg.org/v1alpha1\nkind: DatabaseTable\nmetadata:\n  name: {name}\nspec:\n  \
         serverName: authorization-cluster\n  preferredImplementation: {implementation}\n  \
         columns:\n  - name: id\n    type: uint64\n"
    );
    sh(
        "docker compose run --rm -T kubectl apply -f -",
        Some(&manifest),
    );
}

/// The container of a compose service: its id.
fn container_of(service: &str) -> String {
    let printed = sh(&format!("docker compose ps -q {service}"), None);
    let id = printed.stdout.trim();
    assert!(!id.is_empty(), "no container for the {service} service");
    id.to_owned()
}

fn inspect(id: &str, format: &str) -> String {
    let output = docker()
        .args(["inspect", "-f", format, id])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn registrations(service: &str) -> usize {
    sh(&format!("docker compose logs --no-color {service}"), None)
        .all
        .matches("registered with the operator")
        .count()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> Option<String>) {
    let deadline = Instant::now() + limit;
    let mut last = String::new();
    while Instant::now() < deadline {
        match done() {
            None => return,
            Some(state) => last = state,
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("{what} did not happen within {limit:?}; last seen: {last}");
}

#[test]
fn the_compose_quick_start_converges_survives_a_plugin_kill_and_down_leaves_nothing() {
    let commands = quick_start();
    let engine = docker().args(["compose", "version"]).output();
    assert!(
        engine.as_ref().is_ok_and(|o| o.status.success()),
        "`docker compose version` failed ({engine:?}); `make images` starts the Docker \
         engine and builds the Compose plugin"
    );
    let leftovers = project_resources();
    assert!(
        leftovers.is_empty(),
        "a compose project `{PROJECT}` is already on this machine ({leftovers:?}); take it \
         down first: docker compose down -v"
    );
    let before = HostSnapshot::take();
    let egress = Egress::now();
    let mut stack = Stack { up: true };

    let mut seen = String::new();
    for command in commands.iter().filter(|c| *c != DOWN) {
        let output = sh(command, None).all;
        let _ = writeln!(seen, "$ {command}\n{output}");
        if command.starts_with("docker compose run --rm kubectl get") {
            let row = output
                .lines()
                .find(|line| line.starts_with("users "))
                .unwrap_or_else(|| panic!("no `users` row in:\n{output}"));
            assert!(
                row.contains("MariaDB") && row.contains("True"),
                "users is not Ready on MariaDB: {row}"
            );
        }
        if command.starts_with("curl") {
            // What the user sees: the operator's metrics. How many plugins
            // have registered by then depends on how long each database
            // took to become healthy (the Python plugin waits for
            // PostgreSQL's first start); all three are waited for below.
            assert!(
                http::metric(&output, "kplug_plugins_registered").is_some(),
                "no kplug_plugins_registered in the metrics:\n{output}"
            );
        }
    }
    wait_for(
        "all three plugins registered",
        Duration::from_secs(120),
        || {
            let metrics = http::get(IpAddr::V4(Ipv4Addr::LOCALHOST), OPERATOR_PORT, "/metrics");
            let registered = metrics
                .as_ref()
                .ok()
                .and_then(|(_, body)| http::metric(body, "kplug_plugins_registered"));
            (registered != Some(3.0)).then(|| format!("{metrics:?}"))
        },
    );
    assert!(
        seen.contains("registered with the operator"),
        "the MariaDB plugin's log shows no registration:\n{seen}"
    );

    // The operator is ready once its caches synced (compose publishes the
    // port through the kube-api service, whose network it shares).
    let (code, body) = http::get(IpAddr::V4(Ipv4Addr::LOCALHOST), OPERATOR_PORT, "/readyz")
        .unwrap_or_else(|e| panic!("/readyz: {e}"));
    assert_eq!(code, 200, "/readyz: {body}");

    // Every other implementation, through its own plugin and database.
    apply_table("orders-pg", "PostgreSQL");
    apply_table("orders-lite", "SQLite");
    ready_on("users", "MariaDB");
    ready_on("orders-pg", "PostgreSQL");
    ready_on("orders-lite", "SQLite");

    // A crash of the MariaDB plugin: SIGKILL its process from the host.
    let plugin = container_of("mariadb-plugin");
    let pid = inspect(&plugin, "{{.State.Pid}}");
    let registered = registrations("mariadb-plugin");
    let killed = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    assert!(killed.success(), "kill -KILL {pid}");
    apply_table("after-kill", "MariaDB");
    wait_for(
        "the MariaDB plugin's restart by its restart policy",
        Duration::from_secs(60),
        || {
            let state = inspect(
                &plugin,
                "{{.RestartCount}} {{.State.Running}} {{.State.Pid}}",
            );
            let mut fields = state.split(' ');
            let restarted = fields
                .next()
                .is_some_and(|n| n.parse::<u32>().unwrap_or(0) >= 1);
            let running = fields.next() == Some("true");
            let new_pid = fields.next().is_some_and(|p| p != pid && p != "0");
            (!(restarted && running && new_pid)).then_some(state)
        },
    );
    wait_for(
        "the restarted MariaDB plugin's registration",
        Duration::from_secs(60),
        || {
            let now = registrations("mariadb-plugin");
            (now <= registered).then(|| format!("{now} registrations, {registered} before"))
        },
    );
    ready_on("after-kill", "MariaDB");
    ready_on("users", "MariaDB");

    // Down, word for word, leaves nothing.
    sh(DOWN, None);
    stack.up = false;
    let left = project_resources();
    assert!(left.is_empty(), "`{DOWN}` left {left:#?}");
    let leaks = before.leaks(&HostSnapshot::take());
    assert!(
        leaks.is_empty(),
        "`{DOWN}` left on the machine:\n{}",
        leaks.join("\n")
    );
    // Nothing the stack did reached beyond the machine (the services only
    // look up each other's names, which Docker's own DNS answers).
    let sent = egress.sent_since();
    assert!(
        sent.is_empty(),
        "packets left the machine through {:?} during the compose test (or another \
         process on this machine sent them meanwhile): {}",
        egress.interfaces(),
        sent.join(", ")
    );
}
