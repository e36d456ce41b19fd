//! End to end: the Go and the TypeScript SDKs' hello plugins
//! (`sidecar-sdk/go/examples/hello`, `sidecar-sdk/typescript/examples/hello.ts`)
//! as real processes on a real socket dir, with the real `kplug-operator`
//! managing `examples/hello`'s `Greeting` kind on the real kube-apiserver.
//! For each: it registers; a Greeting with a GreetingHelloExtension is
//! reconciled (status on both, Ready, the plugin's Event); a SIGTERM with a
//! call in flight unregisters, drains the call and exits 0; a SIGKILL is
//! noticed in under 1 s; a deletion calls Finalize and the object goes.
//!
//! The plugins are built by `make sdk-hellos` (a prerequisite of `make
//! test-rust`): the Go one to `<target dir>/sdk-hellos/hello-go`, the
//! TypeScript one to `sidecar-sdk/typescript/build/examples/hello.js`. By
//! hand:
//!
//! ```sh
//! make sdk-hellos && cargo build --workspace --bins --examples
//! cargo test -p kplug-operator --test go_typescript_plugins
//! ```

mod support;

use std::path::PathBuf;

use support::sdk_hellos::{Hello, end_to_end};

#[derive(Clone, Copy, Debug)]
enum Sdk {
    Go,
    TypeScript,
}

impl Sdk {
    /// The plugin program and its arguments, as `make sdk-hellos` builds it.
    fn hello(self) -> Hello {
        let built = match self {
            Sdk::Go => kplug_testenv::target_dir().join("sdk-hellos/hello-go"),
            Sdk::TypeScript => kplug_testenv::workspace_root()
                .join("sidecar-sdk/typescript/build/examples/hello.js"),
        };
        assert!(
            built.is_file(),
            "the {self:?} hello plugin is not built at {}: run `make sdk-hellos` \
             (`make test` does it)",
            built.display()
        );
        let (program, args): (PathBuf, Vec<PathBuf>) = match self {
            Sdk::Go => (built, vec![]),
            Sdk::TypeScript => ("node".into(), vec![built]),
        };
        Hello {
            sdk: match self {
                Sdk::Go => "Go",
                Sdk::TypeScript => "TypeScript",
            },
            program,
            args,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_hello_plugin_end_to_end() {
    end_to_end(&Sdk::Go.hello()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_hello_plugin_end_to_end() {
    end_to_end(&Sdk::TypeScript.hello()).await;
}
