//! The smallest useful plugin: greets every `Greeting` object by name.
//!
//! Run it next to an operator managing `example.com/v1/Greeting`:
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

impl Plugin for Hello {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        let spec: GreetingSpec = request.spec()?;
        let greeting = format!("{}, {}!", spec.salutation, request.name());
        Ok(Response::ok()
            .message(format!("greeted {}", request.name()))
            .status(serde_json::json!({ "greeting": greeting })))
    }
}

#[tokio::main]
async fn main() -> Result<(), kplug_sidecar::Error> {
    let info = PluginInfo::new("hello", env!("CARGO_PKG_VERSION"))
        .description("greets Greeting objects")
        .offer(Offer::new("example.com", "Greeting", "Hello"));
    kplug_sidecar::serve(info, Hello).await
}
