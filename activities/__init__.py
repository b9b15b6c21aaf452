"""All of Perdure's I/O that runs inside Temporal activities."""
