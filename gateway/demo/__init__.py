"""`loopwatch demo`: a scripted provider, sample agent runs and the gateway that records them
(`gateway.demo.main` runs it)."""
