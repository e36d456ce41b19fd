//! The report: one line per check for people, and JUnit XML for CI.

use std::fmt::Write as _;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::checks::Verdict;
use crate::kit::Outcome;

/// Whether every required check passed (skips do not fail a run).
pub fn passed(outcomes: &[Outcome]) -> bool {
    outcomes
        .iter()
        .all(|o| !o.check.required || !matches!(o.verdict, Verdict::Fail(_)))
}

/// The human-readable report: a line per check, the rule under each
/// failure, and a summary.
pub fn text(plugin: &str, outcomes: &[Outcome]) -> String {
    let mut out = format!(
        "kplug-conformance ({}) against: {plugin}\n\n",
        kplug_proto::PROTOCOL
    );
    let (mut pass, mut fail, mut skip) = (0, 0, 0);
    for o in outcomes {
        let (mark, detail) = match &o.verdict {
            Verdict::Pass(seen) => {
                pass += 1;
                ("PASS", seen)
            }
            Verdict::Fail(why) => {
                fail += 1;
                ("FAIL", why)
            }
            Verdict::Skip(why) => {
                skip += 1;
                ("SKIP", why)
            }
        };
        let _ = writeln!(
            out,
            "{mark} {:<18} {:>6.2} s  {}",
            o.check.name,
            o.took.as_secs_f64(),
            indent(detail)
        );
        if matches!(o.verdict, Verdict::Fail(_)) {
            let _ = writeln!(out, "     rule: {}", o.check.rule);
        }
    }
    let _ = write!(
        out,
        "\n{} checks: {pass} passed, {fail} failed, {skip} skipped\n",
        outcomes.len()
    );
    out
}

/// Continuation lines of a multi-line detail, under the first.
fn indent(detail: &str) -> String {
    detail.replace('\n', "\n       | ")
}

/// The outcomes as JUnit XML: one test suite per check suite.
///
/// # Errors
/// When the XML cannot be written.
pub fn junit(plugin: &str, outcomes: &[Outcome]) -> Result<String, quick_junit::SerializeError> {
    let mut report = Report::new("kplug-conformance");
    let mut suites: Vec<TestSuite> = Vec::new();
    for o in outcomes {
        let mut status = match &o.verdict {
            Verdict::Pass(_) => TestCaseStatus::success(),
            Verdict::Fail(_) => TestCaseStatus::non_success(NonSuccessKind::Failure),
            Verdict::Skip(_) => TestCaseStatus::skipped(),
        };
        match &o.verdict {
            Verdict::Pass(_) => {}
            Verdict::Fail(why) => {
                status.set_message(why.as_str());
                status.set_description(format!("rule: {}", o.check.rule));
            }
            Verdict::Skip(why) => {
                status.set_message(why.as_str());
            }
        }
        let mut case = TestCase::new(o.check.name, status);
        case.set_classname(format!("{plugin}.{}", o.check.suite));
        case.set_time(o.took);
        if let Verdict::Pass(seen) = &o.verdict {
            case.set_system_out(seen.as_str());
        }
        match suites.iter_mut().find(|s| s.name.as_str() == o.check.suite) {
            Some(suite) => {
                suite.add_test_case(case);
            }
            None => {
                let mut suite = TestSuite::new(o.check.suite);
                suite.add_test_case(case);
                suites.push(suite);
            }
        }
    }
    report.add_test_suites(suites);
    report.to_string()
}
