//! `sidecar-sdk/conformance/rules.json` is the copy of the protocol's rules
//! that the SDKs in other languages test themselves against. This test keeps
//! it equal to this crate, the rules' source: change a rule here and this
//! test says which part of the file to update.

use std::path::Path;
use std::time::Duration;

use kplug_proto::rules::{
    self, BACKOFF_FACTOR, BACKOFF_INITIAL, BACKOFF_JITTER, DEFAULT_HEARTBEAT_INTERVAL,
    HEARTBEAT_CALL_DEADLINE, HEARTBEAT_INTERVAL_ENV, NameError, SocketDirOrigin,
};
use kplug_proto::{
    DEFAULT_SOCKET_DIR, RESERVED_CONDITION_TYPES, RESERVED_STATUS_KEYS, SOCKET_DIR_ENV, limits,
};
use serde_json::Value;

fn rules() -> serde_json::Map<String, Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sidecar-sdk/conformance/rules.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    doc["rules"].as_object().expect("rules").clone()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a string"))
        .collect()
}

fn seconds(v: &Value) -> f64 {
    v.as_f64().expect("a number of seconds")
}

#[test]
fn every_rule_in_the_file_is_checked_here() {
    let mut names: Vec<_> = rules().keys().cloned().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "environment",
            "heartbeat_backoff",
            "message_limit",
            "plugin_name",
            "reserved_condition_types",
            "reserved_status_keys",
            "socket_dir",
        ],
        "a rule was added to or removed from rules.json: check it here and in every SDK's test"
    );
}

#[test]
fn plugin_name() {
    let rule = &rules()["plugin_name"];
    assert_eq!(rule["max_length"], limits::MAX_NAME_LEN);
    for name in strings(&rule["valid"]) {
        assert_eq!(rules::validate_plugin_name(name), Ok(()), "{name:?}");
    }
    for case in rule["invalid"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let err = rules::validate_plugin_name(name).expect_err(name);
        let why = match err {
            NameError::Empty => "empty",
            NameError::Character { .. } => "character",
            NameError::Hyphen { .. } => "hyphen",
            NameError::TooLong { .. } => "too_long",
        };
        assert_eq!(case["why"], why, "{name:?}: {err}");
    }
}

#[test]
fn reserved_status_keys() {
    let rule = &rules()["reserved_status_keys"];
    assert_eq!(strings(&rule["reserved"]), RESERVED_STATUS_KEYS);
    for key in strings(&rule["allowed"]) {
        assert!(!RESERVED_STATUS_KEYS.contains(&key), "{key}");
    }
}

#[test]
fn reserved_condition_types() {
    let rule = &rules()["reserved_condition_types"];
    assert_eq!(strings(&rule["reserved"]), RESERVED_CONDITION_TYPES);
    for type_ in strings(&rule["allowed"]) {
        assert!(!RESERVED_CONDITION_TYPES.contains(&type_), "{type_}");
    }
}

#[test]
fn message_limit() {
    let rule = &rules()["message_limit"];
    assert_eq!(
        rule["max_plugin_message_bytes"],
        limits::MAX_PLUGIN_MESSAGE_BYTES
    );
}

#[test]
fn environment() {
    let rule = &rules()["environment"];
    assert_eq!(rule["socket_dir"]["variable"], SOCKET_DIR_ENV);
    assert_eq!(rule["socket_dir"]["default"], DEFAULT_SOCKET_DIR);
    let interval = &rule["heartbeat_interval"];
    assert_eq!(interval["variable"], HEARTBEAT_INTERVAL_ENV);
    assert_eq!(
        seconds(&interval["default_seconds"]),
        DEFAULT_HEARTBEAT_INTERVAL.as_secs_f64()
    );
    for case in interval["valid"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        assert_eq!(
            rules::parse_heartbeat_interval(Some(text)),
            Ok(Duration::from_secs_f64(seconds(&case["seconds"]))),
            "{text:?}"
        );
    }
    for text in strings(&interval["invalid"]) {
        assert!(
            rules::parse_heartbeat_interval(Some(text)).is_err(),
            "{text:?} must be refused"
        );
    }
}

#[test]
fn heartbeat_backoff() {
    let rule = &rules()["heartbeat_backoff"];
    assert_eq!(
        seconds(&rule["initial_seconds"]),
        BACKOFF_INITIAL.as_secs_f64()
    );
    assert_eq!(rule["factor"], BACKOFF_FACTOR);
    assert_eq!(seconds(&rule["jitter"]), BACKOFF_JITTER);
    assert_eq!(
        seconds(&rule["default_cap_seconds"]),
        DEFAULT_HEARTBEAT_INTERVAL.as_secs_f64()
    );
    assert_eq!(
        seconds(&rule["call_deadline_seconds"]),
        HEARTBEAT_CALL_DEADLINE.as_secs_f64()
    );
    let tolerance = seconds(&rule["tolerance_seconds"]);
    for sample in rule["samples"].as_array().unwrap() {
        let attempt = u32::try_from(sample["attempt"].as_u64().unwrap()).unwrap();
        let cap = Duration::from_secs_f64(seconds(&sample["cap_seconds"]));
        let unit = seconds(&sample["unit"]);
        let got = rules::backoff_delay(attempt, cap, unit).as_secs_f64();
        let want = seconds(&sample["delay_seconds"]);
        assert!(
            (got - want).abs() <= tolerance,
            "{sample}: backoff_delay gives {got}s"
        );
    }
}

#[test]
fn socket_dir() {
    let rule = &rules()["socket_dir"];
    let samples = rule["samples"].as_array().unwrap();
    let origins = [
        SocketDirOrigin::Default,
        SocketDirOrigin::Environment,
        SocketDirOrigin::Program,
    ];
    assert_eq!(
        samples.iter().map(|s| &s["origin"]).collect::<Vec<_>>(),
        origins.map(SocketDirOrigin::name),
        "one sample per origin, in this order"
    );
    for (sample, origin) in samples.iter().zip(origins) {
        let dir = Path::new(sample["socket_dir"].as_str().unwrap());
        assert_eq!(
            rules::registry_waiting_message(dir, origin),
            sample["waiting"].as_str().unwrap(),
            "{sample}"
        );
        assert_eq!(
            rules::socket_dir_missing_message(dir, origin),
            sample["missing"].as_str().unwrap(),
            "{sample}"
        );
    }
    assert_eq!(samples[0]["socket_dir"], DEFAULT_SOCKET_DIR);
    assert_eq!(SocketDirOrigin::of_variable(None), SocketDirOrigin::Default);
    assert_eq!(
        SocketDirOrigin::of_variable(Some("".as_ref())),
        SocketDirOrigin::Default
    );
    assert_eq!(
        SocketDirOrigin::of_variable(Some("/tmp/k".as_ref())),
        SocketDirOrigin::Environment
    );
}
