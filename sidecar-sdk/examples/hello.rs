//! The smallest useful plugin: greets every `Greeting` object by name, with
//! the punctuation its `GreetingHelloExtension` asks for.
//!
//! The kind is in `examples/hello/crd.yaml`; run this plugin next to an
//! operator for it (`docs/your-own-kind.md` shows how to start one):
//!     KPLUG_SOCKET_DIR=/tmp/kplug cargo run -p kplug-sidecar --example hello

use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response};
use serde::Deserialize;

struct Hello;

#[derive(Deserialize)]
struct GreetingSpec {
    #[serde(default = "default_salutation")]
    salutation: String,
}

fn default_salutation() -> String {
    "hello".into()
}

/// The Hello implementation's own settings, in a `GreetingHelloExtension`.
#[derive(Deserialize)]
struct HelloSettings {
    #[serde(default = "default_punctuation")]
    punctuation: String,
}

fn default_punctuation() -> String {
    "!".into()
}

impl Plugin for Hello {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        let spec: GreetingSpec = request.spec()?;
        let settings: HelloSettings = match request.extension("GreetingHelloExtension") {
            Some(extension) => extension.spec_as()?,
            None => HelloSettings {
                punctuation: default_punctuation(),
            },
        };
        let greeting = format!(
            "{}, {}{}",
            spec.salutation,
            request.name(),
            settings.punctuation
        );
        Ok(Response::ok()
            .message(format!("greeted {}", request.name()))
            .status(serde_json::json!({ "greeting": greeting })))
    }
}

#[tokio::main]
async fn main() -> Result<(), kplug_sidecar::Error> {
    let info = PluginInfo::new("hello", env!("CARGO_PKG_VERSION"))
        .description("greets Greeting objects")
        .offer(
            Offer::new("example.com", "Greeting", "Hello")
                .extension("example.com", "GreetingHelloExtension"),
        );
    kplug_sidecar::serve(info, Hello).await
}
