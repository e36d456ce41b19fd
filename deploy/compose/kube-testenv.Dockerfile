# kube-testenv (testenv/): a real kube-apiserver with an embedded etcd, the
# control plane the tests use, as the Kubernetes API of compose.yaml.
#
#   docker build -f deploy/compose/kube-testenv.Dockerfile -t kplug/kube-testenv .
#
# It listens on 127.0.0.1 only and writes an admin kubeconfig naming
# https://127.0.0.1:<port>; compose.yaml runs its clients in this container's
# network namespace (network_mode: service:kube-api) and hands them the
# kubeconfig through a volume.

# Go as in testenv/go.mod's `go` line (1.25) or newer.
FROM golang:1.25-bookworm AS build
WORKDIR /src/testenv
COPY testenv/go.mod testenv/go.sum ./
RUN --mount=type=cache,id=kplug-go-mod,target=/go/pkg/mod go mod download
COPY testenv/*.go ./
# Same build as the root Makefile's testenv target: the version is stamped
# in because a module build leaves it at v0.0.0 and clients would see that.
RUN --mount=type=cache,id=kplug-go-mod,target=/go/pkg/mod \
    --mount=type=cache,id=kplug-go-build,target=/root/.cache/go-build \
    version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" \
    && major="${version#v}" && major="${major%%.*}" \
    && minor="${version#v*.}" && minor="${minor%%.*}" \
    && pkg=k8s.io/component-base/version \
    && go build -trimpath -buildvcs=false \
       -ldflags "-s -w -X ${pkg}.gitVersion=${version} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean" \
       -o /out/kube-testenv . \
    && install -d -m 0755 /out/state

# debian-slim rather than distroless: the compose healthcheck runs `test`.
FROM debian:bookworm-slim
COPY --from=build /out/kube-testenv /usr/local/bin/kube-testenv
# Where the kubeconfig goes (a named volume shared with the clients) and the
# temporary directory for etcd and the certificates; both owned by the
# runtime user, which every kplug image also runs as, so the kubeconfig
# (mode 0600) is readable by them.
COPY --from=build --chown=65532:65532 /out/state /var/run/kube-testenv
ENV TMPDIR=/tmp
USER 65532:65532
EXPOSE 6443 8080
ENTRYPOINT ["/usr/local/bin/kube-testenv"]
CMD ["--kubeconfig", "/var/run/kube-testenv/kubeconfig", "--port", "6443", "--ready-timeout", "120s"]
