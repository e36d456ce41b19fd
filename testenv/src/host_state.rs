//! What a node or a container engine can leave behind on the machine, taken
//! before and after a test so that the test can assert nothing leaked.
//!
//! ```no_run
//! use kplug_testenv::HostSnapshot;
//! let before = HostSnapshot::take();
//! // ... start and stop a node, run and remove containers ...
//! let leaks = before.leaks(&HostSnapshot::take());
//! assert!(leaks.is_empty(), "left behind:\n{}", leaks.join("\n"));
//! ```

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

/// The sysctls a kubelet, a CNI bridge or a container engine sets.
const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "net/ipv4/ip_forward",
];

/// Host paths a kubelet, containerd and its shims create whatever they are
/// told. What counts is what is in them, not the directories themselves:
/// any engine's containerd creates `/run/containerd/s` for its shims'
/// sockets on its first container and keeps it, empty, while it runs.
const HOST_PATHS: &[&str] = &[
    "/var/log/containers",
    "/var/log/pods",
    "/var/run/netns",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/run/containerd",
    "/opt/containerd",
];

/// A node's own processes and Docker's per-container helpers, by their
/// command name (`/proc/<pid>/comm`, at most 15 characters). The processes of
/// pods and containers are found by their cgroup instead, and containerd
/// shims by their namespace.
const NODE_PROCESSES: &[&str] = &[
    "kubelet",
    "kube-controller",
    "kube-scheduler",
    // Docker's userland proxy, one per published port.
    "docker-proxy",
];

/// The containerd namespaces of the kubelet (`k8s.io`) and of Docker
/// (`moby`): a shim serving one of them serves a pod's or a container's
/// processes.
const SHIM_NAMESPACES: &[&[u8]] = &[b"k8s.io", b"moby"];

/// Cgroup path parts of pods (the kubelet's `kubepods`) and of Docker's
/// containers (cgroupfs driver).
const CONTAINER_CGROUPS: &[&str] = &["/kubepods", "/docker/"];

/// The machine's state that a node, a pod or a container can change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSnapshot {
    /// `NAME=VALUE` of each sysctl in [`SYSCTLS`].
    sysctls: BTreeSet<String>,
    /// Mount points.
    mounts: BTreeSet<String>,
    /// Network interfaces.
    links: BTreeSet<String>,
    /// Network namespaces named in /var/run/netns.
    netns: BTreeSet<String>,
    /// Every iptables rule and chain (`iptables-save`, counters dropped).
    iptables: BTreeSet<String>,
    /// Cgroups named `kubepods` (the kubelet's) in any hierarchy.
    cgroups: BTreeSet<String>,
    /// The files (anything but a directory: sockets, symlinks, state) at or
    /// below [`HOST_PATHS`].
    paths: BTreeSet<String>,
    /// `comm (pid)` of the processes of a node or a container engine: those
    /// named in [`NODE_PROCESSES`], containerd shims of the namespaces in
    /// [`SHIM_NAMESPACES`] and every process in a pod's or a Docker
    /// container's cgroup.
    processes: BTreeSet<String>,
}

impl HostSnapshot {
    /// Takes a snapshot. Reading iptables needs root (as does anything that
    /// can change it); without it the rules are left out.
    pub fn take() -> Self {
        Self {
            sysctls: SYSCTLS
                .iter()
                .map(|key| {
                    let value = fs::read_to_string(Path::new("/proc/sys").join(key))
                        .map(|v| v.trim().to_owned())
                        .unwrap_or_else(|e| format!("unreadable: {e}"));
                    format!("{}={value}", key.replace('/', "."))
                })
                .collect(),
            mounts: fs::read_to_string("/proc/self/mountinfo")
                .unwrap_or_default()
                .lines()
                .filter_map(|line| line.split(' ').nth(4).map(str::to_owned))
                .collect(),
            links: names_in("/sys/class/net"),
            netns: names_in("/var/run/netns"),
            iptables: iptables_rules(),
            cgroups: kubepods_cgroups(),
            paths: HOST_PATHS
                .iter()
                .flat_map(|p| files_under(Path::new(p)))
                .collect(),
            processes: node_processes(),
        }
    }

    /// What `after` has that this snapshot had not (or had otherwise), one
    /// line each, e.g. `mount /tmp/x/rootfs` or `sysctl vm.overcommit_memory=1
    /// (was vm.overcommit_memory=0)`. Empty when nothing leaked.
    pub fn leaks(&self, after: &Self) -> Vec<String> {
        let mut leaks = Vec::new();
        let mut added = |what: &str, before: &BTreeSet<String>, after: &BTreeSet<String>| {
            leaks.extend(
                after
                    .difference(before)
                    .map(|item| format!("{what} {item}")),
            );
        };
        added("mount", &self.mounts, &after.mounts);
        added("network interface", &self.links, &after.links);
        added("network namespace", &self.netns, &after.netns);
        added("iptables", &self.iptables, &after.iptables);
        added("cgroup", &self.cgroups, &after.cgroups);
        added("path", &self.paths, &after.paths);
        added("process", &self.processes, &after.processes);
        for now in after.sysctls.difference(&self.sysctls) {
            let key = now.split('=').next().unwrap_or_default();
            let was = self
                .sysctls
                .iter()
                .find(|s| s.split('=').next() == Some(key))
                .map_or("unset", String::as_str);
            leaks.push(format!("sysctl {now} (was {was})"));
        }
        // Rules the machine had and lost are damage too (a clean-up that
        // deleted someone else's rule).
        leaks.extend(
            self.iptables
                .difference(&after.iptables)
                .map(|rule| format!("iptables rule removed: {rule}")),
        );
        leaks
    }
}

fn names_in(dir: &str) -> BTreeSet<String> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every file at or below `path` (not following symlinks), as a path; none
/// when it does not exist.
fn files_under(path: &Path) -> Vec<String> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Vec::new();
    };
    if !meta.is_dir() {
        return vec![path.display().to_string()];
    }
    fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .flat_map(|e| files_under(&e.path()))
                .collect()
        })
        .unwrap_or_default()
}

fn iptables_rules() -> BTreeSet<String> {
    let Ok(output) = Command::new("iptables-save").output() else {
        return BTreeSet::new();
    };
    let mut table = String::new();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            if let Some(name) = line.strip_prefix('*') {
                table = name.to_owned();
                return None;
            }
            // Comments carry a timestamp; COMMIT is structure.
            if line.starts_with('#') || line == "COMMIT" {
                return None;
            }
            // `:CHAIN POLICY [packets:bytes]`: the counters change.
            let line = match line.strip_prefix(':') {
                Some(chain) => format!(":{}", chain.split(" [").next().unwrap_or(chain)),
                None => line.to_owned(),
            };
            Some(format!("{table} {line}"))
        })
        .collect()
}

fn kubepods_cgroups() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for hierarchy in names_in("/sys/fs/cgroup") {
        for candidate in ["kubepods", "kubepods.slice"] {
            let path = Path::new("/sys/fs/cgroup").join(&hierarchy).join(candidate);
            if path.is_dir() {
                found.insert(path.display().to_string());
            }
        }
    }
    if Path::new("/sys/fs/cgroup/kubepods").is_dir() {
        found.insert("/sys/fs/cgroup/kubepods".to_owned());
    }
    found
}

fn node_processes() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for pid in names_in("/proc") {
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(comm) = fs::read_to_string(format!("/proc/{pid}/comm")) else {
            continue;
        };
        let comm = comm.trim();
        let ours = NODE_PROCESSES.iter().any(|name| comm.starts_with(name))
            || (comm.starts_with("containerd-shim")
                && fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                    cmdline
                        .split(|&b| b == 0)
                        .any(|arg| SHIM_NAMESPACES.contains(&arg))
                }))
            || fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .is_ok_and(|cgroups| CONTAINER_CGROUPS.iter().any(|part| cgroups.contains(part)));
        if ours {
            found.insert(format!("{comm} ({pid})"));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> HostSnapshot {
        HostSnapshot {
            sysctls: BTreeSet::from(["vm.overcommit_memory=0".to_owned()]),
            mounts: BTreeSet::from(["/".to_owned()]),
            links: BTreeSet::from(["lo".to_owned()]),
            netns: BTreeSet::new(),
            iptables: BTreeSet::from(["filter :INPUT ACCEPT".to_owned()]),
            cgroups: BTreeSet::new(),
            paths: BTreeSet::new(),
            processes: BTreeSet::new(),
        }
    }

    #[test]
    fn nothing_changed_is_no_leak() {
        assert!(snapshot().leaks(&snapshot()).is_empty());
    }

    #[test]
    fn each_kind_of_leak_is_named() {
        let before = snapshot();
        let mut after = snapshot();
        after.sysctls = BTreeSet::from(["vm.overcommit_memory=1".to_owned()]);
        after.mounts.insert("/tmp/node/rootfs".to_owned());
        after.links.insert("ktenv0".to_owned());
        after.netns.insert("cni-1".to_owned());
        after.iptables = BTreeSet::from(["nat :KUBE-TESTENV -".to_owned()]);
        after
            .cgroups
            .insert("/sys/fs/cgroup/cpu/kubepods".to_owned());
        after.paths.insert("/var/lib/cni/results/cni-1".to_owned());
        after.processes.insert("kubelet (42)".to_owned());
        assert_eq!(
            before.leaks(&after),
            vec![
                "mount /tmp/node/rootfs",
                "network interface ktenv0",
                "network namespace cni-1",
                "iptables nat :KUBE-TESTENV -",
                "cgroup /sys/fs/cgroup/cpu/kubepods",
                "path /var/lib/cni/results/cni-1",
                "process kubelet (42)",
                "sysctl vm.overcommit_memory=1 (was vm.overcommit_memory=0)",
                "iptables rule removed: filter :INPUT ACCEPT",
            ]
        );
    }

    #[test]
    fn files_count_and_empty_directories_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("containerd");
        fs::create_dir_all(root.join("s")).unwrap();
        assert_eq!(files_under(&root), Vec::<String>::new());
        assert_eq!(
            files_under(&dir.path().join("missing")),
            Vec::<String>::new()
        );
        let socket = root.join("s").join("4f1a");
        fs::write(&socket, b"").unwrap();
        let link = root.join("log");
        std::os::unix::fs::symlink("/nowhere", &link).unwrap();
        let mut found = files_under(&root);
        found.sort();
        assert_eq!(
            found,
            vec![link.display().to_string(), socket.display().to_string()]
        );
    }
}
