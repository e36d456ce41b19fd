//! The shared request/response cases (`sidecar-sdk/conformance/cases.json`)
//! run against an SDK's conformance plugin, as that file's README specifies:
//! in file order, on one plugin instance, each answer turned into the case's
//! JSON shape and compared by value. [`select`] keeps a subset (`--case`).

mod calls;
mod shape;

use kplug_proto::v1::plugin_client::PluginClient;
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
/// Runs one case: its request sent, the answer in the case's shape,
/// compared with what it expects.
async fn run_case(
    client: &mut PluginClient<Channel>,
    request: &Value,
    expect: &Value,
) -> Result<(), String> {
    let rpc = request["rpc"].as_str().unwrap_or_default();
    let actual = match rpc {
        "GetInfo" => calls::get_info(client).await?,
        "Probe" => calls::probe(client).await?,
        "Reconcile" => calls::reconcile(client, request).await?,
        "Finalize" => calls::finalize(client, request).await?,
        "Validate" => calls::validate(client, request, expect).await?,
        "Default" => calls::default(client, request, expect).await?,
        "Mutate" => calls::mutate(client, request, expect).await?,
        "Hook" => calls::hook(client, request).await?,
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

#[cfg(test)]
mod tests;
