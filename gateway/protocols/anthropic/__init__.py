"""The Anthropic Messages protocol: its adapter, stream events, content blocks and usage."""
