"""Where a request goes: the configured upstream for its protocol and model, and who that is."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import unquote, urlsplit

from gateway.config import Settings
from gateway.errors import BadRequest

ANTHROPIC_PATHS = ("/v1/messages/",)
# Hosts whose provider the OpenTelemetry GenAI conventions name (`gen_ai.provider.name`);
# any other host is named by the wire protocol it speaks.
PROVIDER_HOSTS = (
    ("api.openai.com", "openai"),
    ("openai.azure.com", "azure.ai.openai"),
    ("api.anthropic.com", "anthropic"),
    ("api.deepseek.com", "deepseek"),
    ("api.groq.com", "groq"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.moonshot.ai", "moonshot_ai"),
    ("api.cohere.com", "cohere"),
    ("api.cohere.ai", "cohere"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("amazonaws.com", "aws.bedrock"),
)
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    api_key: str | None  # the route's own provider key, replacing the client's
    protocol: str


@dataclass(frozen=True, slots=True)
class Provider:
    """Who answers a request: the provider's name and the upstream's host and port."""

    name: str
    address: str
    port: int


def provider_of(settings: Settings, protocol: str, model: str | None, path: str = "") -> Provider:
    """The upstream a step of `protocol` (and model) goes to, named as the GenAI conventions do."""
    if protocol == "passthrough" and path.startswith(ANTHROPIC_PATHS):
        protocol = "messages"
    base, _ = _base_for(settings, protocol, model)
    parts = urlsplit(base)
    host = (parts.hostname or "").lower()
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, 443)
    for suffix, name in PROVIDER_HOSTS:
        if host == suffix or host.endswith("." + suffix):
            return Provider(name, host, port)
    return Provider("anthropic" if protocol == "messages" else "openai", host, port)


def resolve(settings: Settings, protocol: str, model: str | None, path: str, query: str) -> Target:
    """`path` and `query` are the client's, still percent-encoded (the path starts /v1/);
    the base URL decides how they are joined, and they are forwarded as sent.

    A base ending in /v1 (OpenAI style, like OPENAI_BASE_URL) takes the path after /v1;
    any other base (Anthropic style, like ANTHROPIC_BASE_URL) takes the whole path.
    """
    decoded = path
    if "%" in path or "." in path:  # else no segment can be (or decode to) a dot segment
        segments = [unquote(segment) for segment in path.split("/")]
        if "." in segments or ".." in segments:
            # Resolved by the HTTP client, they would reach paths of the provider's host
            # outside its API base, with the route's own key.
            message = "The request path must not contain '.' or '..' segments."
            raise BadRequest(message, param="path")
        decoded = "/".join(segments)
    if protocol == "passthrough" and decoded.startswith(ANTHROPIC_PATHS):
        # Anthropic's other endpoints (count_tokens, batches) belong with its Messages API:
        # sent to the OpenAI upstream they would carry an Anthropic key to the wrong provider.
        protocol = "messages"
    base, api_key = _base_for(settings, protocol, model)
    if urlsplit(base).path.endswith("/v1") and path.startswith("/v1/"):
        path = path[3:]
    url = base + path + (f"?{query}" if query else "")
    return Target(url=url, api_key=api_key, protocol=protocol)


def _base_for(settings: Settings, protocol: str, model: str | None) -> tuple[str, str | None]:
    for route in settings.routes:
        if route.protocol != protocol:
            continue
        if route.model is None or (model is not None and fnmatchcase(model, route.model)):
            return route.upstream, route.api_key
    if protocol == "messages":
        return settings.anthropic_upstream_url, None
    return settings.upstream_url, None
