//! A plugin's heartbeat, as the registry checks it before dialling or
//! storing anything (`kplug_operator::refusal::heartbeat_refusal`): name
//! rule, instance id, size bounds, protocol.
//!
//! Input: the first byte picks the mode. Even: the rest is structured
//! (`kplug_fuzz::HeartbeatInput`, built with `arbitrary`; long strings and
//! many offers are cheap to reach). Odd: the rest is a protobuf-encoded
//! `HeartbeatRequest`, decoded as the registry's gRPC server would.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use kplug_fuzz::{HeartbeatInput, check_heartbeat};
use kplug_proto::v1::HeartbeatRequest;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
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
    kplug_fuzz::debug(&req);
    check_heartbeat(&req);
});
