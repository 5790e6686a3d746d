"""The results DB a script of analysis/scripts reads: opened read-only
(store.connect_readonly: never created, upgraded or written, no side files),
bad input one line on stderr and exit status 2."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench.errors import QrwbenchError  # noqa: E402
from qrwbench.results import store  # noqa: E402


def connect(path: str):
    """An existing results DB at ``path`` (an option or a missing file is
    refused: the script's docstring says its usage)."""
    name = Path(sys.argv[0]).name
    if not path or path.startswith("-"):
        first = (sys.modules["__main__"].__doc__ or "").strip().splitlines()[:1]
        _fail(f"{name}: error: expected a results DB path, got {path!r}"
              + (f" ({first[0]})" if first else ""))
    try:
        return store.connect_readonly(path)
    except QrwbenchError as exc:
        _fail(f"{name}: error: {exc}")


def _fail(line: str):
    print(line, file=sys.stderr)
    sys.exit(2)
