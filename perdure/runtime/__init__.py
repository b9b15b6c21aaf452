"""Process assembly: settings, the store/bus/Temporal services, the worker, the dev server."""
