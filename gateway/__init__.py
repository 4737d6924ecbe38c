"""Loopwatch: an observability gateway for LLM agent loops."""

__version__ = "0.1.0"
