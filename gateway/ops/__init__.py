"""Processes: serving, workers, the HTTP server and logs."""
