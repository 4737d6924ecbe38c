"""OpenTelemetry export: steps as GenAI spans over OTLP (the sink, its span mapping, ids)."""
