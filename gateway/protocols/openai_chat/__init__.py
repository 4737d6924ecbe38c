"""The OpenAI Chat Completions protocol and its compatibles: its adapter (requests → items)
and the decoding of its responses (stream chunks and bodies → deltas)."""
