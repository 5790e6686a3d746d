"""The one exception type the analysis raises for bad input.

Every message is a single line that names what is wrong (and, where it helps,
what exists instead). The CLI prints it as ``qrwbench: error: <message>`` and
exits with status 2; nothing has been written when it is raised.
"""

import argparse
import functools


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


class ArgParser(argparse.ArgumentParser):
    """argparse with the rig's error form: one line ``<command>: error: ...``
    and status 2, instead of the usage text (``command`` defaults to the last
    dotted part of ``prog``)."""

    def __init__(self, *a, command: str | None = None, **kw):
        super().__init__(*a, **kw)
        self.command = command or self.prog.rsplit(".", 1)[-1].split()[0]

    def error(self, message):
        self.exit(2, f"{self.command}: error: {one_line(message)}\n")

    def add_subparsers(self, **kw):
        # subcommands (and theirs: bisect run|step) report errors as this command
        kw.setdefault("parser_class", functools.partial(type(self), command=self.command))
        return super().add_subparsers(**kw)


def db_error(path, exc) -> str:
    """The one-line message for an SQLite error met while reading a results DB."""
    return one_line(f"results DB {path}: {exc}: the file is damaged or was not written by "
                    "qrwbench; restore it from a copy or give another RESULTS_DB")
