"""Model.chat: OpenAI-shaped chat completions on the runtime's chat support.

Everything model-specific is the library's (include/tessera.h): the chat template renders the
request (ts_context_chat_render: messages, tools, template variables), the context's chat
profile names how the model writes tool calls and reasoning (ts_context_chat_profile), and
the chat parser reads them back from the generated text (ts_chat_parser), incrementally, so a
stream's chunks add up to the whole answer. What is here is the OpenAI shape around it and two
request rewrites the server makes too:
  - tools a template does not render are described in a system turn (the answer-is-JSON form
    the generic tool-call format reads);
  - tool_choice "required" or a named function constrains the answer to a call of an allowed
    tool whose arguments fit its parameters schema (for the generic, llama3 and hermes formats:
    a JSON Schema, or for hermes a GBNF grammar around the schema's, ts_json_schema_to_gbnf).
"""
from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._ffi import ffi, lib, string
from .errors import InvalidArgumentError, check, new_error

if TYPE_CHECKING:
    from .model import Model

# ts_chat_tool_format / ts_chat_reasoning_format values used here.
_TOOLS_GENERIC, _TOOLS_HERMES, _TOOLS_LLAMA3 = 0, 1, 2
_REASONING_NONE, _REASONING_MISTRAL, _REASONING_COMMAND_R, _REASONING_HARMONY = 0, 2, 3, 4
# The most calls one constrained answer holds (parallel_tool_calls), as the server.
_MAX_CALLS = 8
# Prompt tokens detokenized to see whether the prompt opened the reasoning.
_TAIL_TOKENS = 8

_TOOLS_HEAD = "You can call the following tools (JSON descriptions):\n"
_TOOLS_TAIL = ("\n\nTo call a tool, answer with only a JSON object of the form {\"name\": "
               "\"<tool name>\", \"arguments\": {<the arguments>}} and nothing else. "
               "Otherwise answer normally.")


def _bad(param: str, msg: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{param}: {msg}", -1)


def _tool_choice(tool_choice: Union[str, Mapping[str, Any], None], tools: Sequence[Any]):
    """("auto" | "none" | "required" | "named", name or None)."""
    if tool_choice is None:
        return ("auto" if tools else "none"), None
    if isinstance(tool_choice, str):
        if tool_choice not in ("auto", "none", "required"):
            raise _bad("tool_choice", f"must be auto, none, required or a function, got "
                                      f"{tool_choice!r}")
        if tool_choice == "required" and not tools:
            raise _bad("tool_choice", "\"required\" needs tools")
        return tool_choice, None
    fn = tool_choice.get("function") if isinstance(tool_choice, Mapping) else None
    name = fn.get("name") if isinstance(fn, Mapping) else None
    if not isinstance(name, str):
        raise _bad("tool_choice", "a named choice is {\"type\": \"function\", \"function\": "
                                  "{\"name\": N}}")
    names = [_tool_name(t) for t in tools]
    if name not in names:
        raise _bad("tool_choice", f"names {name!r}, which is not among the tools {names}")
    return "named", name


def _tool_name(t: Any) -> Optional[str]:
    fn = t.get("function") if isinstance(t, Mapping) else None
    name = fn.get("name") if isinstance(fn, Mapping) else None
    return name if isinstance(name, str) else None


def _move_refs(schema: Any, at: str) -> Any:
    """The schema with its local "$ref"s pointing under `at` (values left alone)."""
    if isinstance(schema, list):
        return [_move_refs(x, at) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k in ("const", "enum", "default", "examples"):
            out[k] = v
        elif k == "$ref" and isinstance(v, str) and v.startswith("#"):
            out[k] = at + v[1:]
        else:
            out[k] = _move_refs(v, at)
    return out


def _calls_schema(tools: Sequence[Any], only: Optional[str], key: str) -> str:
    """A JSON Schema of one call of an allowed tool: {"name": const, key: parameters}."""
    any_of: List[Dict[str, Any]] = []
    for t in tools:
        name = _tool_name(t)
        if name is None or (only is not None and name != only):
            continue
        params = t["function"].get("parameters")
        p = dict(params) if isinstance(params, dict) else {}
        if not p:
            p = {"type": "object"}
        elif "properties" in p and "additionalProperties" not in p:
            # The declared arguments only: a small model may otherwise invent keys forever.
            p["additionalProperties"] = False
        p = _move_refs(p, f"#/anyOf/{len(any_of)}/properties/{key}")
        any_of.append({"type": "object", "properties": {"name": {"const": name}, key: p},
                       "required": ["name", key], "additionalProperties": False})
    return json.dumps({"anyOf": any_of})


def _tool_grammar(fmt: int, tools: Sequence[Any], only: Optional[str], parallel: bool):
    """(grammar text, kind) forcing a call, or None for a format left unconstrained."""
    if fmt not in (_TOOLS_GENERIC, _TOOLS_HERMES, _TOOLS_LLAMA3):
        return None
    schema = _calls_schema(tools, only, "parameters" if fmt == _TOOLS_LLAMA3 else "arguments")
    if fmt != _TOOLS_HERMES:
        return schema, "json_schema"
    g = ffi.new("char **")
    err = new_error()
    b = schema.encode()
    check(lib.ts_json_schema_to_gbnf(b, len(b), g, err), err,
          "tools: the tools' parameters cannot constrain the call")
    try:
        text = string(g[0])
    finally:
        lib.ts_free(g[0])
    root = "root ::= "
    if not text.startswith(root):
        raise RuntimeError("the schema grammar does not start with its root rule")
    head = (f"root ::= tc-one ( [\\n]{{0,2}} tc-one ){{0,{_MAX_CALLS - 1}}}\n" if parallel
            else "root ::= tc-one\n")
    one = "tc-one ::= \"<tool_call>\" [\\n]? tc-call [\\n]? \"</tool_call>\"\n"
    return head + one + "tc-call ::= " + text[len(root):], "gbnf"


def _response_format(rf: Optional[Mapping[str, Any]]):
    """(grammar text or None, kind) of an OpenAI response_format."""
    if rf is None:
        return None, None
    t = rf.get("type")
    if t == "text":
        return None, None
    if t == "json_object":
        return None, "json_object"
    if t == "json_schema":
        js = rf.get("json_schema")
        schema = js.get("schema") if isinstance(js, Mapping) else None
        if schema is None:
            raise _bad("response_format", "json_schema needs {\"json_schema\": {\"schema\": "
                                          "...}}")
        return json.dumps(schema), "json_schema"
    raise _bad("response_format", f"type must be text, json_object or json_schema, got {t!r}")


def _render(model: "Model", request: Dict[str, Any]) -> str:
    body = json.dumps(request).encode()
    text = ffi.new("char **")
    n = ffi.new("size_t *")
    err = new_error()
    check(lib.ts_context_chat_render(model._live(), body, len(body), text, n, err), err,
          "chat template")
    try:
        return string(text[0], n[0])
    finally:
        lib.ts_free(text[0])


class _Parser:
    """ts_chat_parser: the answer's content, reasoning and tool calls."""

    def __init__(self, profile, tools_json: Optional[str], parallel: bool,
                 reasoning_open: bool) -> None:
        p = ffi.new("ts_chat_parser_params *")
        p.tool_format = profile.tool_format
        p.reasoning_format = profile.reasoning_format
        self._tools = ffi.new("char[]", tools_json.encode()) if tools_json else ffi.NULL
        p.tools_json = self._tools
        p.parallel_tool_calls = parallel
        p.reasoning_open = reasoning_open
        p.id_seed = int.from_bytes(os.urandom(8), "little")
        out = ffi.new("ts_chat_parser **")
        err = new_error()
        check(lib.ts_chat_parser_create(p, out, err), err, "tools")
        self._p = ffi.gc(out[0], lib.ts_chat_parser_destroy)

    def feed(self, text: str) -> None:
        b = text.encode("utf-8")
        err = new_error()
        check(lib.ts_chat_parser_feed(self._p, b, len(b), err), err)

    def finish(self) -> None:
        err = new_error()
        check(lib.ts_chat_parser_finish(self._p, err), err)

    def events(self) -> List[Dict[str, Any]]:
        """The pieces since the last call, as OpenAI delta fields."""
        evp = ffi.new("ts_chat_event **")
        n = lib.ts_chat_parser_events(self._p, evp)
        out: List[Dict[str, Any]] = []
        for i in range(n):
            e = evp[0][i]
            if e.kind == 2:
                out.append({"tool_calls": [{
                    "index": e.index, "id": string(e.id), "type": "function",
                    "function": {"name": string(e.name), "arguments": string(e.arguments)}}]})
            elif e.len:
                key = "reasoning_content" if e.kind == 1 else "content"
                out.append({key: string(e.text, e.len)})
        lib.ts_chat_parser_clear(self._p)
        return out

    def message(self) -> Dict[str, Any]:
        n = ffi.new("size_t *")
        content = string(lib.ts_chat_parser_content(self._p, n), n[0])
        reasoning = string(lib.ts_chat_parser_reasoning(self._p, n), n[0])
        calls = ffi.new("ts_chat_tool_call **")
        k = lib.ts_chat_parser_tool_calls(self._p, calls)
        msg: Dict[str, Any] = {"role": "assistant", "content": content or None}
        if reasoning:
            msg["reasoning_content"] = reasoning
        if k:
            msg["tool_calls"] = [{
                "id": string(calls[0][i].id), "type": "function",
                "function": {"name": string(calls[0][i].name),
                             "arguments": string(calls[0][i].arguments)}} for i in range(k)]
        elif msg["content"] is None:
            msg["content"] = ""
        return msg

    def n_calls(self) -> int:
        calls = ffi.new("ts_chat_tool_call **")
        return int(lib.ts_chat_parser_tool_calls(self._p, calls))


def chat(model: "Model", messages: Sequence[Mapping[str, Any]], *, tools, tool_choice,
         parallel_tool_calls: bool, response_format, max_tokens, temperature, top_p, top_k,
         min_p, presence_penalty, frequency_penalty, seed, stop, chat_template_kwargs,
         stream: bool) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
    from .model import Completion

    tools = list(tools or [])
    choice, only = _tool_choice(tool_choice, tools)
    parse_tools = bool(tools) and choice != "none"
    profile = ffi.new("ts_chat_profile *")
    lib.ts_context_chat_profile(model._live(), profile)
    msgs = [dict(m) for m in messages]
    request: Dict[str, Any] = dict(chat_template_kwargs or {})
    if parse_tools and profile.renders_tools:
        request["tools"] = tools
    elif parse_tools:
        text = _TOOLS_HEAD + json.dumps(tools) + _TOOLS_TAIL
        if msgs and msgs[0].get("role") == "system" and isinstance(msgs[0].get("content"), str):
            msgs[0]["content"] = msgs[0]["content"] + "\n\n" + text
        else:
            msgs.insert(0, {"role": "system", "content": text})
    request["messages"] = msgs
    request["add_generation_prompt"] = True
    prompt = _render(model, request)
    ids = model.tokenize(prompt, add_special=True, parse_special=True)

    reasoning_open = False
    if profile.reasoning_format != _REASONING_NONE and ids:
        tail = model.detokenize(ids[-_TAIL_TOKENS:], render_special=True).encode()
        reasoning_open = bool(lib.ts_chat_prompt_opens_reasoning(profile.reasoning_format,
                                                                 tail, len(tail)))
    grammar, kind = _response_format(response_format)
    if parse_tools and choice in ("required", "named") and not reasoning_open:
        forced = _tool_grammar(profile.tool_format, tools, only, parallel_tool_calls)
        if forced is not None:
            if kind is not None:
                raise _bad("response_format", f"cannot be combined with tool_choice "
                                              f"{choice!r}: the tool call constrains the "
                                              "whole answer")
            grammar, kind = forced
    render_special = parse_tools or profile.reasoning_format in (
        _REASONING_MISTRAL, _REASONING_COMMAND_R, _REASONING_HARMONY)
    keep: list = []
    rp = model._params(max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                       top_k=top_k, min_p=min_p, repetition_penalty=1.0,
                       presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
                       seed=seed, stop=stop, grammar=grammar, grammar_kind=kind or "gbnf",
                       render_special=render_special, keep=keep)
    parser = _Parser(profile, json.dumps(tools) if parse_tools else None, parallel_tool_calls,
                     reasoning_open)
    run = model._run(ids, rp)
    cid = "chatcmpl-" + os.urandom(12).hex()
    created = int(time.time())
    name = model.info["name"]

    def usage(c: Completion) -> Dict[str, int]:
        return {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                "total_tokens": c.prompt_tokens + c.completion_tokens}

    def finish_reason(c: Completion) -> str:
        if parser.n_calls() > 0:
            return "tool_calls"
        return c.finish_reason or "stop"

    if not stream:
        done: Optional[Completion] = None
        for x in run:
            if isinstance(x, Completion):
                done = x
            else:
                parser.feed(x)
        parser.finish()
        assert done is not None
        return {"id": cid, "object": "chat.completion", "created": created, "model": name,
                "choices": [{"index": 0, "message": parser.message(),
                             "finish_reason": finish_reason(done)}],
                "usage": usage(done)}

    def chunk(delta: Dict[str, Any], finish: Optional[str] = None) -> Dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": created,
                "model": name, "choices": [{"index": 0, "delta": delta,
                                            "finish_reason": finish}]}

    def chunks() -> Iterator[Dict[str, Any]]:
        yield chunk({"role": "assistant", "content": ""})
        done: Optional[Completion] = None
        for x in run:
            if isinstance(x, Completion):
                done = x
                parser.finish()
            else:
                parser.feed(x)
            for d in parser.events():
                yield chunk(d)
        assert done is not None
        last = chunk({}, finish_reason(done))
        last["usage"] = usage(done)
        yield last

    return chunks()
