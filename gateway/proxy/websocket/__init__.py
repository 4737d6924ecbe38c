"""A wire protocol's WebSocket mode: the upgrade proxied to the provider's socket, frames
relayed both ways unchanged, each request on it a step."""
