//! `mutate`: Mutate called twice with the same request for an object of
//! each kind the plugin declares; the answers must agree, and their paths
//! be ones the operator accepts.

use kplug_proto::v1::{HeartbeatRequest, MutateRequest};
use serde_json::{Value, json};

use super::calls::Objects;
use super::{CALL_DEADLINE, Kit, timed};

impl Kit<'_> {
    /// Calls Mutate twice for an object of each declared kind, with the
    /// same request, and judges both answers.
    pub(super) async fn judge_mutate(
        &self,
        first: &HeartbeatRequest,
        objects: &Objects,
    ) -> Result<String, String> {
        if first.mutations.is_empty() {
            return Err("the plugin advertises CAPABILITY_MUTATE but declares no kind to mutate (mutations)".into());
        }
        let mut seen = Vec::new();
        for mutation in &first.mutations {
            let kind = mutation.kind.clone().unwrap_or_default();
            let object = mutated_object(&kind);
            let request = MutateRequest {
                object: object.to_string().into_bytes(),
                live: Vec::new(),
                base: objects.base.to_string().into_bytes(),
                implementation: objects.implementation.clone(),
            };
            let mut answers = Vec::new();
            for _ in 0..2 {
                let answer = self
                    .client(first)
                    .mutate(timed(request.clone(), CALL_DEADLINE))
                    .await
                    .map_err(|s| {
                        format!(
                            "Mutate of a {} failed with gRPC status {:?}: {}",
                            kind.kind,
                            s.code(),
                            s.message()
                        )
                    })?
                    .into_inner();
                answers.push(answer);
            }
            if answers[0] != answers[1] {
                return Err(format!(
                    "Mutate of a {} answered the same request twice with different patches ({:?} then {:?}); a mutation must be deterministic, or the operator would apply every reconcile",
                    kind.kind,
                    String::from_utf8_lossy(&answers[0].patch),
                    String::from_utf8_lossy(&answers[1].patch)
                ));
            }
            patch_paths(&kind.kind, &answers[0].patch)?;
            seen.push(format!("{}: the same answer twice", kind.kind));
        }
        Ok(seen.join("; "))
    }
}

/// An object of `kind` for Mutate, as the operator would send a child.
fn mutated_object(kind: &kplug_proto::v1::GroupVersionKind) -> Value {
    let api_version = if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    };
    json!({
        "apiVersion": api_version, "kind": kind.kind,
        "metadata": {"name": "kplug-conformance", "namespace": "kplug-conformance",
                     "labels": {"kplug.io/plugin": "kplug-conformance"}, "annotations": {}},
        "spec": {},
    })
}

/// Whether a Mutate patch of a `kind` is a JSON Patch whose paths the
/// operator accepts (none: no patch).
fn patch_paths(kind: &str, patch: &[u8]) -> Result<(), String> {
    if patch.is_empty() {
        return Ok(());
    }
    let operations: Vec<Value> = serde_json::from_slice(patch).map_err(|e| {
        format!("Mutate of a {kind} answered a patch that is not a JSON Patch: {e}")
    })?;
    for op in &operations {
        let path = op["path"].as_str().unwrap_or_default();
        if kplug_proto::limits::mutation_path_problem(path).is_some() {
            return Err(format!(
                "Mutate of a {kind} patches {path:?}; the operator refuses a patch outside /spec and single labels and annotations outside kplug.io/"
            ));
        }
    }
    Ok(())
}
