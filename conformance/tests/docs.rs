//! docs/plugin-authors.md lists every check the kit has, and no other.

use kplug_conformance::checks::CHECKS;

#[test]
fn the_plugin_authors_page_lists_every_check() {
    let page = include_str!("../../docs/plugin-authors.md");
    let listed: Vec<&str> = page
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once("` | ").map(|(name, _)| name))
        .filter(|name| !name.starts_with("--"))
        .collect();
    let known: Vec<&str> = CHECKS.iter().map(|c| c.name).collect();
    assert_eq!(
        listed, known,
        "the checks table of docs/plugin-authors.md, in run order"
    );
}
