//! A plugin's `ReconcileResponse` on the wire: the body of a gRPC response
//! (frames of a compressed-flag byte, a big-endian 4-byte length and the
//! message), decoded the way the operator's plugin client decodes it: tonic's
//! decoder with the operator's response size limit
//! (`PluginClient::max_decoding_message_size`, `--max-response-size`).
//!
//! Checked against a model of the framing:
//! - frames up to the first bad one decode to the messages they hold, each
//!   within the limit;
//! - a frame declaring more than the limit is refused with OUT_OF_RANGE at
//!   its header, before its body is read (so a plugin cannot make the
//!   operator buffer a 50 MB answer);
//! - a compressed flag (the operator negotiates no compression) or an
//!   invalid one is INTERNAL; so is a message that does not decode;
//! - a body that ends inside a frame, before its trailers, ends the stream
//!   without that frame (tonic stops reading at the trailers; the unary
//!   call then fails for want of a message);
//! - never a panic.
//!
//! Input: the first byte picks the limit: even, the operator's default
//! (`kplug_proto::limits::DEFAULT_MAX_RESPONSE_BYTES`, 2 MiB); odd, the next
//! byte (0..=255 bytes, so that inputs of a few hundred bytes reach both
//! sides of it). The rest is the body.
#![no_main]

use std::convert::Infallible;

use bytes::Bytes;
use futures::StreamExt;
use futures::executor::block_on;
use http_body::Frame;
use http_body_util::StreamBody;
use kplug_proto::limits::DEFAULT_MAX_RESPONSE_BYTES;
use kplug_proto::v1::{ReconcileRequest, ReconcileResponse};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tonic::Code;
use tonic::codec::{Codec, Streaming};

/// What the model expects of the next item of the stream.
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
        if flag > 1 || flag == 1 {
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

fuzz_target!(|data: &[u8]| {
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
});
