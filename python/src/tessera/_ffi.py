"""The C library and its declarations: libtessera.so and tessera.h, both installed next to this
file by the wheel's build (cmake/shared.cmake).

The bindings use cffi's ABI mode: the declarations cffi needs are the public header itself,
read at import (its comments, include guards and C++ braces dropped, its integer #defines
substituted), so the header is the only door to the library and nothing here restates it.
cffi releases the GIL around every call into the library, so other Python threads run while
the engine computes; callbacks from the library take the GIL back for their duration.
"""
from __future__ import annotations

import os
import re
from typing import Dict, Tuple

from cffi import FFI

_HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(_HERE, "tessera.h")
LIBRARY = os.path.join(_HERE, "libtessera.so")

_DEFINE = re.compile(r"^#define\s+(TS_[A-Z0-9_]+)\s+(-?[0-9]+)\s*$")


def _declarations(text: str) -> Tuple[str, Dict[str, int]]:
    """The header as cffi's cdef reads it, and its integer constants."""
    consts: Dict[str, int] = {}
    out = []
    skipping = False
    for line in text.splitlines():
        s = line.strip()
        if skipping:
            skipping = not s.startswith("#endif")
            continue
        if s.startswith("#ifdef __cplusplus"):
            skipping = True
            continue
        if s.startswith("#"):
            m = _DEFINE.match(s)
            if m:
                consts[m.group(1)] = int(m.group(2))
            out.append("")
            continue
        out.append(line)
    body = "\n".join(out)
    for name, value in consts.items():
        body = re.sub(r"\b%s\b" % name, str(value), body)
    return body, consts


def _load():
    if not os.path.exists(HEADER) or not os.path.exists(LIBRARY):
        raise ImportError(
            f"tessera: the package is incomplete: {HEADER} or {LIBRARY} is missing "
            "(install it with pip install ./python from a tessera checkout)")
    with open(HEADER, encoding="utf-8") as f:
        decls, consts = _declarations(f.read())
    ffi = FFI()
    ffi.cdef(decls)
    lib = ffi.dlopen(LIBRARY)
    return ffi, lib, consts


ffi, lib, CONSTANTS = _load()


def string(p, n=None) -> str:
    """UTF-8 text of a C string (n bytes, or up to its NUL); invalid bytes replaced."""
    if p == ffi.NULL:
        return ""
    raw = ffi.string(p) if n is None else ffi.unpack(p, n)
    return raw.decode("utf-8", errors="replace")
