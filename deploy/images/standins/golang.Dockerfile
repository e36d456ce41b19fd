# Stand-in for golang:1.25-bookworm, built by deploy/images/standins.sh where
# no registry can be reached. Like the public image: Debian with gcc, libc6-dev,
# git and ca-certificates, Go under /usr/local/go, GOPATH=/go, and
# GOTOOLCHAIN=local (a build never downloads another toolchain). The
# toolchain is the build machine's own (the script checks that it is at least
# the tag's release and names it in the image's description).
FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev git ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY go /usr/local/go
ENV GOPATH=/go \
    GOTOOLCHAIN=local \
    PATH=/go/bin:/usr/local/go/bin:$PATH
RUN install -d -m 0777 /go/bin /go/src
WORKDIR /go
