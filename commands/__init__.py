"""The `perdure` command line."""
