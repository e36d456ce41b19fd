//! A plugin's `ReconcileResponse`, as the operator checks it before writing
//! anything (`kplug_operator::status::check_reconcile`): outcome, JSON
//! statuses, reserved keys and condition types, targets that were sent,
//! counts, message lengths, retry_after.
//!
//! Input: the first byte picks the mode.
//! - Even (structured): the second byte is a length L; the next L bytes
//!   are the response's structure (`kplug_fuzz::ResponseInput`, built with
//!   `arbitrary`; zero bytes mean OUTCOME_OK, every fixture object sent,
//!   nothing else); the rest, split at NUL bytes (which JSON never
//!   contains), is the base's status JSON, then one extension status JSON
//!   per part (targeting the sent objects in order unless the structure
//!   says otherwise). E.g. `\0\0{"a":1}\0{"b":2}`.
//! - Odd: the rest is a protobuf-encoded `ReconcileResponse`, checked
//!   against every fixture object sent.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use kplug_fuzz::{FIXTURE, ResponseInput, check_reconcile};
use kplug_proto::v1::ReconcileResponse;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let fixture = &*FIXTURE;
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        if let Ok(resp) = ReconcileResponse::decode(rest) {
            kplug_fuzz::debug(&resp);
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
    kplug_fuzz::debug(&(sent.len(), &resp));
    check_reconcile(&resp, &fixture.base, sent);
});
