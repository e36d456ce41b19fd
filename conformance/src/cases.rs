//! The shared request/response cases (`sidecar-sdk/conformance/cases.json`)
//! run against an SDK's conformance plugin, as that file's README specifies:
//! in file order, on one plugin instance, each answer turned into the case's
//! JSON shape and compared by value. [`select`] keeps a subset (`--case`).

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{
    Call, Capability, ConditionStatus, DefaultRequest, EventType, FailurePolicy, FinalizeRequest,
    GetInfoRequest, HookBehaviour, HookPhase, HookRequest, MutateRequest, ObjectRef, Operation,
    Outcome, ProbeRequest, ReconcileRequest, ValidateRequest,
};
use serde_json::{Value, json};
use tonic::transport::Channel;

/// The cases file with only the cases `patterns` select, still in file
/// order: a pattern is a case's name, or a glob in which `*` stands for any
/// characters (`mutate-*`, `reconcile-child*`). No patterns select every
/// case.
///
/// # Errors
/// A file without a `"cases"` list, or a pattern that selects no case (a
/// misspelt name is an error, not a run of nothing), naming the cases.
pub fn select(file: &Value, patterns: &[String]) -> Result<Value, String> {
    let all = file["cases"]
        .as_array()
        .ok_or("the cases file has no \"cases\" list")?;
    let name = |case: &Value| case["name"].as_str().unwrap_or_default().to_owned();
    if let Some(unmatched) = patterns
        .iter()
        .find(|p| !all.iter().any(|c| glob_matches(p, &name(c))))
    {
        let what = if unmatched.contains('*') {
            format!("no case's name matches {unmatched:?}")
        } else {
            format!("no case is called {unmatched:?}")
        };
        let names: Vec<String> = all.iter().map(name).collect();
        return Err(format!("{what}; the cases are: {}", names.join(", ")));
    }
    let mut selected = file.clone();
    if !patterns.is_empty() {
        selected["cases"] = all
            .iter()
            .filter(|c| patterns.iter().any(|p| glob_matches(p, &name(c))))
            .cloned()
            .collect();
    }
    Ok(selected)
}

/// Whether `name` matches `pattern`, in which `*` stands for any
/// characters (none included) and every other character for itself.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Runs every case of `cases` (the parsed file, or the part of it
/// [`select`] keeps) against the plugin behind `client`, in file order.
///
/// # Errors
/// The first case that fails, by name, with what was expected and got; or a
/// malformed file.
pub async fn run(client: &mut PluginClient<Channel>, cases: &Value) -> Result<usize, String> {
    let all = cases["cases"]
        .as_array()
        .ok_or("the cases file has no \"cases\" list")?;
    for case in all {
        let name = case["name"].as_str().unwrap_or("(unnamed)");
        run_case(client, &case["request"], &case["expect"])
            .await
            .map_err(|e| format!("case {name:?}: {e}"))?;
    }
    Ok(all.len())
}

async fn run_case(
    client: &mut PluginClient<Channel>,
    request: &Value,
    expect: &Value,
) -> Result<(), String> {
    let rpc = request["rpc"].as_str().unwrap_or_default();
    let actual = match rpc {
        "GetInfo" => {
            let info = client
                .get_info(GetInfoRequest {})
                .await
                .map_err(failed("GetInfo"))?
                .into_inner();
            json!({
                "name": info.name, "version": info.version, "protocol": info.protocol,
                "description": info.description,
                "offers": info.offers.iter().map(|o| {
                    let base = o.base.clone().unwrap_or_default();
                    json!({
                        "base": {"group": base.group, "kind": base.kind},
                        "implementation": o.implementation,
                        "extensions": o.extensions.iter()
                            .map(|e| json!({"group": e.group, "kind": e.kind}))
                            .collect::<Vec<_>>(),
                        "children": o.children.iter()
                            .map(|c| json!({"group": c.group, "version": c.version, "kind": c.kind}))
                            .collect::<Vec<_>>(),
                    })
                }).collect::<Vec<_>>(),
                "capabilities": info.capabilities.iter().map(|c| capability_name(*c)).collect::<Vec<_>>(),
                "hooks": info.hooks.iter().map(|h| {
                    let base = h.base.clone().unwrap_or_default();
                    json!({
                        "name": h.name,
                        "base": {"group": base.group, "kind": base.kind},
                        "phase": enum_name(HookPhase::try_from(h.phase).ok().map(|p| p.as_str_name()), "HOOK_PHASE_"),
                        "behaviour": enum_name(HookBehaviour::try_from(h.behaviour).ok().map(|b| b.as_str_name()), "HOOK_BEHAVIOUR_"),
                        "order": h.order,
                    })
                }).collect::<Vec<_>>(),
                "mutations": info.mutations.iter().map(|m| {
                    let kind = m.kind.clone().unwrap_or_default();
                    json!({"group": kind.group, "version": kind.version, "kind": kind.kind})
                }).collect::<Vec<_>>(),
                "call_policies": info.call_policies.iter().map(|p| json!({
                    "call": enum_name(Call::try_from(p.call).ok().map(|c| c.as_str_name()), "CALL_"),
                    "deadline_seconds": retry_after(p.deadline.as_ref()),
                    "failure_policy": enum_name(FailurePolicy::try_from(p.failure_policy).ok().map(|f| f.as_str_name()), "FAILURE_POLICY_"),
                })).collect::<Vec<_>>(),
            })
        }
        "Probe" => {
            let probe = client
                .probe(ProbeRequest {})
                .await
                .map_err(failed("Probe"))?
                .into_inner();
            json!({"ready": probe.ready, "message": probe.message})
        }
        "Reconcile" => {
            let (implementation, object, extensions) = encode(request)?;
            let r = client
                .reconcile(ReconcileRequest {
                    children: encode_list(&request["children"])?,
                    implementation,
                    object,
                    extensions,
                })
                .await
                .map_err(failed("Reconcile"))?
                .into_inner();
            json!({
                "outcome": outcome_name(r.outcome),
                "message": r.message,
                "retry_after_seconds": retry_after(r.retry_after.as_ref()),
                "status": status_json(&r.status)?,
                "extension_statuses": r.extension_statuses.iter().map(|s| Ok(json!({
                    "target": reference(s.target.as_ref()), "status": status_json(&s.status)?,
                }))).collect::<Result<Vec<_>, String>>()?,
                "conditions": r.conditions.iter().map(|c| json!({
                    "type": c.r#type,
                    "status": match ConditionStatus::try_from(c.status) {
                        Ok(ConditionStatus::True) => "True",
                        Ok(ConditionStatus::False) => "False",
                        _ => "Unknown",
                    },
                    "reason": c.reason, "message": c.message,
                })).collect::<Vec<_>>(),
                "events": events(&r.events),
                "children": children(r.children.as_ref())?,
            })
        }
        "Finalize" => {
            let (implementation, object, extensions) = encode(request)?;
            let r = client
                .finalize(FinalizeRequest {
                    children: Default::default(),
                    implementation,
                    object,
                    extensions,
                })
                .await
                .map_err(failed("Finalize"))?
                .into_inner();
            json!({
                "outcome": outcome_name(r.outcome),
                "message": r.message,
                "retry_after_seconds": retry_after(r.retry_after.as_ref()),
                "events": events(&r.events),
            })
        }
        "Validate" => {
            let (implementation, operation, object, old_object) = encode_admission(request)?;
            match client
                .validate(ValidateRequest {
                    implementation,
                    operation,
                    object,
                    old_object,
                })
                .await
            {
                Ok(r) => {
                    let r = r.into_inner();
                    json!({
                        "errors": r.errors.iter().map(|e| json!({
                            "path": e.path, "value": e.value, "message": e.message,
                        })).collect::<Vec<_>>(),
                        "warnings": r.warnings,
                    })
                }
                Err(status) => grpc_error(&status, expect, "Validate")?,
            }
        }
        "Default" => {
            let (implementation, operation, object, old_object) = encode_admission(request)?;
            match client
                .default(DefaultRequest {
                    implementation,
                    operation,
                    object,
                    old_object,
                })
                .await
            {
                Ok(r) => {
                    let r = r.into_inner();
                    json!({"patch": status_json(&r.patch)?, "warnings": r.warnings})
                }
                Err(status) => grpc_error(&status, expect, "Default")?,
            }
        }
        "Mutate" => {
            let optional = |key: &str| match request.get(key) {
                Some(value) => serde_json::to_vec(value).map_err(|e| e.to_string()),
                None => Ok(Vec::new()),
            };
            let (implementation, object, _) = encode(request)?;
            match client
                .mutate(MutateRequest {
                    object,
                    live: optional("live")?,
                    base: optional("base")?,
                    implementation,
                })
                .await
            {
                Ok(r) => {
                    let r = r.into_inner();
                    json!({"patch": status_json(&r.patch)?, "warnings": r.warnings})
                }
                Err(status) => grpc_error(&status, expect, "Mutate")?,
            }
        }
        "Hook" => {
            let (implementation, object, extensions) = encode(request)?;
            let phase = request["phase"].as_str().unwrap_or_default();
            let outcome = request["outcome"].as_str().unwrap_or("UNSPECIFIED");
            let r = client
                .hook(HookRequest {
                    hook: request["hook"].as_str().unwrap_or_default().to_owned(),
                    phase: HookPhase::from_str_name(&format!("HOOK_PHASE_{phase}"))
                        .ok_or_else(|| format!("unknown phase {phase:?} in the cases file"))?
                        as i32,
                    implementation,
                    object,
                    extensions,
                    outcome: Outcome::from_str_name(&format!("OUTCOME_{outcome}"))
                        .ok_or_else(|| format!("unknown outcome {outcome:?} in the cases file"))?
                        as i32,
                    message: request["message"].as_str().unwrap_or_default().to_owned(),
                })
                .await
                .map_err(failed("Hook"))?
                .into_inner();
            json!({
                "outcome": outcome_name(r.outcome),
                "message": r.message,
                "retry_after_seconds": retry_after(r.retry_after.as_ref()),
                "status": status_json(&r.status)?,
                "events": events(&r.events),
            })
        }
        other => return Err(format!("unknown rpc {other:?} in the cases file")),
    };
    compare(rpc, actual, expect)
}

/// A gRPC error where the case expects one (`grpc_code`), in the cases'
/// shape: `{grpc_code, message}`.
fn grpc_error(status: &tonic::Status, expect: &Value, rpc: &'static str) -> Result<Value, String> {
    if expect.get("grpc_code").is_none() {
        return Err(failed(rpc)(status.clone()));
    }
    Ok(json!({"grpc_code": code_name(status.code()), "message": status.message()}))
}

/// The gRPC code's name as the cases write it (`INVALID_ARGUMENT`).
fn code_name(code: tonic::Code) -> String {
    let camel = format!("{code:?}");
    let mut name = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// An enum value's name without its prefix (`HOOK_PHASE_AFTER_RECONCILE`
/// is `AFTER_RECONCILE`); `UNKNOWN` for a number the protocol lacks.
fn enum_name(name: Option<&'static str>, prefix: &str) -> String {
    name.map_or_else(
        || "UNKNOWN".to_owned(),
        |n| n.strip_prefix(prefix).unwrap_or(n).to_owned(),
    )
}

/// The message for a call that got a gRPC error instead of an answer.
fn failed(rpc: &'static str) -> impl Fn(tonic::Status) -> String {
    move |s| {
        format!(
            "{rpc} failed with gRPC status {:?}: {}",
            s.code(),
            s.message()
        )
    }
}

/// Compares an answer with the case's expectation; a Reconcile or Finalize
/// message may be expected as a substring (`message_contains`).
fn compare(rpc: &str, mut actual: Value, expect: &Value) -> Result<(), String> {
    let mut want = expect.as_object().cloned().unwrap_or_default();
    // A Reconcile case that says nothing of children expects none: the
    // answer leaves them as they are.
    if rpc == "Reconcile" {
        want.entry("children").or_insert(Value::Null);
    }
    if matches!(rpc, "Reconcile" | "Finalize" | "Hook") || want.contains_key("grpc_code") {
        let map = actual
            .as_object_mut()
            .expect("answers are built as objects");
        let message = map.remove("message").unwrap_or_default();
        let message = message.as_str().unwrap_or_default();
        if let Some(part) = want.remove("message_contains") {
            let part = part.as_str().unwrap_or_default();
            if !message.contains(part) {
                return Err(format!("message {message:?} should contain {part:?}"));
            }
        } else if let Some(expected) = want.remove("message")
            && expected.as_str() != Some(message)
        {
            return Err(format!("message {message:?}, expected {expected}"));
        }
    }
    let want = Value::Object(want);
    if same(&actual, &want) {
        Ok(())
    } else {
        Err(format!("got {actual}, expected {want}"))
    }
}

fn capability_name(c: i32) -> &'static str {
    match Capability::try_from(c) {
        Ok(Capability::Reconcile) => "RECONCILE",
        Ok(Capability::Finalize) => "FINALIZE",
        Ok(Capability::Children) => "CHILDREN",
        Ok(Capability::Mutate) => "MUTATE",
        Ok(Capability::Validate) => "VALIDATE",
        Ok(Capability::Default) => "DEFAULT",
        Ok(Capability::Hooks) => "HOOKS",
        _ => "UNSPECIFIED",
    }
}

fn outcome_name(o: i32) -> &'static str {
    match Outcome::try_from(o) {
        Ok(Outcome::Ok) => "OK",
        Ok(Outcome::Retry) => "RETRY",
        Ok(Outcome::Failed) => "FAILED",
        _ => "UNSPECIFIED",
    }
}

fn reference(r: Option<&ObjectRef>) -> Value {
    r.map_or(Value::Null, |r| {
        json!({"apiVersion": r.api_version, "kind": r.kind, "namespace": r.namespace, "name": r.name})
    })
}

fn events(events: &[kplug_proto::v1::Event]) -> Value {
    events
        .iter()
        .map(|e| {
            let kind = if e.r#type == EventType::Warning as i32 {
                "Warning"
            } else {
                "Normal"
            };
            json!({"type": kind, "reason": e.reason, "message": e.message, "regarding": reference(e.regarding.as_ref())})
        })
        .collect()
}

fn retry_after(d: Option<&prost_types::Duration>) -> Value {
    // Seconds as f64 is the case file's unit; precision loss past 2^53 s is
    // irrelevant for delays.
    #[allow(clippy::cast_precision_loss)]
    d.map_or(Value::Null, |d| {
        json!(d.seconds as f64 + f64::from(d.nanos) / 1e9)
    })
}

/// Decodes status bytes, which must be compact UTF-8 JSON.
fn status_json(bytes: &[u8]) -> Result<Value, String> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("a status is not JSON: {e}"))?;
    let compact = serde_json::to_vec(&value).expect("a JSON value encodes");
    if bytes.len() != compact.len() {
        return Err(format!(
            "a status is not compact JSON ({} bytes; compact, {} bytes): {}",
            bytes.len(),
            compact.len(),
            String::from_utf8_lossy(bytes)
        ));
    }
    Ok(value)
}

/// Compares JSON by value (`1` equals `1.0`; object key order is free).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// A case's request as the wire carries it: implementation, object bytes,
/// extension bytes.
type Encoded = (String, Vec<u8>, Vec<Vec<u8>>);

/// A list of JSON values, each JSON-encoded (absent: none).
fn encode_list(values: &Value) -> Result<Vec<Vec<u8>>, String> {
    values
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| serde_json::to_vec(e).map_err(|e| e.to_string()))
        .collect()
}

/// A response's children as the cases write them: `null` when the answer
/// carries no children message, else each child decoded.
fn children(children: Option<&kplug_proto::v1::Children>) -> Result<Value, String> {
    let Some(children) = children else {
        return Ok(Value::Null);
    };
    children
        .objects
        .iter()
        .map(|c| serde_json::from_slice(c).map_err(|e| format!("a child is not JSON: {e}")))
        .collect::<Result<Vec<Value>, String>>()
        .map(Value::Array)
}

fn encode(request: &Value) -> Result<Encoded, String> {
    let object = match request.get("object_raw").and_then(Value::as_str) {
        Some(raw) => raw.as_bytes().to_vec(),
        None => serde_json::to_vec(&request["object"]).map_err(|e| e.to_string())?,
    };
    let extensions = encode_list(&request["extensions"])?;
    let implementation = request["implementation"].as_str().unwrap_or_default();
    Ok((implementation.to_owned(), object, extensions))
}

/// A case's admission request as the wire carries it: implementation,
/// operation, object bytes, old object bytes (empty when the case has none).
type EncodedAdmission = (String, i32, Vec<u8>, Vec<u8>);

fn encode_admission(request: &Value) -> Result<EncodedAdmission, String> {
    let (implementation, object, _) = encode(request)?;
    let operation = request["operation"].as_str().unwrap_or("UNSPECIFIED");
    let operation = Operation::from_str_name(&format!("OPERATION_{operation}"))
        .ok_or_else(|| format!("unknown operation {operation:?} in the cases file"))?;
    let old_object = match request.get("old_object") {
        Some(old) => serde_json::to_vec(old).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    Ok((implementation, operation as i32, object, old_object))
}

#[cfg(test)]
mod tests {
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
}
