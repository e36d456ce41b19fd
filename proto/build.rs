//! Generates the kplug.v1 messages and services at build time; generated
//! code is never committed. protoc comes from `protoc-bin-vendored`, so no
//! system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "kplug/v1/types.proto",
        "kplug/v1/registry.proto",
        "kplug/v1/plugin.proto",
    ];
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    // Default stubs: a plugin written from the proto alone implements the
    // calls it supports, and the rest answer UNIMPLEMENTED, which is what
    // the protocol asks of a call whose capability is not advertised.
    tonic_prost_build::configure()
        .generate_default_stubs(true)
        .compile_with_config(config, &protos, &["."])?;
    Ok(())
}
