"""What a run is: how it ended, what it cost, how long it took (sans-IO)."""
