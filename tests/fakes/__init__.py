"""In-process fakes of external systems, speaking their real wire protocols."""
