"""The provider relay: holds each model step's provider stream beyond the worker (docs/relay.md)."""
