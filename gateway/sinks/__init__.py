"""Where finished steps go besides the store: metrics, webhooks, OTLP."""
