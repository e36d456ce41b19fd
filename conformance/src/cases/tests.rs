use super::shape::status_json;
use super::*;

#[test]
fn values_compare_by_value() {
    assert!(same(
        &json!({"a": 1, "b": [1.0]}),
        &json!({"b": [1], "a": 1.0})
    ));
    assert!(!same(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    assert!(!same(&json!([1, 2]), &json!([2, 1])));
}

#[test]
fn a_reconcile_case_without_children_expects_none() {
    let expect = json!({"outcome": "OK"});
    let got = json!({"outcome": "OK", "message": "", "children": null});
    assert_eq!(compare("Reconcile", got, &expect), Ok(()));
    let got = json!({"outcome": "OK", "message": "", "children": []});
    assert!(compare("Reconcile", got, &expect).is_err());
}

#[test]
fn a_message_may_be_expected_in_part() {
    let expect = json!({"outcome": "FAILED", "message_contains": "boom"});
    let got = json!({"outcome": "FAILED", "message": "ValueError: boom", "children": null});
    assert_eq!(compare("Reconcile", got.clone(), &expect), Ok(()));
    let expect = json!({"outcome": "FAILED", "message": "boom"});
    assert!(
        compare("Reconcile", got, &expect)
            .unwrap_err()
            .contains("expected \"boom\"")
    );
}

#[test]
fn grpc_codes_are_named_as_in_the_cases() {
    assert_eq!(code_name(tonic::Code::InvalidArgument), "INVALID_ARGUMENT");
    assert_eq!(code_name(tonic::Code::Internal), "INTERNAL");
    let expect = json!({"grpc_code": "INTERNAL", "message_contains": "boom"});
    let got = json!({"grpc_code": "INTERNAL", "message": "ConformanceError: boom"});
    assert_eq!(compare("Validate", got, &expect), Ok(()));
}

fn file() -> Value {
    json!({"cases": [
        {"name": "get-info"}, {"name": "reconcile-children"},
        {"name": "mutate-patch"}, {"name": "reconcile-child-not-an-object"},
        {"name": "mutate-raise"},
    ]})
}

fn selected(patterns: &[&str]) -> Result<Vec<String>, String> {
    let patterns: Vec<String> = patterns.iter().map(|&p| p.to_owned()).collect();
    let file = select(&file(), &patterns)?;
    Ok(file["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect())
}

#[test]
fn cases_are_selected_by_name_or_glob_in_file_order() {
    assert_eq!(selected(&[]).unwrap().len(), 5, "no pattern: every case");
    assert_eq!(selected(&["mutate-patch"]).unwrap(), ["mutate-patch"]);
    // The file's order, whatever the patterns' order; a case that two
    // patterns select runs once.
    assert_eq!(
        selected(&["mutate-*", "reconcile-child*", "mutate-raise"]).unwrap(),
        [
            "reconcile-children",
            "mutate-patch",
            "reconcile-child-not-an-object",
            "mutate-raise"
        ]
    );
    assert_eq!(
        selected(&["*-child*-*"]).unwrap(),
        ["reconcile-child-not-an-object"]
    );
    assert_eq!(selected(&["*"]).unwrap().len(), 5);
    // A name is the whole name, not a prefix.
    assert!(selected(&["mutate"]).is_err());
}

#[test]
fn a_pattern_that_selects_no_case_is_an_error_naming_the_cases() {
    let e = selected(&["mutate-patch", "mutate-pacth"]).unwrap_err();
    assert_eq!(
        e,
        "no case is called \"mutate-pacth\"; the cases are: get-info, reconcile-children, \
         mutate-patch, reconcile-child-not-an-object, mutate-raise"
    );
    let e = selected(&["default-*"]).unwrap_err();
    assert!(
        e.starts_with("no case's name matches \"default-*\"; the cases are: get-info"),
        "{e}"
    );
    assert!(
        select(&json!({}), &[])
            .unwrap_err()
            .contains("no \"cases\" list")
    );
}

#[test]
fn globs_match_any_characters_where_the_star_is() {
    for (pattern, name) in [
        ("a*", "a"),
        ("*c", "abc"),
        ("a*c", "abbc"),
        ("a**c", "ac"),
        ("a*b*c", "abbbc"),
        ("*", ""),
    ] {
        assert!(glob_matches(pattern, name), "{pattern} {name}");
    }
    for (pattern, name) in [
        ("a*", "ba"),
        ("*c", "cb"),
        ("a*b*c", "acb"),
        ("ab", "abc"),
        ("ab*b", "ab"),
    ] {
        assert!(!glob_matches(pattern, name), "{pattern} {name}");
    }
}

#[test]
fn status_bytes_must_be_compact() {
    assert_eq!(status_json(br#"{"a":1}"#), Ok(json!({"a": 1})));
    assert!(
        status_json(br#"{"a": 1}"#)
            .unwrap_err()
            .contains("not compact")
    );
    assert!(status_json(b"{").unwrap_err().contains("not JSON"));
    assert_eq!(status_json(b""), Ok(Value::Null));
}
