"""The OTLP exporter the settings ask for (http/protobuf, or gRPC from the `otlp-grpc` extra),
and the SDK's own export logs held to one line a minute per logger."""

from __future__ import annotations

import logging
import time
from urllib.parse import urlsplit

from opentelemetry.sdk.trace.export import SpanExporter

from gateway.config import Settings
from gateway.errors import ConfigError

TRACES_PATH = "/v1/traces"
# The SDK logs every failed or retried export; with a dead collector that is a line every
# few seconds. Loopwatch counts drops itself and lets these through once a minute.
SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
)


def traces_url(endpoint: str) -> str:
    """OTEL_EXPORTER_OTLP_ENDPOINT is a base (`/v1/traces` is appended); a URL that already
    ends with it (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is used as it is."""
    if endpoint.rstrip("/").endswith(TRACES_PATH):
        return endpoint.rstrip("/")
    return endpoint.rstrip("/") + TRACES_PATH


def build_exporter(settings: Settings) -> SpanExporter:
    endpoint = settings.otlp_endpoint
    if endpoint is None:
        raise ConfigError("invalid setting otlp_endpoint: export needs an endpoint")
    headers = dict(settings.otlp_headers)
    if settings.otlp_protocol == "grpc":
        return _grpc_exporter(endpoint, headers, settings.otlp_timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(
        endpoint=traces_url(endpoint), headers=headers, timeout=settings.otlp_timeout
    )


def _grpc_exporter(endpoint: str, headers: dict[str, str], timeout: float) -> SpanExporter:
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )
    except ImportError:
        raise ConfigError(
            "invalid setting otlp_protocol (LOOPWATCH_OTLP_PROTOCOL): grpc needs the "
            "otlp-grpc extra: pip install 'loopwatch[otlp-grpc]'"
        ) from None
    parts = urlsplit(endpoint)
    # Typed even where mypy cannot see the optional extra (it is then Any).
    exporter: SpanExporter = GrpcSpanExporter(
        endpoint=parts.netloc,
        insecure=parts.scheme == "http",
        headers=headers,
        timeout=timeout,
    )
    return exporter


class _OncePerInterval(logging.Filter):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self._seconds = seconds
        self._last: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < self._seconds:
            return False
        self._last = now
        return True


def quiet_sdk_logs(seconds: float) -> None:
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OncePerInterval) for f in logger.filters):
            logger.addFilter(_OncePerInterval(seconds))
