# Stand-in for registry.k8s.io/kubectl:v1.35.4, built by
# deploy/images/standins.sh where no registry can be reached. Like the public
# image: one kubectl binary at /bin/kubectl as the entrypoint, no shell. The
# binary is the one `make node-binaries` builds from the k8s.io/kubernetes
# module of testenv/go.mod (the script checks that its version is the tag's).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY kubectl /bin/kubectl
ENTRYPOINT ["/bin/kubectl"]
