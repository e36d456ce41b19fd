//! Each fuzz target's body: one input in, a panic if an invariant breaks.
//!
//! `fuzz/fuzz_targets/<name>.rs` hands libFuzzer's input to the function of
//! the same name; `tests/replay.rs` runs every committed seed
//! (`fuzz/corpus/<name>/`) and regression input (`fuzz/regressions/<name>/`)
//! through it on stable Rust, in `make test`. The input formats are in each
//! function's doc (and in fuzz/README.md).

use std::convert::Infallible;

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use futures::StreamExt;
use futures::executor::block_on;
use http_body::Frame;
use http_body_util::StreamBody;
use kplug_proto::limits::DEFAULT_MAX_RESPONSE_BYTES;
use kplug_proto::v1::{FinalizeResponse, HeartbeatRequest, ReconcileRequest, ReconcileResponse};
use prost::Message;
use tonic::Code;
use tonic::codec::{Codec, Streaming};

use crate::confinement::{self, PathInput};
use crate::{
    FIXTURE, HeartbeatInput, ResponseInput, check_finalize, check_heartbeat, check_reconcile, debug,
};

/// A target's body: one input, a panic if an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target, by the name of its binary in fuzz/Cargo.toml.
pub const TARGETS: &[(&str, Target)] = &[
    ("heartbeat", heartbeat),
    ("confinement", confinement),
    ("reconcile_response", reconcile_response),
    ("finalize_response", finalize_response),
    ("response_frames", response_frames),
];

/// A plugin's heartbeat, as the registry checks it before dialling or
/// storing anything (`kplug_checks::heartbeat::check_heartbeat`): name
/// rule, instance id, size bounds, protocol.
///
/// Input: the first byte picks the mode. Even: the rest is structured
/// ([`HeartbeatInput`], built with `arbitrary`; long strings and many offers
/// are cheap to reach). Odd: the rest is a protobuf-encoded
/// `HeartbeatRequest`, decoded as the registry's gRPC server would.
pub fn heartbeat(data: &[u8]) {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let req = if mode & 1 == 0 {
        match HeartbeatInput::arbitrary_take_rest(Unstructured::new(rest)) {
            Ok(input) => input.build(),
            Err(_) => return,
        }
    } else {
        match HeartbeatRequest::decode(rest) {
            Ok(req) => req,
            Err(_) => return,
        }
    };
    debug(&req);
    check_heartbeat(&req);
}

/// Socket confinement (`kplug_checks::confinement::confine`): a path a
/// plugin registers must resolve to a Unix socket inside the socket dir,
/// against a real tree of sockets, files, directories and symlinks (see
/// [`confinement::Tree`]).
///
/// Input: structured ([`PathInput`]): how the socket dir is spelled, where
/// the path starts, its components.
pub fn confinement(data: &[u8]) {
    let tree = confinement::tree();
    let Ok(input) = PathInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let socket_dir = input.socket_dir(tree);
    let registered = input.registered(tree);
    debug(&(&socket_dir, &registered));
    confinement::check(tree, &socket_dir, &registered);
}

/// A plugin's `ReconcileResponse`, as the operator checks it before writing
/// anything (`kplug_checks::response::check_reconcile`): outcome, JSON
/// statuses, reserved keys and condition types, targets that were sent,
/// counts, message lengths, retry_after.
///
/// Input: the first byte picks the mode.
/// - Even (structured): the second byte is a length L; the next L bytes
///   are the response's structure ([`ResponseInput`], built with
///   `arbitrary`; zero bytes mean OUTCOME_OK, every fixture object sent,
///   nothing else); the rest, split at NUL bytes (which JSON never
///   contains), is the base's status JSON, then one extension status JSON
///   per part (targeting the sent objects in order unless the structure
///   says otherwise). E.g. `\0\0{"a":1}\0{"b":2}`.
/// - Odd: the rest is a protobuf-encoded `ReconcileResponse`, checked
///   against every fixture object sent.
pub fn reconcile_response(data: &[u8]) {
    let fixture = &*FIXTURE;
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        if let Ok(resp) = ReconcileResponse::decode(rest) {
            debug(&resp);
            check_reconcile(&resp, &fixture.base, &fixture.objects);
        }
        return;
    }
    let Some((len, rest)) = rest.split_first() else {
        return;
    };
    let (header, json) = rest.split_at(usize::from(*len).min(rest.len()));
    let Ok(input) = ResponseInput::arbitrary_take_rest(Unstructured::new(header)) else {
        return;
    };
    let mut parts = json.split(|b| *b == 0);
    let status = parts.next().unwrap_or_default();
    let extension_statuses: Vec<&[u8]> = parts.collect();
    let sent = fixture.sent(input.unsent);
    let resp = input.reconcile(fixture, sent, status, &extension_statuses);
    debug(&(sent.len(), &resp));
    check_reconcile(&resp, &fixture.base, sent);
}

/// A plugin's `FinalizeResponse`, as the operator checks it
/// (`kplug_checks::response::check_finalize`): outcome, events (count,
/// objects they are about, message lengths), retry_after.
///
/// Input: the first byte picks the mode. Even: the rest is structured
/// ([`ResponseInput`]; its conditions and statuses are unused). Odd: the
/// rest is a protobuf-encoded `FinalizeResponse`, checked against every
/// fixture object sent.
pub fn finalize_response(data: &[u8]) {
    let fixture = &*FIXTURE;
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        if let Ok(resp) = FinalizeResponse::decode(rest) {
            debug(&resp);
            check_finalize(&resp, &fixture.base, &fixture.objects);
        }
        return;
    }
    let Ok(input) = ResponseInput::arbitrary_take_rest(Unstructured::new(rest)) else {
        return;
    };
    let sent = fixture.sent(input.unsent);
    let resp = input.finalize(fixture, sent);
    debug(&(sent.len(), &resp));
    check_finalize(&resp, &fixture.base, sent);
}

/// What the framing model expects of the next item of the stream.
#[derive(Debug, PartialEq)]
enum Expect {
    /// A message (its encoded length is checked against the limit).
    Message,
    /// The stream fails with this code and ends.
    Fail(Code),
}

/// The items a body should decode to, frame by frame.
fn model(mut body: &[u8], limit: usize) -> Vec<Expect> {
    let mut items = Vec::new();
    while !body.is_empty() {
        if body.len() < 5 {
            // A partial header before the trailers: dropped.
            return items;
        }
        let flag = body[0];
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        if flag >= 1 {
            // Invalid, or compressed without an encoding.
            items.push(Expect::Fail(Code::Internal));
            return items;
        }
        if len > limit {
            items.push(Expect::Fail(Code::OutOfRange));
            return items;
        }
        let rest = &body[5..];
        if rest.len() < len {
            // A partial message before the trailers: dropped.
            return items;
        }
        if ReconcileResponse::decode(&rest[..len]).is_err() {
            items.push(Expect::Fail(Code::Internal));
            return items;
        }
        items.push(Expect::Message);
        body = &rest[len..];
    }
    items
}

/// A plugin's `ReconcileResponse` on the wire: the body of a gRPC response
/// (frames of a compressed-flag byte, a big-endian 4-byte length and the
/// message), decoded the way the operator's plugin client decodes it:
/// tonic's decoder with the operator's response size limit
/// (`PluginClient::max_decoding_message_size`, `--max-response-size`).
///
/// Checked against a model of the framing:
/// - frames up to the first bad one decode to the messages they hold, each
///   within the limit;
/// - a frame declaring more than the limit is refused with OUT_OF_RANGE at
///   its header, before its body is read (so a plugin cannot make the
///   operator buffer a 50 MB answer);
/// - a compressed flag (the operator negotiates no compression) or an
///   invalid one is INTERNAL; so is a message that does not decode;
/// - a body that ends inside a frame, before its trailers, ends the stream
///   without that frame (tonic stops reading at the trailers; the unary
///   call then fails for want of a message);
/// - never a panic.
///
/// Input: the first byte picks the limit: even, the operator's default
/// (`kplug_proto::limits::DEFAULT_MAX_RESPONSE_BYTES`, 2 MiB); odd, the
/// next byte (0..=255 bytes, so that inputs of a few hundred bytes reach
/// both sides of it). The rest is the body.
pub fn response_frames(data: &[u8]) {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let (limit, body) = if mode & 1 == 0 {
        (DEFAULT_MAX_RESPONSE_BYTES, rest)
    } else {
        match rest.split_first() {
            Some((limit, body)) => (usize::from(*limit), body),
            None => return,
        }
    };
    let expected = model(body, limit);

    // The body as a plugin's server sends it: the frames, then trailers
    // with grpc-status 0 (without them tonic reports the stream truncated).
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let frames = futures::stream::iter([
        Ok::<_, Infallible>(Frame::data(Bytes::copy_from_slice(body))),
        Ok(Frame::trailers(trailers)),
    ]);
    let mut codec = tonic_prost::ProstCodec::<ReconcileRequest, ReconcileResponse>::default();
    let mut stream = Streaming::new_response(
        codec.decoder(),
        StreamBody::new(frames),
        http::StatusCode::OK,
        None,
        Some(limit),
    );
    let mut seen = Vec::new();
    block_on(async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(message) => {
                    assert!(
                        message.encoded_len() <= limit,
                        "a message of {} bytes passed a limit of {limit}",
                        message.encoded_len()
                    );
                    seen.push(Expect::Message);
                }
                Err(status) => {
                    seen.push(Expect::Fail(status.code()));
                    break;
                }
            }
        }
    });
    assert_eq!(seen, expected, "limit {limit}, body {body:?}");
}
