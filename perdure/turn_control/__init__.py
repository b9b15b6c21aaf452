"""Start, signal, cancel and inspect turn workflows through the Temporal client."""
