//! Packets sent off the machine: the transmit counters of the interfaces that
//! carry its default routes (IPv4 and IPv6), read before and after a test.
//! Everything a node, a pod or a container sends to another machine (a DNS
//! query to the machine's resolver included) leaves through one of them;
//! traffic among pods, containers and loopback never does.
//!
//! ```no_run
//! use kplug_testenv::Egress;
//! let before = Egress::now();
//! // ... run pods or containers ...
//! let sent = before.sent_since();
//! assert!(sent.is_empty(), "left the machine: {}", sent.join(", "));
//! ```

use std::collections::BTreeMap;
use std::fs;

/// The transmit counters of the machine's uplinks at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// `tx_packets` by interface name.
    sent: BTreeMap<String, u64>,
}

impl Egress {
    /// The counters now.
    pub fn now() -> Self {
        Self {
            sent: uplinks()
                .into_iter()
                .map(|name| {
                    let count = tx_packets(&name);
                    (name, count)
                })
                .collect(),
        }
    }

    /// One line per uplink that has sent packets since `self` was taken,
    /// e.g. `eth0: 3 packets sent`; empty when nothing left the machine.
    pub fn sent_since(&self) -> Vec<String> {
        self.sent
            .iter()
            .filter_map(|(name, before)| {
                let now = tx_packets(name);
                (now > *before).then(|| format!("{name}: {} packets sent", now - before))
            })
            .collect()
    }

    /// The interfaces counted (those of the default routes).
    pub fn interfaces(&self) -> Vec<&str> {
        self.sent.keys().map(String::as_str).collect()
    }
}

fn tx_packets(interface: &str) -> u64 {
    fs::read_to_string(format!("/sys/class/net/{interface}/statistics/tx_packets"))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// The interfaces of the default routes, from the kernel's route tables.
fn uplinks() -> Vec<String> {
    let mut found = Vec::new();
    // IPv4: Iface, Destination (hex), ...; the default route's is 00000000.
    if let Ok(text) = fs::read_to_string("/proc/net/route") {
        found.extend(text.lines().skip(1).filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(1) == Some(&"00000000")).then(|| fields[0].to_owned())
        }));
    }
    // IPv6: destination, prefix length, ..., interface last; ::/0 is the
    // default route (lo carries the unreachable one).
    if let Ok(text) = fs::read_to_string("/proc/net/ipv6_route") {
        found.extend(text.lines().filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let interface = *fields.last()?;
            (fields.first() == Some(&"00000000000000000000000000000000")
                && fields.get(1) == Some(&"00")
                && interface != "lo")
                .then(|| interface.to_owned())
        }));
    }
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_an_uplink_sends() {
        let mut egress = Egress::now();
        // Count lo as if it were an uplink, and send on it.
        egress.sent.insert("lo".to_owned(), tx_packets("lo"));
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.send_to(b"x", "127.0.0.1:9").unwrap();
        let sent = egress.sent_since();
        assert!(sent.iter().any(|line| line.starts_with("lo: ")), "{sent:?}");
        egress.sent.insert("lo".to_owned(), u64::MAX);
        assert!(!egress.sent_since().iter().any(|l| l.starts_with("lo: ")));
    }
}
