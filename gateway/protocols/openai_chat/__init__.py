"""The OpenAI Chat Completions protocol and its compatibles: its adapter (requests → items),
the decoding of its responses (stream chunks and bodies → deltas), and what a message says of
its reasoning (its size, and what the provider wants back in a tool loop)."""
