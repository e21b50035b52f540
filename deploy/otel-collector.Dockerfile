# The collector's own image has no shell and no HTTP client for a container healthcheck: its (static) binary on
# Alpine, whose busybox has wget, with the health_check extension on :13133 (deploy/otel-collector.yaml).
FROM otel/opentelemetry-collector-contrib:0.120.0 AS collector

FROM alpine:3.21
COPY --from=collector /otelcol-contrib /otelcol-contrib
USER 10001:10001
EXPOSE 4317 4318 8889 13133
ENTRYPOINT ["/otelcol-contrib"]
