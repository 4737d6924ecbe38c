"""Offline replay of a cassette: a server answering an agent's requests from a recorded
trace, step by step, until the agent's requests differ from the recording."""
