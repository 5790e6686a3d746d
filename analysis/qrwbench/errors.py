"""The one exception type the analysis raises for bad input.

Every message is a single line that names what is wrong (and, where it helps,
what exists instead). The CLI prints it as ``qrwbench: error: <message>`` and
exits with status 2; nothing has been written when it is raised.
"""


class QrwbenchError(Exception):
    """Bad input or a state the analysis refuses to work with (one-line message)."""

    def __init__(self, message: str):
        super().__init__(one_line(message))


def one_line(text: str, limit: int = 300) -> str:
    """Collapse ``text`` to one printable line of at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    flat = "".join(c if " " <= c <= "~" else "?" for c in flat)
    if len(flat) > limit:
        flat = flat[: limit - 3] + "..."
    return flat
