"""Sans-IO stream handling: SSE decoding, neutral deltas, assembly."""
