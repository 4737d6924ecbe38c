"""Where a request goes: the configured upstream for its protocol and model, and who that is.

What a protocol's wire decides here (its route name, default upstream, the header a route's
key goes in) comes from its adapter as a `Wire`: no protocol is named in this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import unquote, urlsplit

from gateway.config import Settings
from gateway.errors import BadRequest

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
class Wire:
    """What routing needs of a wire protocol, declared by its adapter (`protocols.registry`)."""

    protocol: str  # the name routes match (`Route.protocol`)
    provider: str  # the GenAI provider named when the upstream's host is not a known one
    default_upstream: Callable[[Settings], str]  # the upstream when no route matches
    key_header: str  # the header a route's own key is sent in
    key_prefix: str = ""  # put before the key in that header (`Bearer `)
    # Passthrough paths that belong with another protocol's API, and that protocol's wire:
    # they go to its upstream with its key.
    paths: tuple[tuple[str, Wire], ...] = ()

    def claiming(self, path: str) -> Wire:
        """The wire a request to `path` is routed by: this one unless a path claims it."""
        for prefix, wire in self.paths:
            if path.startswith(prefix):
                return wire
        return self


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    api_key: str | None  # the route's own provider key, replacing the client's
    wire: Wire

    @property
    def credential(self) -> tuple[str, str] | None:
        """The header carrying the route's key, and its value; None: the client's key goes."""
        if self.api_key is None:
            return None
        return self.wire.key_header, self.wire.key_prefix + self.api_key


@dataclass(frozen=True, slots=True)
class Provider:
    """Who answers a request: the provider's name and the upstream's host and port."""

    name: str
    address: str
    port: int


def provider_of(settings: Settings, wire: Wire, model: str | None, path: str = "") -> Provider:
    """The upstream a step of `wire` (and model) goes to, named as the GenAI conventions do."""
    wire = wire.claiming(path)
    base, _ = _base_for(settings, wire, model)
    parts = urlsplit(base)
    host = (parts.hostname or "").lower()
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, 443)
    for suffix, name in PROVIDER_HOSTS:
        if host == suffix or host.endswith("." + suffix):
            return Provider(name, host, port)
    return Provider(wire.provider, host, port)


def resolve(settings: Settings, wire: Wire, model: str | None, path: str, query: str) -> Target:
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
    # A provider's other endpoints (Anthropic's count_tokens, batches) belong with its API:
    # sent to another upstream they would carry its key to the wrong provider.
    wire = wire.claiming(decoded)
    base, api_key = _base_for(settings, wire, model)
    if urlsplit(base).path.endswith("/v1") and path.startswith("/v1/"):
        path = path[3:]
    url = base + path + (f"?{query}" if query else "")
    return Target(url=url, api_key=api_key, wire=wire)


def _base_for(settings: Settings, wire: Wire, model: str | None) -> tuple[str, str | None]:
    for route in settings.routes:
        if route.protocol != wire.protocol:
            continue
        if route.model is None or (model is not None and fnmatchcase(model, route.model)):
            return route.upstream, route.api_key
    return wire.default_upstream(settings), None
