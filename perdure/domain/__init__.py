"""Pure, deterministic core of Perdure.

Nothing here does I/O, reads the clock or the environment: workflow code may import it.
"""
