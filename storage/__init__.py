"""Perdure's store: sessions, the message tree, submissions, the chunk log and events."""
