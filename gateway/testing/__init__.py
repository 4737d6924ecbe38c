"""The pytest plugin (entry point `loopwatch`): a gateway per test, its traces asserted,
recorded as cassettes or replayed from them offline."""
