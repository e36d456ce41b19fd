//! Heartbeats from fuzz input, and the registry's rules they are checked
//! against.

use arbitrary::Arbitrary;
use kplug_proto::limits;
use kplug_proto::v1;

use crate::{Text, cycle, debug};

/// Dictionary for heartbeat strings.
pub const HEARTBEAT_WORDS: &[&str] = &[
    "postgresql",
    "pg-2",
    "a",
    "",
    "-",
    "-pg",
    "pg-",
    "Postgres",
    "pg_sql",
    "kplug.v1",
    "kplug.v2",
    "KPLUG.V1",
    "kplug.v1 ",
    "plugins/pg.sock",
    "1.0.0",
    "0f8fad5b-d9cb-469f-a165-70867728950e",
    "myorg.org",
    "DatabaseTable",
    "PostgreSQL",
];

/// A heartbeat, from fuzz input.
#[derive(Arbitrary, Debug)]
pub struct HeartbeatInput {
    name: Text,
    version: Text,
    instance_id: Text,
    protocol: Text,
    socket: Text,
    offers: Vec<OfferInput>,
    /// Offers are cycled to `offer_count % 100` when that is more.
    offer_count: u8,
    capabilities: Vec<i32>,
}

#[derive(Arbitrary, Debug, Clone)]
struct OfferInput {
    base: Option<(Text, Text)>,
    implementation: Text,
    extensions: Vec<(Text, Text)>,
    /// Extensions are cycled to `extension_count % 33` when that is more.
    extension_count: u8,
}

impl HeartbeatInput {
    /// The protobuf message.
    pub fn build(&self) -> v1::HeartbeatRequest {
        let w = HEARTBEAT_WORDS;
        let group_kind = |(g, k): &(Text, Text)| v1::GroupKind {
            group: g.build(w),
            kind: k.build(w),
        };
        let offers: Vec<v1::Offer> = self
            .offers
            .iter()
            .map(|o| {
                let extensions: Vec<v1::GroupKind> = o.extensions.iter().map(group_kind).collect();
                v1::Offer {
                    children: Default::default(),
                    base: o.base.as_ref().map(group_kind),
                    implementation: o.implementation.build(w),
                    extensions: cycle(
                        &extensions,
                        usize::from(o.extension_count % 33),
                        true,
                        |gk, i| gk.kind.push_str(&i.to_string()),
                    ),
                }
            })
            .collect();
        v1::HeartbeatRequest {
            mutations: Default::default(),
            name: self.name.build(w),
            version: self.version.build(w),
            instance_id: self.instance_id.build(w),
            protocol: self.protocol.build(w),
            socket: self.socket.build(w),
            offers: cycle(
                &offers,
                usize::from(self.offer_count % 100),
                true,
                |o, i| {
                    o.implementation.push_str(&i.to_string());
                },
            ),
            capabilities: self.capabilities.clone(),
            // Hooks and call policies are not fuzzed yet.
            hooks: Vec::new(),
            call_policies: Vec::new(),
        }
    }
}

/// Checks `kplug_checks::heartbeat::check_heartbeat` on `req`: it never
/// panics, and a heartbeat it accepts satisfies every documented rule (a
/// DNS-label name, an instance id, the size bounds of
/// `kplug_proto::limits`, the protocol).
pub fn check_heartbeat(req: &v1::HeartbeatRequest) {
    let result = kplug_checks::heartbeat::check_heartbeat(req).map_err(|r| r.to_string());
    debug(&result);
    match result {
        Err(reason) => assert!(!reason.is_empty(), "a refusal without a reason"),
        Ok(()) => {
            let name = &req.name;
            assert!(
                !name.is_empty() && name.len() <= limits::MAX_NAME_LEN,
                "accepted name of {} bytes: {name:?}",
                name.len()
            );
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !name.starts_with('-')
                    && !name.ends_with('-'),
                "accepted a name that is not a DNS label: {name:?}"
            );
            assert!(!req.instance_id.is_empty(), "accepted an empty instance_id");
            assert!(
                req.instance_id.len() <= limits::MAX_INSTANCE_ID_LEN,
                "accepted an instance_id of {} bytes",
                req.instance_id.len()
            );
            assert!(
                req.version.len() <= limits::MAX_VERSION_LEN,
                "accepted a version of {} bytes",
                req.version.len()
            );
            assert!(
                req.offers.len() <= limits::MAX_OFFERS,
                "accepted {} offers",
                req.offers.len()
            );
            for offer in &req.offers {
                assert!(
                    offer.extensions.len() <= limits::MAX_EXTENSIONS_PER_OFFER,
                    "accepted an offer with {} extensions",
                    offer.extensions.len()
                );
            }
            assert_eq!(
                req.protocol,
                kplug_proto::PROTOCOL,
                "accepted another protocol"
            );
        }
    }
}
