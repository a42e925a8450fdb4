"""The one exception the Python entry points raise: a tool's one-line error, or one of their own."""


class OctetError(RuntimeError):
    """What went wrong, in one line that names the file, node or option and what to do."""
