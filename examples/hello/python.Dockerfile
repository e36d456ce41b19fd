# The Python hello plugin (sidecar-sdk/python/examples/hello.py) as a sidecar
# image: docs/deploy.md's worked example of adding a plugin container of your
# own. Built from the repository root (the SDK generates its gRPC stubs from
# proto/ at build time):
#
#   docker build -f examples/hello/python.Dockerfile -t registry.example.com/hello-python:0.1.0 .
#
# The same pattern as docs/plugin-images.md's Python template.

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KPLUG_PROTO_DIR=/src/proto
WORKDIR /src
COPY proto/kplug proto/kplug
COPY sidecar-sdk/python sidecar-sdk/python
# A virtualenv, so the runtime stage copies one directory and no build tools.
RUN python -m venv /opt/kplug \
    && /opt/kplug/bin/pip install --no-cache-dir ./sidecar-sdk/python

# The same base image, so the virtualenv's interpreter path stays valid.
FROM python:3.11-slim-bookworm
COPY --from=build /opt/kplug /opt/kplug
COPY sidecar-sdk/python/examples/hello.py /opt/hello/hello.py
RUN install -d -o 65532 -g 65532 -m 0755 /var/run/kplug
# No .pyc writes at run time: the root filesystem is read-only in the pod.
ENV PATH=/opt/kplug/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KPLUG_SOCKET_DIR=/var/run/kplug
USER 65532:65532
ENTRYPOINT ["/opt/kplug/bin/python", "/opt/hello/hello.py"]
