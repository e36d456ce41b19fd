# Seeds the Go build cache of deploy/compose/kube-testenv.Dockerfile (its
# cache mount kplug-go-build) from this machine's cache of the same build,
# so that `make images` on a new machine does not compile kube-apiserver a
# second time: `make testenv` compiled it minutes before, with the same Go
# (the golang stand-in is this machine's Go), the same C compiler (Debian
# bookworm's gcc) and the same flags (-trimpath), and the image's build
# finds every package in the cache and only links (the binary is the same,
# byte for byte). Where the toolchains differ (a real golang image) nothing
# matches and the image's build compiles as before: the cache is keyed by
# what went into each package, so a seed can make a build faster, never
# different.
#
# Built by `make images` with the cache directory as its context (the
# Makefile's K8S_GOCACHE); the image itself is not used.
FROM golang:1.25-bookworm
RUN --mount=type=cache,id=kplug-go-build,target=/root/.cache/go-build \
    --mount=type=bind,target=/seed \
    cp -a /seed/. /root/.cache/go-build/
