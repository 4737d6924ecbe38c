"""The crash-safe hand-off: spool, its codec and drain, the recorder process."""
