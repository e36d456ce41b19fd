//! The README section's commands, and the node they start.

use std::process::{Child, Command, Stdio};

use kplug_deploy_tests::{docs, repo_root};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{README, ROLLOUT, SECTION};

/// The section's commands: the setup, the node (left running), and the
/// second shell's.
pub(crate) struct Walkthrough {
    pub(crate) setup: Vec<String>,
    pub(crate) node: String,
    pub(crate) second: Vec<String>,
}

impl Walkthrough {
    pub(crate) fn read() -> Self {
        let commands = docs::commands(README, SECTION);
        let split = commands
            .iter()
            .position(|c| c == "# in another shell:")
            .unwrap_or_else(|| panic!("no \"# in another shell:\" in {commands:#?}"));
        let (node, setup) = commands[..split].split_last().expect("a node command");
        assert!(
            node.contains("kube-testenv --node"),
            "the first shell ends with the node: {node}"
        );
        Self {
            setup: setup.to_vec(),
            node: node.clone(),
            second: commands[split + 1..].to_vec(),
        }
    }

    /// The kubeconfig the second shell exports.
    pub(crate) fn kubeconfig(&self) -> String {
        self.second
            .iter()
            .find_map(|c| c.strip_prefix("export KUBECONFIG="))
            .expect("the second shell exports KUBECONFIG")
            .to_owned()
    }
}

/// Starts the node command and waits for its ready line.
pub(crate) fn start_node(command: &str) -> Child {
    let mut node = Command::new("bash")
        .args(["-c", &format!("exec {command}")])
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the node");
    let stdout = node.stdout.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    // Reads to the end, so the node never blocks on a full pipe.
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("kube-testenv ready:") {
                let _ = ready_tx.send(());
            }
        }
    });
    if ready_rx.recv_timeout(ROLLOUT).is_err() {
        stop_node(&mut node);
        panic!("the node was not ready within {ROLLOUT:?}");
    }
    node
}

/// Ctrl-C, as the docs say; it must stop cleanly.
pub(crate) fn stop_node(node: &mut Child) -> std::process::ExitStatus {
    let interrupted = Command::new("kill")
        .args(["-INT", &node.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success(), "kill -INT the node");
    node.wait().unwrap()
}

pub(crate) async fn client_of(kubeconfig: &str) -> Client {
    let config = Kubeconfig::read_from(kubeconfig).expect("the node's kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .expect("a client config");
    Client::try_from(config).expect("a client")
}
