"""The designs `bench.compare` sets beside Perdure: a session entity workflow, Temporal's Workflow
Streams, and the provider called directly (the floor). See docs/benchmarks.md, "Side by side"."""
