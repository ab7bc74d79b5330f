"""tessera.serve: the library's HTTP server (ts_server_*, the same server as `tessera serve`)
in this process, on a Model opened for it.

The public API has the whole server (create, start, port, shutdown, destroy), so no binary is
needed: the server's HTTP threads and its engine thread run inside the library, with the GIL
released, while Python waits (block=True) or goes on (block=False, a Server to stop later).
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from ._ffi import ffi, lib
from .errors import check, new_error
from .model import Model


class Server:
    """A running server: `url`, `port`; stop() (or leaving a with block) shuts it down."""

    def __init__(self, model: Model, *, host: str = "127.0.0.1", port: int = 8080,
                 api_key: Optional[str] = None, model_name: Optional[str] = None,
                 max_body: int = 0, max_queue: int = 0, cors_origins: Optional[str] = None,
                 own_model: bool = False) -> None:
        self.model = model
        self._own = own_model
        self._srv = ffi.NULL
        ctx = model._live()
        cfg = ffi.new("ts_server_config *")
        cfg[0] = lib.ts_server_config_default()
        keep = []  # copied by ts_server_create

        def cstr(s: Optional[str]):
            if s is None:
                return ffi.NULL
            b = ffi.new("char[]", s.encode())
            keep.append(b)
            return b

        cfg.host = cstr(host)
        cfg.port = port
        cfg.api_key = cstr(api_key)
        cfg.model_name = cstr(model_name or model.info["name"])
        cfg.cors_origins = cstr(cors_origins)
        if max_body:
            cfg.max_body = max_body
        if max_queue:
            cfg.max_queue = max_queue
        out = ffi.new("ts_server **")
        err = new_error()
        check(lib.ts_server_create(cfg, ctx, out, err), err, "server")
        self._srv = out[0]
        try:
            check(lib.ts_server_start(self._srv, err), err, f"server on {host}:{port}")
        except BaseException:
            lib.ts_server_destroy(self._srv)
            self._srv = ffi.NULL
            raise
        model._serving = True
        self.host = host
        self.port = int(lib.ts_server_port(self._srv))
        self.url = f"http://{host}:{self.port}"
        self._stopped = threading.Event()

    def stop(self, grace_ms: int = 5000) -> None:
        """Stops accepting, lets admitted requests finish for grace_ms, then aborts the rest."""
        if self._srv == ffi.NULL:
            return
        lib.ts_server_shutdown(self._srv, grace_ms)
        lib.ts_server_destroy(self._srv)
        self._srv = ffi.NULL
        self.model._serving = False
        self._stopped.set()
        if self._own:
            self.model.close()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until stop() (from another thread) or timeout; True when stopped."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(model_path: str, *, host: str = "127.0.0.1", port: int = 8080,
          api_key: Optional[str] = None, model_name: Optional[str] = None,
          block: bool = True, max_body: int = 0, max_queue: int = 0,
          cors_origins: Optional[str] = None, **model_args: Any) -> Server:
    """Serves a model over HTTP with the OpenAI (and the other dialects') endpoints, as
    `tessera serve` does. model_args go to Model (n_ctx, n_threads, backend, kv_type, ...).
    port 0 takes any free port (see Server.port). block=True serves until KeyboardInterrupt
    and then shuts down; block=False returns the running Server."""
    model = Model(model_path, **model_args)
    try:
        srv = Server(model, host=host, port=port, api_key=api_key, model_name=model_name,
                     max_body=max_body, max_queue=max_queue, cors_origins=cors_origins,
                     own_model=True)
    except BaseException:
        model.close()
        raise
    if not block:
        return srv
    try:
        print(f"tessera: listening on {srv.url} (Ctrl-C stops)", flush=True)
        while not srv.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    return srv
