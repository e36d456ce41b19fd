//! End to end: the Java SDK's hello plugin
//! (`sidecar-sdk/java/examples/src/main/java/io/kplug/examples/hello/Hello.java`)
//! as a real JVM on a real socket dir, with the real `kplug-operator`
//! managing `examples/hello`'s `Greeting` kind on the real kube-apiserver:
//! it registers; a Greeting with a GreetingHelloExtension is reconciled
//! (status on both, Ready, the plugin's Event); a SIGTERM with a call in
//! flight unregisters, drains the call and exits 0; a SIGKILL is noticed in
//! under 1 s; a deletion calls Finalize and the object goes (the scenario of
//! `support/sdk_hellos.rs`, which the Go and TypeScript plugins go through
//! too, in `go_typescript_plugins.rs`).
//!
//! The plugin is built by `make sdk-hellos` (a prerequisite of `make
//! test-rust`): `<target dir>/sdk-hellos/hello-java`, an executable that
//! starts the JVM. By hand:
//!
//! ```sh
//! make sdk-hellos && cargo build --workspace --bins --examples
//! cargo test -p kplug-operator --test java_plugins
//! ```

mod support;

use support::sdk_hellos::{Hello, end_to_end};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_hello_plugin_end_to_end() {
    let program = kplug_testenv::target_dir().join("sdk-hellos/hello-java");
    assert!(
        program.is_file(),
        "the Java hello plugin is not built at {}: run `make sdk-hellos` \
         (`make test` does it)",
        program.display()
    );
    end_to_end(&Hello {
        sdk: "Java",
        program,
        args: vec![],
    })
    .await;
}
