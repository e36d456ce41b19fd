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

use libfuzzer_sys::fuzz_target;

// The body is a function of the kplug-fuzz library (fuzz/lib), so that
// `cargo test -p kplug-fuzz` replays the committed inputs on stable.
fuzz_target!(|data: &[u8]| kplug_fuzz::targets::response_frames(data));
