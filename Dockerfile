# The inferd image: the single executable (`bun run build`) on a slim Debian, run as a non-root user
# with its data dir on the volume /data.
#
#   docker build -t registry.example.com/inferd:0.1.0 .
#   docker run -p 8420:8420 -p 8421:8421 -v inferd-data:/data registry.example.com/inferd:0.1.0
#
# Serving vLLM or SGLang on GPU agents needs those programs beside inferd: build on an image that has
# them, e.g. --build-arg BASE=vllm/vllm-openai:<version> (the built-in llama.cpp runtime needs nothing).

ARG BASE=debian:bookworm-slim

FROM oven/bun:1.4.5 AS build
WORKDIR /src
COPY package.json bun.lock bunfig.toml ./
RUN bun install --frozen-lockfile
COPY . .
# The target of the platform being built (docker buildx --platform linux/amd64,linux/arm64).
ARG TARGETARCH
RUN case "${TARGETARCH:-amd64}" in \
      amd64) target=linux-x64 ;; \
      arm64) target=linux-arm64 ;; \
      *) echo "no inferd build for $TARGETARCH" >&2; exit 1 ;; \
    esac \
 && bun run build --target "$target" \
 && install -m 0755 "dist/inferd-$target" /inferd

FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 inferd \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin inferd \
 && mkdir -p /data && chown 10001:10001 /data && chmod 0700 /data
COPY --from=build /inferd /usr/local/bin/inferd
USER 10001:10001
ENV INFERD_DATA_DIR=/data
VOLUME /data
# HTTP (API, dashboard, /metrics) and HTTPS for agents (--port, --tls-port).
EXPOSE 8420 8421
ENTRYPOINT ["inferd"]
CMD ["serve", "--host", "0.0.0.0"]
