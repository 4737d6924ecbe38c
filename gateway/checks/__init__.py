"""Rules over a step's items: pairing, output, tools, loops, budgets (sans-IO)."""
