# Stand-in for python:3.11-slim-bookworm, built by deploy/images/standins.sh
# where no registry can be reached: Debian's own Python 3.11 (bookworm's) with
# venv and pip, `python` on the PATH as in the public image. pip trusts the
# system's CA bundle (where the stand-ins add this machine's own CAs), not
# only its vendored one.
FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       python3 python3-venv python3-pip python-is-python3 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > /etc/pip.conf
CMD ["python3"]
