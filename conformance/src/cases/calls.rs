//! One function per RPC: the case's request sent, and the answer in the
//! case's shape (or the gRPC error, where the case expects one).

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{
    Call, ConditionStatus, DefaultRequest, FailurePolicy, FinalizeRequest, GetInfoRequest,
    GetInfoResponse, HookBehaviour, HookPhase, HookRequest, MutateRequest, Outcome, ProbeRequest,
    ReconcileRequest, ValidateRequest,
};
use serde_json::{Value, json};
use tonic::transport::Channel;

use super::shape::{
    capability_name, children, encode, encode_admission, encode_list, enum_name, events,
    outcome_name, reference, retry_after, status_json,
};
use super::{failed, grpc_error};

type Client = PluginClient<Channel>;

/// GetInfo, in the shape of the cases file's `plugin`.
pub(super) async fn get_info(client: &mut Client) -> Result<Value, String> {
    let info = client
        .get_info(GetInfoRequest {})
        .await
        .map_err(failed("GetInfo"))?
        .into_inner();
    Ok(json!({
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
        "hooks": hooks(&info),
        "mutations": info.mutations.iter().map(|m| {
            let kind = m.kind.clone().unwrap_or_default();
            json!({"group": kind.group, "version": kind.version, "kind": kind.kind})
        }).collect::<Vec<_>>(),
        "call_policies": info.call_policies.iter().map(|p| json!({
            "call": enum_name(Call::try_from(p.call).ok().map(|c| c.as_str_name()), "CALL_"),
            "deadline_seconds": retry_after(p.deadline.as_ref()),
            "failure_policy": enum_name(FailurePolicy::try_from(p.failure_policy).ok().map(|f| f.as_str_name()), "FAILURE_POLICY_"),
        })).collect::<Vec<_>>(),
    }))
}

/// The hooks GetInfo declares, in the cases' shape.
fn hooks(info: &GetInfoResponse) -> Vec<Value> {
    info.hooks.iter().map(|h| {
        let base = h.base.clone().unwrap_or_default();
        json!({
            "name": h.name,
            "base": {"group": base.group, "kind": base.kind},
            "phase": enum_name(HookPhase::try_from(h.phase).ok().map(|p| p.as_str_name()), "HOOK_PHASE_"),
            "behaviour": enum_name(HookBehaviour::try_from(h.behaviour).ok().map(|b| b.as_str_name()), "HOOK_BEHAVIOUR_"),
            "order": h.order,
        })
    }).collect()
}

/// Probe.
pub(super) async fn probe(client: &mut Client) -> Result<Value, String> {
    let probe = client
        .probe(ProbeRequest {})
        .await
        .map_err(failed("Probe"))?
        .into_inner();
    Ok(json!({"ready": probe.ready, "message": probe.message}))
}

/// Reconcile, with the case's observed children.
pub(super) async fn reconcile(client: &mut Client, request: &Value) -> Result<Value, String> {
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
    Ok(json!({
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
    }))
}

/// Finalize.
pub(super) async fn finalize(client: &mut Client, request: &Value) -> Result<Value, String> {
    let (implementation, object, extensions) = encode(request)?;
    let r = client
        .finalize(FinalizeRequest {
            children: Vec::new(),
            implementation,
            object,
            extensions,
        })
        .await
        .map_err(failed("Finalize"))?
        .into_inner();
    Ok(json!({
        "outcome": outcome_name(r.outcome),
        "message": r.message,
        "retry_after_seconds": retry_after(r.retry_after.as_ref()),
        "events": events(&r.events),
    }))
}

/// Validate, or its gRPC error.
pub(super) async fn validate(
    client: &mut Client,
    request: &Value,
    expect: &Value,
) -> Result<Value, String> {
    let (implementation, operation, object, old_object) = encode_admission(request)?;
    let answer = client
        .validate(ValidateRequest {
            implementation,
            operation,
            object,
            old_object,
        })
        .await;
    match answer {
        Ok(r) => {
            let r = r.into_inner();
            Ok(json!({
                "errors": r.errors.iter().map(|e| json!({
                    "path": e.path, "value": e.value, "message": e.message,
                })).collect::<Vec<_>>(),
                "warnings": r.warnings,
            }))
        }
        Err(status) => grpc_error(&status, expect, "Validate"),
    }
}

/// Default, or its gRPC error.
pub(super) async fn default(
    client: &mut Client,
    request: &Value,
    expect: &Value,
) -> Result<Value, String> {
    let (implementation, operation, object, old_object) = encode_admission(request)?;
    let answer = client
        .default(DefaultRequest {
            implementation,
            operation,
            object,
            old_object,
        })
        .await;
    match answer {
        Ok(r) => {
            let r = r.into_inner();
            Ok(json!({"patch": status_json(&r.patch)?, "warnings": r.warnings}))
        }
        Err(status) => grpc_error(&status, expect, "Default"),
    }
}

/// Mutate, with the case's live object and base (empty when absent), or
/// its gRPC error.
pub(super) async fn mutate(
    client: &mut Client,
    request: &Value,
    expect: &Value,
) -> Result<Value, String> {
    let optional = |key: &str| match request.get(key) {
        Some(value) => serde_json::to_vec(value).map_err(|e| e.to_string()),
        None => Ok(Vec::new()),
    };
    let (implementation, object, _) = encode(request)?;
    let answer = client
        .mutate(MutateRequest {
            object,
            live: optional("live")?,
            base: optional("base")?,
            implementation,
        })
        .await;
    match answer {
        Ok(r) => {
            let r = r.into_inner();
            Ok(json!({"patch": status_json(&r.patch)?, "warnings": r.warnings}))
        }
        Err(status) => grpc_error(&status, expect, "Mutate"),
    }
}

/// Hook, at the case's phase and after its outcome.
pub(super) async fn hook(client: &mut Client, request: &Value) -> Result<Value, String> {
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
    Ok(json!({
        "outcome": outcome_name(r.outcome),
        "message": r.message,
        "retry_after_seconds": retry_after(r.retry_after.as_ref()),
        "status": status_json(&r.status)?,
        "events": events(&r.events),
    }))
}
