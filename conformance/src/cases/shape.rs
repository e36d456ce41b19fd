//! The cases' JSON shape of what the wire carries, both ways: answers
//! turned into the shape the cases write, and a case's request encoded.

use kplug_proto::v1::{Capability, EventType, ObjectRef, Operation, Outcome};
use serde_json::{Value, json};

/// An enum value's name without its prefix (`HOOK_PHASE_AFTER_RECONCILE`
/// is `AFTER_RECONCILE`); `UNKNOWN` for a number the protocol lacks.
pub(super) fn enum_name(name: Option<&'static str>, prefix: &str) -> String {
    name.map_or_else(
        || "UNKNOWN".to_owned(),
        |n| n.strip_prefix(prefix).unwrap_or(n).to_owned(),
    )
}

pub(super) fn capability_name(c: i32) -> &'static str {
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

pub(super) fn outcome_name(o: i32) -> &'static str {
    match Outcome::try_from(o) {
        Ok(Outcome::Ok) => "OK",
        Ok(Outcome::Retry) => "RETRY",
        Ok(Outcome::Failed) => "FAILED",
        _ => "UNSPECIFIED",
    }
}

pub(super) fn reference(r: Option<&ObjectRef>) -> Value {
    r.map_or(Value::Null, |r| {
        json!({"apiVersion": r.api_version, "kind": r.kind, "namespace": r.namespace, "name": r.name})
    })
}

pub(super) fn events(events: &[kplug_proto::v1::Event]) -> Value {
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

pub(super) fn retry_after(d: Option<&prost_types::Duration>) -> Value {
    // Seconds as f64 is the case file's unit; precision loss past 2^53 s is
    // irrelevant for delays.
    #[allow(clippy::cast_precision_loss)]
    d.map_or(Value::Null, |d| {
        json!(d.seconds as f64 + f64::from(d.nanos) / 1e9)
    })
}

/// Decodes status bytes, which must be compact UTF-8 JSON.
pub(super) fn status_json(bytes: &[u8]) -> Result<Value, String> {
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

/// A case's request as the wire carries it: implementation, object bytes,
/// extension bytes.
pub(super) type Encoded = (String, Vec<u8>, Vec<Vec<u8>>);

/// A list of JSON values, each JSON-encoded (absent: none).
pub(super) fn encode_list(values: &Value) -> Result<Vec<Vec<u8>>, String> {
    values
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| serde_json::to_vec(e).map_err(|e| e.to_string()))
        .collect()
}

/// A response's children as the cases write them: `null` when the answer
/// carries no children message, else each child decoded.
pub(super) fn children(children: Option<&kplug_proto::v1::Children>) -> Result<Value, String> {
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

pub(super) fn encode(request: &Value) -> Result<Encoded, String> {
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
pub(super) type EncodedAdmission = (String, i32, Vec<u8>, Vec<u8>);

pub(super) fn encode_admission(request: &Value) -> Result<EncodedAdmission, String> {
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
