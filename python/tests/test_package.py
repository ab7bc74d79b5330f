"""The package: installed by pip with the library and the header it binds, exporting the
public API and nothing else."""
import os
import re
import subprocess

import tessera
from tessera import _ffi

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(ROOT, "include", "tessera.h")


def header_functions(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(r"^[A-Za-z_][\w \t*]*?\b(ts_[a-z0-9_]+)\(", text, flags=re.M))


def test_installed_files():
    here = os.path.dirname(tessera.__file__)
    assert not here.startswith(os.path.join(ROOT, "python", "src")), \
        "the tests must run on the installed package"
    for f in ("libtessera.so", "tessera.h", "py.typed"):
        assert os.path.exists(os.path.join(here, f)), f
    with open(HEADER, encoding="utf-8") as a, open(_ffi.HEADER, encoding="utf-8") as b:
        assert a.read() == b.read(), "the package's tessera.h is not this checkout's"
    v = tessera.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", v)


def test_exports_are_the_public_api():
    with open(HEADER, encoding="utf-8") as f:
        want = header_functions(f.read())
    assert len(want) > 50
    out = subprocess.run(["nm", "-D", "--defined-only", _ffi.LIBRARY], capture_output=True,
                         text=True, check=True).stdout
    symbols = [line.split() for line in out.splitlines() if line.strip()]
    names = {s[-1].split("@")[0] for s in symbols}
    functions = {s[-1].split("@")[0] for s in symbols if len(s) >= 3 and s[1] in ("T", "W")}
    assert functions == want, (sorted(functions - want), sorted(want - functions))
    assert names == functions, sorted(names - functions)  # no data symbols either


def test_exceptions_by_status():
    from tessera.errors import error
    for status, cls in [(-1, tessera.InvalidArgumentError), (-3, tessera.TesseraIOError),
                        (-4, tessera.FormatError), (-5, tessera.UnsupportedError),
                        (-11, tessera.LimitError), (-10, tessera.StateError)]:
        e = error(status, "what and where")
        assert type(e) is cls and isinstance(e, tessera.TesseraError)
        assert str(e) == "what and where" and e.status == status
