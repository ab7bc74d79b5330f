"""tessera.Model: a GGUF model opened with a context of its own (ts_llm + ts_context).

Generation goes through the context's request engine (ts_context_submit / ts_context_step):
each step runs with the GIL released, and its tokens come back through one callback that files
them under their request. A model may be used from several threads (calls that step take the
model's lock one step at a time, so requests of different threads advance together); two
models on two threads compute at the same time.
"""
from __future__ import annotations

import threading
from typing import (Any, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Union,
                    overload)

from . import chat as _chat
from ._ffi import ffi, lib, string
from .errors import StateError, UnsupportedError, check, new_error

JSON = Any


class _Request:
    """What the engine reported for one request so far."""

    __slots__ = ("pieces", "finish", "done", "prompt_tokens", "completion_tokens", "error")

    def __init__(self) -> None:
        self.pieces: List[str] = []
        self.finish = ""
        self.done = False
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.error: Optional[str] = None


class Completion:
    """The end of a generation: why it stopped and what it cost."""

    __slots__ = ("finish_reason", "prompt_tokens", "completion_tokens")

    def __init__(self, finish_reason: str, prompt_tokens: int, completion_tokens: int) -> None:
        self.finish_reason = finish_reason
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


_GRAMMAR_KINDS = {"gbnf": 1, "json_schema": 2, "json_object": 3}


class Model:
    """A GGUF model ready to generate, chat, embed and tokenize.

    Model(path, n_ctx=0, n_threads=0, backend="cpu", kv_type=None, ...): n_ctx 0 is
    min(training context, 4096), n_threads 0 the machine's physical cores; backend "cpu",
    "ref", "cuda" (a build with TS_CUDA) or "auto". embedding=True lets a decoder model answer
    embed() (encoders always do). Use it as a context manager, or call close().
    """

    def __init__(self, path: str, *, n_ctx: int = 0, n_threads: int = 0, backend: str = "cpu",
                 kv_type: Optional[str] = None, kv_type_k: Optional[str] = None,
                 kv_type_v: Optional[str] = None, max_seqs: int = 0, max_batch_tokens: int = 0,
                 device: int = 0, no_repack: bool = False, no_prefix_cache: bool = False,
                 chat_template: Optional[str] = None,
                 chat_template_source: Optional[str] = None, embedding: bool = False) -> None:
        self._llm = ffi.NULL
        self._ctx = ffi.NULL
        self._lock = threading.RLock()
        self._requests: Dict[int, _Request] = {}
        self._serving = False
        self.path = str(path)
        self._embedding = embedding
        err = new_error()
        out = ffi.new("ts_llm **")
        check(lib.ts_llm_open(self.path.encode(), ffi.NULL, out, err), err)
        self._llm = out[0]
        keep = []  # C strings borrowed by ts_context_create

        def cstr(s: Optional[str]):
            if s is None:
                return ffi.NULL
            b = ffi.new("char[]", str(s).encode())
            keep.append(b)
            return b

        p = ffi.new("ts_context_params *")
        p.backend = cstr(backend)
        p.device = device
        p.n_threads = n_threads
        p.n_ctx = n_ctx
        p.kv_type = cstr(kv_type)
        p.kv_type_k = cstr(kv_type_k)
        p.kv_type_v = cstr(kv_type_v)
        p.max_seqs = max_seqs
        p.max_batch_tokens = max_batch_tokens
        p.no_repack = int(no_repack)
        p.no_prefix_cache = int(no_prefix_cache)
        p.chat_template = cstr(chat_template)
        p.chat_template_source = cstr(chat_template_source)
        ctx = ffi.new("ts_context **")
        try:
            check(lib.ts_context_create(self._llm, p, ctx, err), err)
        except BaseException:
            lib.ts_llm_close(self._llm)
            self._llm = ffi.NULL
            raise
        self._ctx = ctx[0]
        self._on_event_c = ffi.callback("ts_engine_callback", self._on_event)

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Releases the context and the model; later calls raise StateError."""
        with self._lock:
            if self._serving:
                raise StateError("the model is being served: stop its server first",
                                 -10)
            if self._ctx != ffi.NULL:
                lib.ts_context_destroy(self._ctx)
                self._ctx = ffi.NULL
            if self._llm != ffi.NULL:
                lib.ts_llm_close(self._llm)
                self._llm = ffi.NULL

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._serving:
                self.close()
        except Exception:
            pass

    def _live(self):
        if self._ctx == ffi.NULL:
            raise StateError(f"{self.path}: the model is closed", -10)
        if self._serving:
            raise StateError(f"{self.path}: the model is being served (tessera.serve); its "
                             "server's engine thread owns the context", -10)
        return self._ctx

    # -- what the model is --------------------------------------------------------------------

    @property
    def info(self) -> Dict[str, Any]:
        """The model's description (ts_llm_info) and the context's (ts_context_info)."""
        self._live()
        i = ffi.new("ts_llm_info *")
        lib.ts_llm_get_info(self._llm, i)
        c = ffi.new("ts_context_info *")
        lib.ts_context_get_info(self._ctx, c)
        return {
            "arch": string(i.arch), "name": string(i.name), "file_type": string(i.file_type),
            "n_params": i.n_params, "n_vocab": i.n_vocab, "n_ctx_train": i.n_ctx_train,
            "n_embd": i.n_embd, "n_layer": i.n_layer, "encoder": bool(i.encoder),
            "bos": i.bos, "eos": i.eos, "backend": string(c.backend),
            "n_threads": c.n_threads, "n_ctx": c.n_ctx, "kv_type": string(c.kv_type),
            "chat_template": string(c.chat_template) if c.chat_template != ffi.NULL else None,
        }

    @property
    def n_ctx(self) -> int:
        """Tokens per sequence (prompt and answer together)."""
        c = ffi.new("ts_context_info *")
        lib.ts_context_get_info(self._live(), c)
        return int(c.n_ctx)

    # -- tokens -------------------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False
                 ) -> List[int]:
        """Text -> token ids (BOS/EOS as the model wants when add_special)."""
        self._live()
        b = text.encode("utf-8")
        ids = ffi.new("int32_t **")
        n = ffi.new("size_t *")
        err = new_error()
        check(lib.ts_llm_tokenize(self._llm, b, len(b), int(add_special), int(parse_special),
                                  ids, n, err), err)
        try:
            return list(ffi.unpack(ids[0], n[0])) if n[0] else []
        finally:
            lib.ts_free(ids[0])

    def detokenize(self, ids: Sequence[int], render_special: bool = False) -> str:
        """Token ids -> text (special tokens' text too when render_special)."""
        self._live()
        arr = ffi.new("int32_t[]", list(ids)) if ids else ffi.NULL
        text = ffi.new("char **")
        n = ffi.new("size_t *")
        err = new_error()
        check(lib.ts_llm_detokenize(self._llm, arr, len(ids), int(render_special), text, n,
                                    err), err)
        try:
            return string(text[0], n[0])
        finally:
            lib.ts_free(text[0])

    # -- the request engine -------------------------------------------------------------------

    def _on_event(self, ev, user) -> None:
        req = self._requests.get(int(ev.request_id))
        if req is None:
            return
        if ev.text_len:
            req.pieces.append(ffi.unpack(ev.text, ev.text_len).decode("utf-8", "replace"))
        req.prompt_tokens = ev.prompt_tokens
        req.completion_tokens = ev.completion_tokens
        if ev.finish != 0:
            req.finish = string(lib.ts_finish_reason_name(ev.finish))
            if ev.finish == 4:
                req.error = string(ev.message) or "the request failed"
        if ev.request_done:
            req.done = True

    def _run(self, ids: Sequence[int], rp) -> "_Stream":
        """Submits a prompt now (so that a refused request raises here) and returns the
        iterator that steps it: its text pieces, then one Completion."""
        return _Stream(self, ids, rp)

    def _params(self, *, max_tokens: Optional[int], temperature: float, top_p: float,
                top_k: int, min_p: float, repetition_penalty: float, presence_penalty: float,
                frequency_penalty: float, seed: Optional[int], stop: Optional[Sequence[str]],
                grammar: Optional[str], grammar_kind: str, render_special: bool, keep: list):
        rp = ffi.new("ts_request_params *")
        rp[0] = lib.ts_request_params_default()
        s = rp.sampling
        s.temperature = temperature
        s.top_p = top_p
        s.top_k = top_k
        s.min_p = min_p
        s.repetition_penalty = repetition_penalty
        s.presence_penalty = presence_penalty
        s.frequency_penalty = frequency_penalty
        rp.max_tokens = max_tokens or 0
        rp.render_special = render_special
        if seed is not None:
            rp.seed = seed
            rp.has_seed = True
        if stop:
            if isinstance(stop, str):
                stop = [stop]
            strs = [ffi.new("char[]", x.encode()) for x in stop]
            arr = ffi.new("const char *[]", strs)
            keep += [strs, arr]
            rp.stop = arr
            rp.n_stop = len(strs)
        if grammar is not None or grammar_kind == "json_object":
            kind = _GRAMMAR_KINDS.get(grammar_kind)
            if kind is None:
                raise ValueError(f"grammar_kind must be one of {sorted(_GRAMMAR_KINDS)}, "
                                 f"got {grammar_kind!r}")
            rp.grammar_kind = kind
            if grammar is not None:
                g = ffi.new("char[]", grammar.encode())
                keep.append(g)
                rp.grammar = g
        return rp

    # -- generation ---------------------------------------------------------------------------

    @overload
    def generate(self, prompt: str, *, stream: Literal[False] = ..., **kw: Any) -> str: ...

    @overload
    def generate(self, prompt: str, *, stream: Literal[True], **kw: Any) -> Iterator[str]: ...

    def generate(self, prompt: str, *, max_tokens: Optional[int] = 256,
                 temperature: float = 0.8, top_p: float = 0.95, top_k: int = 40,
                 min_p: float = 0.05, repetition_penalty: float = 1.0,
                 presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 seed: Optional[int] = None, stop: Optional[Sequence[str]] = None,
                 grammar: Optional[str] = None, grammar_kind: str = "gbnf",
                 parse_special: bool = True, stream: bool = False
                 ) -> Union[str, Iterator[str]]:
        """Continues `prompt` (tokenized with BOS as the model wants) and returns the text, or
        with stream=True an iterator of its pieces. Sampling defaults are `tessera run`'s;
        temperature 0 is greedy. max_tokens None or 0: up to the context. stop: strings that
        end the answer (not included). grammar: GBNF text (grammar_kind "gbnf"), a JSON Schema
        ("json_schema"), or grammar_kind "json_object" for any JSON object."""
        ids = self.tokenize(prompt, add_special=True, parse_special=parse_special)
        keep: list = []
        rp = self._params(max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                          top_k=top_k, min_p=min_p, repetition_penalty=repetition_penalty,
                          presence_penalty=presence_penalty,
                          frequency_penalty=frequency_penalty, seed=seed, stop=stop,
                          grammar=grammar, grammar_kind=grammar_kind, render_special=False,
                          keep=keep)
        it = self._run(ids, rp)
        self._last: Optional[Completion] = None
        if stream:
            return _Texts(self, it)
        return "".join(_Texts(self, it))

    @property
    def last_completion(self) -> Optional[Completion]:
        """Why the last finished generate() stopped and its token counts."""
        return getattr(self, "_last", None)

    # -- chat ---------------------------------------------------------------------------------

    def chat(self, messages: Sequence[Mapping[str, Any]], *,
             tools: Optional[Sequence[Mapping[str, Any]]] = None,
             tool_choice: Union[str, Mapping[str, Any], None] = None,
             parallel_tool_calls: bool = True,
             response_format: Optional[Mapping[str, Any]] = None,
             max_tokens: Optional[int] = None, temperature: float = 1.0, top_p: float = 1.0,
             top_k: int = 0, min_p: float = 0.0, presence_penalty: float = 0.0,
             frequency_penalty: float = 0.0, seed: Optional[int] = None,
             stop: Optional[Sequence[str]] = None,
             chat_template_kwargs: Optional[Mapping[str, Any]] = None,
             stream: bool = False) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """An OpenAI chat completion: messages as OpenAI shapes them, tools and tool_choice
        ("auto", "none", "required" or {"type": "function", "function": {"name": N}}),
        response_format ({"type": "json_object"} or {"type": "json_schema", "json_schema":
        {"schema": ...}}). Returns a "chat.completion" dict, or with stream=True an iterator of
        "chat.completion.chunk" dicts. The model's chat template renders the conversation;
        tool calls and reasoning are read back by the model's chat profile."""
        return _chat.chat(self, messages, tools=tools, tool_choice=tool_choice,
                          parallel_tool_calls=parallel_tool_calls,
                          response_format=response_format, max_tokens=max_tokens,
                          temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                          presence_penalty=presence_penalty,
                          frequency_penalty=frequency_penalty, seed=seed, stop=stop,
                          chat_template_kwargs=chat_template_kwargs, stream=stream)

    # -- embeddings ---------------------------------------------------------------------------

    @overload
    def embed(self, texts: str, *, normalize: bool = ..., pooling: Optional[str] = ...
              ) -> List[float]: ...

    @overload
    def embed(self, texts: Sequence[str], *, normalize: bool = ...,
              pooling: Optional[str] = ...) -> List[List[float]]: ...

    def embed(self, texts: Union[str, Sequence[str]], *, normalize: bool = True,
              pooling: Optional[str] = None) -> Union[List[float], List[List[float]]]:
        """One vector per text (a str gives one vector). For embedding models: encoders
        (BERT family), or a decoder opened with Model(..., embedding=True). pooling: "mean",
        "cls" or "last" (None: the model's)."""
        single = isinstance(texts, str)
        items = [texts] if single else list(texts)
        if not items:
            return []
        info = ffi.new("ts_llm_info *")
        self._live()
        lib.ts_llm_get_info(self._llm, info)
        if not info.encoder and not self._embedding:
            raise UnsupportedError(
                f"{self.path}: {string(info.arch)} is a text-generation model, not an "
                "embedding model; open an encoder (BERT family), or pass "
                "Model(..., embedding=True) to pool a decoder's hidden states", -5)
        ep = ffi.new("ts_embed_params *")
        ep[0] = lib.ts_embed_params_default()
        ep.normalize = int(normalize)
        if pooling is not None:
            if pooling == "none":
                raise ValueError("pooling must be mean, cls or last (one vector per text)")
            pp = ffi.new("ts_pooling *")
            err = new_error()
            check(lib.ts_pooling_parse(pooling.encode(), pp, err), err)
            ep.pooling = pp[0]
        toks = [ffi.new("int32_t[]", self.tokenize(t, add_special=True)) for t in items]
        ptrs = ffi.new("const int32_t *[]", toks)
        lens = ffi.new("int32_t[]", [len(t) for t in toks])
        n_embd = int(info.n_embd)
        out = ffi.new("float[]", len(items) * n_embd)
        err = new_error()
        with self._lock:
            check(lib.ts_context_embed(self._live(), ptrs, lens, len(items), ep, out, err), err)
        vecs = [list(ffi.unpack(out + i * n_embd, n_embd)) for i in range(len(items))]
        return vecs[0] if single else vecs


class _Texts:
    """generate(stream=True): the text pieces of a _Stream; its Completion goes to
    model.last_completion. close() aborts the request."""

    def __init__(self, model: Model, it: "_Stream") -> None:
        self._model = model
        self._it = it

    def __iter__(self) -> "_Texts":
        return self

    def __next__(self) -> str:
        while True:
            x = next(self._it)
            if isinstance(x, Completion):
                self._model._last = x
            else:
                return x

    def close(self) -> None:
        self._it.close()


class _Stream:
    """One submitted request: iterating steps the engine until it is done, yielding text
    pieces and then a Completion. close() (or losing the last reference) aborts it."""

    def __init__(self, model: Model, ids: Sequence[int], rp) -> None:
        self._model = model
        self._req = _Request()
        self._rid: Optional[int] = None
        self._busy = ffi.new("bool *")
        self._err = new_error()
        self._ended = False
        arr = ffi.new("int32_t[]", list(ids))
        rid = ffi.new("uint64_t *")
        with model._lock:
            ctx = model._live()
            check(lib.ts_context_submit(ctx, arr, len(ids), rp, model._on_event_c, ffi.NULL,
                                        rid, self._err), self._err)
            self._rid = int(rid[0])
            model._requests[self._rid] = self._req

    def __iter__(self) -> "_Stream":
        return self

    def __next__(self) -> Union[str, Completion]:
        req, m = self._req, self._model
        while not req.pieces and not req.done:
            with m._lock:
                if not req.done:
                    try:
                        check(lib.ts_context_step(m._live(), self._busy, self._err),
                              self._err)
                    except BaseException:
                        self.close()
                        raise
        if req.pieces:
            return req.pieces.pop(0)
        if self._ended:
            raise StopIteration
        self._ended = True
        self.close()
        if req.error is not None:
            raise _engine_error(req.error)
        return Completion(req.finish, req.prompt_tokens, req.completion_tokens)

    def close(self) -> None:
        """Aborts the request when it is still running and forgets it."""
        m, rid = self._model, self._rid
        if rid is None:
            return
        with m._lock:
            if not self._req.done and m._ctx != ffi.NULL:
                lib.ts_context_abort(m._ctx, rid)
                while not self._req.done:
                    if lib.ts_context_step(m._ctx, self._busy, self._err) != 0:
                        break
            m._requests.pop(rid, None)
        self._rid = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _engine_error(message: str):
    """A request the engine finished with an error (TS_FINISH_ERROR)."""
    from .errors import TesseraError
    return TesseraError(message, -13)

