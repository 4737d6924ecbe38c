"""Hot-path I/O: the request handler, relay, finisher, admission, placement."""
