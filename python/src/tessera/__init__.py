"""tessera: an LLM inference engine in C11, from Python.

    import tessera
    with tessera.Model("model.gguf", n_ctx=2048) as m:
        print(m.generate("The capital of France is", max_tokens=16, temperature=0))
        print(m.chat([{"role": "user", "content": "Hi!"}])["choices"][0]["message"]["content"])

Everything goes through the library's public C API (include/tessera.h, shipped in this
package with libtessera.so); errors are TesseraError subclasses carrying the library's message.
"""
from ._ffi import lib as _lib, string as _string
from .errors import (AbortedError, FormatError, InternalError, InvalidArgumentError,
                     LimitError, NotFoundError, OutOfMemoryError, RangeError,
                     SizeOverflowError, StateError, TesseraError, TesseraIOError,
                     UnsupportedError, WrongTypeError)
from .model import Completion, Model
from .server import Server, serve

__version__ = _string(_lib.ts_version())

__all__ = [
    "AbortedError", "Completion", "FormatError", "InternalError", "InvalidArgumentError",
    "LimitError", "Model", "NotFoundError", "OutOfMemoryError", "RangeError", "Server",
    "SizeOverflowError", "StateError", "TesseraError", "TesseraIOError", "UnsupportedError",
    "WrongTypeError", "serve", "__version__",
]
