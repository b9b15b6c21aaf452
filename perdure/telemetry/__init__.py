"""Traces, metrics and structured logs: what operators see of Perdure (docs/operations.md,
"Telemetry").

Every module here is safe to call on a turn's path: when tracing is off it costs a flag test,
and a failing exporter, metric or log formatter is logged once and never raised into a turn.
"""
