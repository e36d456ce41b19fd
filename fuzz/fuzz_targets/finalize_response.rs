//! A plugin's `FinalizeResponse`, as the operator checks it
//! (`kplug_operator::status::check_finalize`): outcome, events (count,
//! objects they are about, message lengths), retry_after.
//!
//! Input: the first byte picks the mode. Even: the rest is structured
//! (`kplug_fuzz::ResponseInput`; its conditions and statuses are unused).
//! Odd: the rest is a protobuf-encoded `FinalizeResponse`, checked against
//! every fixture object sent.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use kplug_fuzz::{FIXTURE, ResponseInput, check_finalize};
use kplug_proto::v1::FinalizeResponse;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let fixture = &*FIXTURE;
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        if let Ok(resp) = FinalizeResponse::decode(rest) {
            kplug_fuzz::debug(&resp);
            check_finalize(&resp, &fixture.base, &fixture.objects);
        }
        return;
    }
    let Ok(input) = ResponseInput::arbitrary_take_rest(Unstructured::new(rest)) else {
        return;
    };
    let sent = fixture.sent(input.unsent);
    let resp = input.finalize(fixture, sent);
    kplug_fuzz::debug(&(sent.len(), &resp));
    check_finalize(&resp, &fixture.base, sent);
});
