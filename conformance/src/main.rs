//! The `kplug-conformance` command.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use kplug_conformance::checks::{self, CHECKS};
use kplug_conformance::{Options, report};

/// Plays the kplug operator against one plugin and checks that it keeps the
/// kplug.v1 protocol: handshake, heartbeats, backoff, re-registration,
/// sockets, Probe, calls, SIGTERM → Unregister → drain → exit.
///
/// The kit serves registry.sock in --socket-dir, starts the plugin with
/// KPLUG_SOCKET_DIR (and KPLUG_HEARTBEAT_INTERVAL) set, and starts, signals
/// (its whole process group) and restarts it itself. Start the plugin
/// directly (exec, not a shell that forks it) so that it gets SIGTERM.
///
/// Exit status: 0 when every required check passed, 1 when one failed, 2
/// when the kit could not run.
#[derive(Debug, Parser)]
#[command(
    name = "kplug-conformance",
    version,
    after_help = "Examples:\n  kplug-conformance --socket-dir /tmp/kplug-check -- ./target/debug/examples/hello\n  kplug-conformance --socket-dir /tmp/kplug-check --only handshake,backoff -- python -m my_plugin\n  kplug-conformance --list\n  kplug-conformance --socket-dir /tmp/kplug-check --only cases --cases sidecar-sdk/conformance/cases.json --case 'mutate-*' --case get-info -- ./conformance-plugin"
)]
struct Args {
    /// Socket dir for the registry and the plugin (KPLUG_SOCKET_DIR);
    /// created when missing. Use one of its own: nothing else may serve
    /// registry.sock there.
    #[arg(long, value_name = "DIR", required_unless_present = "list")]
    socket_dir: Option<PathBuf>,

    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,

    /// Run only these checks (comma-separated names; see --list).
    #[arg(long, value_name = "CHECK", value_delimiter = ',', value_parser = check_name)]
    only: Vec<&'static str>,

    /// List the checks, their suites and rules, and exit.
    #[arg(long)]
    list: bool,

    /// The shared request/response cases to run against an SDK's
    /// conformance plugin (sidecar-sdk/conformance/cases.json); without it
    /// the `cases` check is skipped.
    #[arg(long, value_name = "FILE")]
    cases: Option<PathBuf>,

    /// Run only this case of the --cases file: its name, or a glob where
    /// `*` stands for any characters (mutate-*). Repeat it, or separate
    /// names with commas, for several; the selected cases still run in
    /// file order. A name that selects no case is an error.
    #[arg(
        long = "case",
        value_name = "NAME",
        value_delimiter = ',',
        requires = "cases"
    )]
    only_cases: Vec<String>,

    /// How long the plugin may take from start to its first heartbeat.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    start_timeout: f64,

    /// The command that starts the plugin, and its arguments.
    #[arg(last = true, value_name = "COMMAND", required_unless_present = "list")]
    command: Vec<String>,
}

fn check_name(name: &str) -> Result<&'static str, String> {
    checks::find(name).map(|c| c.name).ok_or_else(|| {
        let known: Vec<_> = CHECKS.iter().map(|c| c.name).collect();
        format!(
            "no check is called {name:?}; the checks are: {}",
            known.join(", ")
        )
    })
}

fn list() {
    for check in CHECKS {
        let required = if check.required {
            "required"
        } else {
            "optional"
        };
        println!(
            "{:<18} {:<13} {required}\n    {}",
            check.name, check.suite, check.rule
        );
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        list();
        return ExitCode::SUCCESS;
    }
    if !(args.start_timeout.is_finite() && args.start_timeout > 0.0) {
        eprintln!("kplug-conformance: --start-timeout must be a positive number of seconds");
        return ExitCode::from(2);
    }
    if !args.only_cases.is_empty() && !args.only.is_empty() && !args.only.contains(&"cases") {
        eprintln!(
            "kplug-conformance: --case selects cases, but --only does not run the cases check"
        );
        return ExitCode::from(2);
    }
    let options = Options {
        socket_dir: args.socket_dir.expect("required unless --list"),
        command: args.command,
        only: (!args.only.is_empty()).then(|| args.only.into_iter().collect::<BTreeSet<_>>()),
        cases: args.cases,
        only_cases: args.only_cases,
        start_timeout: Duration::from_secs_f64(args.start_timeout),
    };
    let plugin = options.command.join(" ");
    let selected = options.only.as_ref().map_or(CHECKS.len(), BTreeSet::len);
    eprintln!("kplug-conformance: running {selected} check(s) against `{plugin}` (about 10 s)...");
    let outcomes = match kplug_conformance::run(&options).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            eprintln!("kplug-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", report::text(&plugin, &outcomes));
    if let Some(file) = &args.junit {
        let written = report::junit(&plugin, &outcomes)
            .map_err(|e| e.to_string())
            .and_then(|xml| std::fs::write(file, xml).map_err(|e| e.to_string()));
        if let Err(e) = written {
            eprintln!("kplug-conformance: cannot write {}: {e}", file.display());
            return ExitCode::from(2);
        }
    }
    if report::passed(&outcomes) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(
            ["kplug-conformance", "--socket-dir", "/tmp/k"]
                .iter()
                .chain(args),
        )
    }

    #[test]
    fn the_arguments_are_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn case_is_repeatable_and_takes_comma_separated_names() {
        let args = parse(&[
            "--cases",
            "cases.json",
            "--case",
            "mutate-*",
            "--case",
            "get-info,probe-ready-at-start",
            "--",
            "plugin",
        ])
        .unwrap();
        assert_eq!(
            args.only_cases,
            ["mutate-*", "get-info", "probe-ready-at-start"]
        );
        let args = parse(&["--cases", "cases.json", "--", "plugin"]).unwrap();
        assert!(args.only_cases.is_empty());
    }

    #[test]
    fn case_needs_a_cases_file() {
        let e = parse(&["--case", "mutate-*", "--", "plugin"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        assert!(e.to_string().contains("--cases <FILE>"), "{e}");
    }
}
