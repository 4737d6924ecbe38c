"""One proxied response as events in, commands out: the machine, tap and stops."""
