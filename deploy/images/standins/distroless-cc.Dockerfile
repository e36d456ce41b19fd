# Stand-in for gcr.io/distroless/cc-debian12:nonroot, built by
# deploy/images/standins.sh where no registry can be reached. Like the public
# image it has no shell and no package manager: only the files of glibc,
# libgcc, libgomp, libstdc++, libssl, ca-certificates, tzdata and netbase, the
# users root, nobody and nonroot (65532), a /tmp, and USER nonroot.
FROM debian:bookworm-slim AS files
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       libgomp1 libstdc++6 libssl3 ca-certificates tzdata netbase \
    && rm -rf /var/lib/apt/lists/*
# Every file (not directory) of those packages, with the paths they need.
# Debian's merged /usr: /lib, /lib64, /bin and /sbin are links into /usr, so
# they are copied first and the package paths below land through them.
RUN mkdir -p /out/usr/lib /out/usr/lib64 /out/usr/bin /out/usr/sbin /out/etc /out/tmp /out/home/nonroot \
    && cp -a /bin /sbin /lib /lib64 /out \
    && for package in libc6 libgcc-s1 libgomp1 libstdc++6 libssl3 ca-certificates tzdata netbase; do \
         dpkg -L "$package" | while read -r path; do \
           if [ -f "$path" ] || [ -L "$path" ]; then cp -a --parents "$path" /out; fi; \
         done; \
       done \
    && cp -a --parents /etc/ssl/certs /out \
    && printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd \
    && printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' > /out/etc/group \
    && chmod 1777 /out/tmp \
    && chown 65532:65532 /out/home/nonroot

FROM scratch
COPY --from=files /out /
USER 65532
WORKDIR /home/nonroot
