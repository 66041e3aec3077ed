"""The error a run reports as one line, without a traceback (cli.py catches it)."""


class RunError(RuntimeError):
    """A problem with the run's inputs, reported as one line without a traceback."""
