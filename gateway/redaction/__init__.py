"""Redaction of everything stored: rules, truncation, the redactor (sans-IO)."""
