# Stand-in for rust:1.95.0-slim-bookworm, built by deploy/images/standins.sh
# where no registry can be reached. Like the public image: Debian slim with
# gcc, libc6-dev and ca-certificates, the toolchain under /usr/local/rustup
# and cargo on the PATH. The toolchain is the build machine's own (the same
# release), copied into the context by the script.
FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY toolchain /usr/local/rustup/toolchains/stand-in
RUN install -d /usr/local/cargo/bin \
    && for tool in cargo rustc rustdoc; do \
         ln -s ../../rustup/toolchains/stand-in/bin/"$tool" /usr/local/cargo/bin/"$tool"; \
       done
ENV RUSTUP_HOME=/usr/local/rustup \
    CARGO_HOME=/usr/local/cargo \
    PATH=/usr/local/cargo/bin:$PATH
