"""View models of the pages: what a trace, a step, a list row shows, formatted for people."""
