#!/usr/bin/env python3
"""Reference renderings of real chat templates: what Python jinja2 produces, configured exactly as
transformers' apply_chat_template configures it, for every template x conversation.

    /work/venv-ref/bin/python scripts/reference/template_cases.py \
        [--templates-dir DIR] [--only NAME,...] [--source-commit SHA]

DIR (default $TS_TEMPLATES_DIR or ~/.cache/tessera/templates/llama.cpp) holds the *.jinja files of
llama.cpp's models/templates/ folder (bring them with the fetch tool; see
docs/templates-conformance.md). For each template:

  * its model licence is looked up in LICENCES below; a template whose model licence is
    permissive (Apache-2.0, MIT) is copied into tests/data/templates/real/ and its expected
    results go there as <name>.expected.json; the others stay outside the repository and their
    expected results are written next to them in DIR;
  * every conversation of CONVERSATIONS is turned into the variables transformers hands the
    template (messages with the reasoning aliases transformers adds, tools or null, documents
    null, add_generation_prompt, bos_token / eos_token of the template's family, and the
    conversation's extra variables such as enable_thinking) and serialised once to a JSON string;
    jinja2 renders with exactly json.loads() of that string, and the C test hands the same string
    to ts_tpl_render;
  * the result is the rendered text, or the error: raise_exception's message ("raised") or
    another jinja2/Python exception (its type and message).

The template is compiled by transformers' own _compile_jinja_template (ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks, AssistantTracker and loopcontrols; its tojson, raise_exception,
dict and namespace); only strftime_now is replaced by one that reads the fixed clock NOW (UTC), so
results are reproducible; the C test passes NOW as ts_tpl_options.now. Every successful rendering
is also checked against transformers' render_jinja_template with the same inputs, to prove the
variables are what apply_chat_template would have passed.

A case may carry "known_diff": "why" (edited by hand in the expected file); regeneration keeps it
while the case's vars and result are unchanged, so the C test stays strict for everything else.
"""
import argparse
import datetime
import json
import os
import shutil
import sys
from pathlib import Path

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

REPO = Path(__file__).resolve().parents[2]
REAL_DIR = REPO / "tests" / "data" / "templates" / "real"
SOURCE_REPO = "https://github.com/ggml-org/llama.cpp (snapshot via unslothai/llama.cpp)"

# The fixed clock for strftime_now: 2025-03-14 15:09:26 UTC.
NOW = 1741964966

# ---- licences ----------------------------------------------------------------------------------
# Template file -> (model it comes from, the model's licence, permissive). A template is a file of
# the model's repository, so the model's licence covers it. Only permissive ones are committed.
APACHE, MIT = "Apache-2.0", "MIT"
LICENCES = {
    "Apertus-8B-Instruct": ("swiss-ai/Apertus-8B-Instruct-2509",
                            APACHE + " (weights gated by an acceptable use policy)", True),
    "Apriel-1.6-15b-Thinker-fixed": ("ServiceNow-AI/Apriel-1.6-15b-Thinker", "unverified (Apriel 1.5 is MIT)", False),
    "Bielik-11B-v3.0-Instruct": ("speakleash/Bielik-11B-v3.0-Instruct", "unverified (Bielik v2 is Apache-2.0)", False),
    "ByteDance-Seed-OSS": ("ByteDance-Seed/Seed-OSS-36B-Instruct", APACHE, True),
    "Cohere2MoE": ("CohereLabs (Command, MoE)", "CC-BY-NC-4.0 (Cohere's open weights)", False),
    "CohereForAI-c4ai-command-r-plus-tool_use": ("CohereForAI/c4ai-command-r-plus", "CC-BY-NC-4.0", False),
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": ("CohereForAI/c4ai-command-r7b-12-2024", "CC-BY-NC-4.0", False),
    "GLM-4.6": ("zai-org/GLM-4.6", MIT, True),
    "GLM-4.7-Flash": ("zai-org/GLM-4.7-Flash", MIT, True),
    "GigaChat3-10B-A1.8B": ("ai-sage/GigaChat3-10B-A1.8B", MIT, True),
    "GigaChat3.1-10B-A1.8B": ("ai-sage/GigaChat3.1-10B-A1.8B", "unverified (GigaChat3 is MIT)", False),
    "HuggingFaceTB-SmolLM3-3B": ("HuggingFaceTB/SmolLM3-3B", APACHE, True),
    "Kimi-K2-Instruct": ("moonshotai/Kimi-K2-Instruct", "Modified MIT (attribution clause)", False),
    "Kimi-K2-Thinking": ("moonshotai/Kimi-K2-Thinking", "Modified MIT (attribution clause)", False),
    "LFM2-8B-A1B": ("LiquidAI/LFM2-8B-A1B", "LFM Open License v1.0", False),
    "LFM2.5-8B-A1B": ("LiquidAI/LFM2.5-8B-A1B", "LFM Open License v1.0", False),
    "LFM2.5-Instruct": ("LiquidAI/LFM2.5-1.2B-Instruct", "LFM Open License v1.0", False),
    "MiMo-VL": ("XiaomiMiMo/MiMo-VL-7B-RL", MIT, True),
    "MiniMax-M2": ("MiniMaxAI/MiniMax-M2", MIT, True),
    "MiniMax-M3": ("MiniMaxAI/MiniMax-M3", "unverified", False),
    "Mistral-Small-3.2-24B-Instruct-2506": ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", APACHE, True),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "NVIDIA Open Model License", False),
    "NVIDIA-Nemotron-Nano-v2": ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", "NVIDIA Open Model License", False),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": ("NousResearch/Hermes-2-Pro-Llama-3-8B", "Llama 3 Community (base model)", False),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("NousResearch/Hermes-3-Llama-3.1-8B", "Llama 3.1 Community", False),
    "Qwen-QwQ-32B": ("Qwen/QwQ-32B", APACHE, True),
    "Qwen-Qwen2.5-7B-Instruct": ("Qwen/Qwen2.5-7B-Instruct", APACHE, True),
    "Qwen-Qwen3-0.6B": ("Qwen/Qwen3-0.6B", APACHE, True),
    "Qwen3-Coder": ("Qwen/Qwen3-Coder-30B-A3B-Instruct", APACHE, True),
    "Qwen3.5-4B": ("Qwen/Qwen3.5-4B", APACHE, True),
    "Reka-Edge": ("RekaAI (Reka Edge)", "unverified", False),
    "StepFun3.5-Flash": ("stepfun-ai/Step-3.5-Flash", APACHE, True),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "MIT + Llama 3.1 Community (base model)", False),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", MIT + " (Qwen2.5 base: Apache-2.0)", True),
    "deepseek-ai-DeepSeek-V3.1": ("deepseek-ai/DeepSeek-V3.1", MIT, True),
    "deepseek-ai-DeepSeek-V3.2": ("deepseek-ai/DeepSeek-V3.2", MIT, True),
    "deepseek-ai-DeepSeek-V4-Flash-0731": ("deepseek-ai/DeepSeek-V4-Flash", MIT, True),
    "deepseek-ai-DeepSeek-V4": ("deepseek-ai/DeepSeek-V4-Pro", MIT, True),
    "fireworks-ai-llama-3-firefunction-v2": ("fireworks-ai/llama-3-firefunction-v2", "Llama 3 Community", False),
    "google-gemma-2-2b-it": ("google/gemma-2-2b-it", "Gemma Terms of Use", False),
    "google-gemma-4-31B-it-interleaved": ("google/gemma-4-31B-it", APACHE, True),
    "google-gemma-4-31B-it": ("google/gemma-4-31B-it", APACHE, True),
    "ibm-granite-granite-3.3-2B-Instruct": ("ibm-granite/granite-3.3-2b-instruct", APACHE, True),
    "ibm-granite-granite-4.0": ("ibm-granite/granite-4.0-h-small", APACHE, True),
    "ibm-granite-granite-4.1": ("ibm-granite/granite-4.1", APACHE, True),
    "llama-cpp-deepseek-r1": ("llama.cpp's own template for DeepSeek-R1 (MIT model)", MIT, True),
    "llama-cpp-rwkv-world": ("llama.cpp's own template for RWKV World (Apache-2.0 model)", MIT, True),
    "meetkai-functionary-medium-v3.1": ("meetkai/functionary-medium-v3.1", "Llama 3.1 Community (base model)", False),
    "meetkai-functionary-medium-v3.2": ("meetkai/functionary-medium-v3.2", "Llama 3 Community (base model)", False),
    "meta-llama-Llama-3.1-8B-Instruct": ("meta-llama/Llama-3.1-8B-Instruct", "Llama 3.1 Community", False),
    "meta-llama-Llama-3.2-3B-Instruct": ("meta-llama/Llama-3.2-3B-Instruct", "Llama 3.2 Community", False),
    "meta-llama-Llama-3.3-70B-Instruct": ("meta-llama/Llama-3.3-70B-Instruct", "Llama 3.3 Community", False),
    "microsoft-Phi-3.5-mini-instruct": ("microsoft/Phi-3.5-mini-instruct", MIT, True),
    "mistralai-Ministral-3-14B-Reasoning-2512": ("mistralai/Ministral-3-14B-Reasoning-2512", APACHE, True),
    "mistralai-Mistral-Nemo-Instruct-2407": ("mistralai/Mistral-Nemo-Instruct-2407", APACHE, True),
    "moonshotai-Kimi-K2": ("moonshotai/Kimi-K2-Instruct", "Modified MIT (attribution clause)", False),
    "openai-gpt-oss-120b": ("openai/gpt-oss-120b", APACHE, True),
    "openbmb-MiniCPM5-1B": ("openbmb/MiniCPM5-1B", APACHE, True),
    "poolside-Laguna-S-2.1": ("poolside/Laguna-S-2.1", "unverified", False),
    "poolside-Laguna-XS-2.1": ("poolside/Laguna-XS-2.1", "unverified", False),
    "poolside-Laguna-XS.2": ("poolside/Laguna-XS.2", APACHE, True),
    "tencent-Hy3": ("tencent (Hunyuan 3)", "Tencent Hunyuan Community License", False),
    "unsloth-Apriel-1.5": ("ServiceNow-AI/Apriel-1.5-15b-Thinker", MIT, True),
    "unsloth-mistral-Devstral-Small-2507": ("mistralai/Devstral-Small-2507", APACHE, True),
    "upstage-Solar-Open-100B": ("upstage/Solar-Open-100B", "Solar-Apache License 2.0 (modified)", False),
}

# ---- special tokens per family -----------------------------------------------------------------
# What a tokenizer's special_tokens_map would hand the template; chosen per family so templates that
# print them show realistic text. (Exact values do not matter for conformance: both engines get the
# same strings.)
def family_tokens(name):
    n = name.lower()
    table = [
        (("meta-llama", "hermes", "firefunction", "functionary", "distill-llama"),
         "<|begin_of_text|>", "<|eot_id|>"),
        (("deepseek", "llama-cpp-deepseek"), "<\uff5cbegin\u2581of\u2581sentence\uff5c>",
         "<\uff5cend\u2581of\u2581sentence\uff5c>"),
        (("gemma",), "<bos>", "<eos>"),
        (("cohere",), "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
        (("qwen", "mimo", "smollm"), "", "<|im_end|>"),
        (("phi-3",), "<s>", "<|endoftext|>"),
        (("seed-oss",), "<seed:bos>", "<seed:eos>"),
        (("lfm",), "<|startoftext|>", "<|im_end|>"),
        (("gpt-oss",), "<|startoftext|>", "<|return|>"),
        (("granite",), "<|end_of_text|>", "<|end_of_text|>"),
    ]
    for keys, bos, eos in table:
        if any(k in n for k in keys):
            return bos, eos
    return "<s>", "</s>"


# ---- conversations -----------------------------------------------------------------------------
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city, e.g. \"Paris\" or 'Tōkyō'.\n"
                           "Returns temperature and conditions.",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "City name, e.g. \"Zürich\""},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                             "description": "Temperature unit"},
                },
                "required": ["location"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": "Recherche de vols ✈ — «aller simple»; prices in €.",
            "parameters": {
                "type": "object",
                "properties": {
                    "route": {
                        "type": "object",
                        "description": "Where from and where to",
                        "properties": {
                            "from": {"type": "string", "description": "IATA code"},
                            "to": {"type": "string", "description": "IATA code"},
                        },
                        "required": ["from", "to"],
                    },
                    "passengers": {"type": "integer", "minimum": 1, "default": 1},
                    "max_price": {"type": "number", "maximum": 2500.5},
                    "cabin": {"type": "array",
                              "items": {"type": "string", "enum": ["economy", "business"]}},
                    "flexible": {"type": "boolean"},
                },
                "required": ["route"],
            },
        },
    },
]

SYSTEM = "You are a helpful assistant. Answer briefly."


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


# A tool with only a name (no description, no parameters), and arguments with numbers and strings
# whose JSON / str() forms differ between languages: Python's shortest repr of floats (1e-07,
# 1e+17, -0.0, 3.0), integers a double cannot hold exactly (2^53 + 1, -2^63), control characters
# and U+2028. (Integers beyond 64 bits are left out: Python keeps them exact, tessera's engine
# refuses them as input.)
MINIMAL_TOOL = {"type": "function", "function": {"name": "ping"}}
NUMBER_ARGS = {"big": 9007199254740993, "min64": -9223372036854775808, "neg": -7,
               "negzero": -0.0, "third": 1 / 3, "tiny": 1e-07, "huge": 1e17, "whole": 3.0,
               "ctrl": "a\u0001b\u001fc\u007fd", "ls": "x\u2028y", "esc": "\"\\/\b\f\t",
               "nested": [1, [2.5, {"k": None}], True]}
WEATHER_ARGS = {"location": "Paris", "unit": "celsius"}
FLIGHT_ARGS = {"route": {"from": "CDG", "to": "NRT"}, "passengers": 2, "max_price": 1200.5,
               "cabin": ["economy"], "flexible": False}
WEATHER_RESULT = json.dumps({"temperature": 18.5, "conditions": "cloudy ☁"}, ensure_ascii=False)

# name, messages, tools?, add_generation_prompt, extra variables
CONVERSATIONS = [
    ("system_user", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is the capital of France?"},
    ], False, True, {}),
    ("multi_turn", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke about compilers."},
    ], False, True, {}),
    ("ends_assistant", [
        {"role": "user", "content": "Count to three."},
        {"role": "assistant", "content": "One, two, three."},
        {"role": "user", "content": "Now backwards."},
        {"role": "assistant", "content": "Three, two, one."},
    ], False, False, {}),
    ("no_system", [
        {"role": "user", "content": "Write a haiku about the sea.\nKeep it short."},
    ], False, True, {}),
    ("tools_offered", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What's the weather in Paris?"},
    ], True, True, {}),
    ("tool_call_object_args", [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("abc123xyz", "get_weather", WEATHER_ARGS)]},
        {"role": "tool", "tool_call_id": "abc123xyz", "name": "get_weather",
         "content": WEATHER_RESULT},
    ], True, True, {}),
    ("tool_call_object_args_empty_content", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Flights CDG to NRT for 2, under 1200.5 €?"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("fl1ght002", "search_flights", FLIGHT_ARGS)]},
        {"role": "tool", "tool_call_id": "fl1ght002", "name": "search_flights",
         "content": "[]"},
    ], True, True, {}),
    ("tool_call_string_args", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find me a flight from Paris to Tokyo for two."},
        {"role": "assistant", "content": "",
         "tool_calls": [call("fl1ght001", "search_flights",
                             json.dumps(FLIGHT_ARGS, ensure_ascii=False))]},
        {"role": "tool", "tool_call_id": "fl1ght001", "name": "search_flights",
         "content": "[{\"flight\": \"AF276\", \"price\": 1099.0}]"},
        {"role": "assistant", "content": "Flight AF276 costs 1099 €."},
    ], True, False, {}),
    ("parallel_tool_calls", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Weather in Paris and in Tokyo, please."},
        {"role": "assistant", "content": "",
         "tool_calls": [call("call0par1", "get_weather", {"location": "Paris"}),
                        call("call0par2", "get_weather", {"location": "東京", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call0par1", "name": "get_weather",
         "content": WEATHER_RESULT},
        {"role": "tool", "tool_call_id": "call0par2", "name": "get_weather",
         "content": "{\"temperature\": 21, \"conditions\": \"sunny\"}"},
    ], True, True, {}),
    ("unicode_jinja_like", [
        {"role": "system", "content": "Réponds en français. 日本語もOK 👍"},
        {"role": "user", "content": "Explain {{ x }} and {% if %} and {# comment #} in Jinja.\n"
                                    "Also: \"quotes\", 'single', back\\slash, tab\there, "
                                    "emoji 🚀, naïve café, 中文字符."},
        {"role": "assistant", "content": "{{ x }} prints x; {% if %} branches; {# #} is a comment. "
                                         "<|im_end|> is just text here."},
        {"role": "user", "content": "¿Y {%- raw -%}? ✓"},
    ], False, True, {}),
    ("reasoning_content", [
        {"role": "user", "content": "What is 17 * 3?"},
        {"role": "assistant", "content": "17 * 3 = 51.",
         "reasoning_content": "17 * 3 = 17 + 17 + 17 = 51."},
        {"role": "user", "content": "And 51 / 3?"},
    ], False, True, {}),
    ("enable_thinking_false", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Quick answer: 2 + 2?"},
    ], False, True, {"enable_thinking": False}),
    ("multipart_content", [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "user", "content": [{"type": "text", "text": "Describe this:"},
                                     {"type": "text", "text": "a red apple on a table."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A shiny red apple."}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
    ], False, True, {}),
    ("numbers_and_escapes", [
        {"role": "user", "content": "Ping with odd values: \u0001 \u001f \u007f \u2028 \\ \"."},
        {"role": "assistant", "content": "",
         "tool_calls": [call("n0mb3rs01", "ping", NUMBER_ARGS)]},
        {"role": "tool", "tool_call_id": "n0mb3rs01", "name": "ping",
         "content": "{\"ok\": true, \"latency_ms\": 0.25}"},
    ], True, True, {"tools": TOOLS + [MINIMAL_TOOL]}),
    ("empty_messages", [], False, True, {}),
    ("documents_and_kwargs", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Using the documents, what are the capitals?"},
    ], False, True, {"documents": [
        {"title": "Doc «1»", "text": "Paris is the capital of France."},
        {"title": "Doc 2", "text": "東京 (Tokyo) is the capital of Japan.\nIt is large."}],
        "reasoning_effort": "high", "builtin_tools": ["brave_search", "python"],
        "tools_in_user_message": False, "date_string": "14 Mar 2025"}),
    ("system_mid_and_names", [
        {"role": "user", "name": "alice", "content": "Hello, I am Alice."},
        {"role": "assistant", "content": "Hi Alice!"},
        {"role": "system", "content": "From now on, answer in French."},
        {"role": "user", "name": "alice", "content": "How are you?"},
    ], False, True, {}),
    ("final_assistant_reasoning", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "No: 91 = 7 × 13.",
         "reasoning_content": "91 / 7 = 13, so it is composite."},
    ], False, False, {"enable_thinking": True}),
    ("reasoning_tool_call", [
        {"role": "user", "content": "Is it warm in Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "I should call get_weather.",
         "tool_calls": [call("abc123xyz", "get_weather", {"location": "Paris"})]},
        {"role": "tool", "tool_call_id": "abc123xyz", "name": "get_weather",
         "content": WEATHER_RESULT},
        {"role": "assistant", "content": "Yes, 18.5 °C.",
         "reasoning_content": "18.5 is mild."},
        {"role": "user", "content": "Thanks."},
    ], True, True, {"enable_thinking": True}),
]


def alias_reasoning(messages):
    """transformers' _alias_reasoning_fields: reasoning under any of its names is copied to
    "thinking" (first) and "reasoning_content" (last), so the template sees exactly these."""
    out = []
    for m in messages:
        r = next((m[k] for k in ("reasoning_content", "thinking", "reasoning")
                  if m.get(k) is not None), None)
        if r is not None:
            m = {"thinking": r, **m, "reasoning_content": r}
        out.append(m)
    return out


def case_vars(name, conv):
    cname, messages, with_tools, agp, extra = conv
    bos, eos = family_tokens(name)
    v = {"messages": alias_reasoning(messages), "tools": TOOLS if with_tools else None,
         "documents": None, "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos}
    v.update(extra)  # may replace tools or documents (in place) and add variables
    return v


def fixed_strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).replace(
        tzinfo=None).strftime(fmt)


def render_case(compiled, src, vars_json):
    v = json.loads(vars_json)
    try:
        text = compiled.render(**v)
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:  # raise_exception raises exactly this
            return {"raised": str(e.message)}
        return {"error": {"type": type(e).__name__, "message": str(e)}}
    except Exception as e:  # noqa: BLE001 - Python-level errors inside the template (TypeError, ...)
        return {"error": {"type": type(e).__name__, "message": str(e)}}
    # Cross-check: transformers' own renderer, from the same inputs, gives the same text.
    kw = {k: x for k, x in v.items()
          if k not in ("messages", "tools", "documents", "add_generation_prompt")}
    ref, _ = ctu.render_jinja_template(conversations=[v["messages"]], tools=v["tools"],
                                       documents=v["documents"], chat_template=src,
                                       add_generation_prompt=v["add_generation_prompt"], **kw)
    if ref[0] != text:
        raise SystemExit("render_jinja_template disagrees with the direct rendering")
    return {"expected": text}


def process(path, out_path):
    name = path.stem
    src = path.read_text(encoding="utf-8")
    old = {}
    if out_path.exists():
        for c in json.loads(out_path.read_text(encoding="utf-8")).get("cases", []):
            old[c["name"]] = c
    doc = {"template": path.name, "model": LICENCES[name][0], "licence": LICENCES[name][1],
           "jinja2": jinja2.__version__, "transformers": transformers.__version__, "now": NOW}
    try:
        compiled = ctu._compile_jinja_template(src)
    except jinja2.exceptions.TemplateSyntaxError as e:
        compiled = None
        doc["compile_error"] = {"type": type(e).__name__, "message": str(e)}
    if compiled is not None:
        compiled.environment.globals["strftime_now"] = fixed_strftime_now
    cases = []
    for conv in CONVERSATIONS:
        vars_json = json.dumps(case_vars(name, conv), ensure_ascii=False)
        case = {"name": conv[0], "vars": vars_json}
        if compiled is None:
            case["error"] = dict(doc["compile_error"])
        else:
            case.update(render_case(compiled, src, vars_json))
        prev = old.get(conv[0])
        if prev and "known_diff" in prev and all(prev.get(k) == case.get(k) for k in
                                                 ("vars", "expected", "raised", "error")):
            case["known_diff"] = prev["known_diff"]
        cases.append(case)
    doc["cases"] = cases
    out_path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return cases


def write_readme(committed, source_commit):
    lines = [
        "# Real chat templates (permissively licensed models)",
        "",
        "Chat templates from llama.cpp's `models/templates/` folder (" + SOURCE_REPO + ", commit",
        "`" + source_commit + "`; the llama.cpp repository is MIT). A chat template is a file of",
        "its model's repository, so the model's licence applies: only templates of models under",
        "Apache-2.0 or MIT are here; the others are tested from outside the repository",
        "(docs/templates-conformance.md). Files are byte-identical to the source.",
        "",
        "`<name>.expected.json` is generated by `scripts/reference/template_cases.py`: for each",
        "conversation the exact variables (JSON) and what Python jinja2, configured as",
        "transformers' apply_chat_template, rendered or raised. `tests/template/test_templates_real.c`",
        "compares tessera's engine against it.",
        "",
        "| template | model | model licence |",
        "|---|---|---|",
    ]
    for n in committed:
        model, lic, _ = LICENCES[n]
        lines.append(f"| {n}.jinja | {model} | {lic} |")
    (REAL_DIR / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_dir = os.environ.get("TS_TEMPLATES_DIR",
                                 str(Path.home() / ".cache/tessera/templates/llama.cpp"))
    ap.add_argument("--templates-dir", default=default_dir)
    ap.add_argument("--only", default="", help="comma-separated template names (no .jinja)")
    ap.add_argument("--source-commit", default="d32676d77426540327835040d5d3279728f0b4c8")
    args = ap.parse_args()

    tdir = Path(args.templates_dir)
    files = sorted(tdir.glob("*.jinja"))
    if not files:
        sys.exit(f"no *.jinja in {tdir}: bring llama.cpp's models/templates/ there first")
    only = set(filter(None, args.only.split(",")))
    unknown = [f.stem for f in files if f.stem not in LICENCES]
    if unknown:
        sys.exit("no licence recorded for: " + ", ".join(unknown) + " (add them to LICENCES)")
    REAL_DIR.mkdir(parents=True, exist_ok=True)
    committed = []
    for f in files:
        name = f.stem
        permissive = LICENCES[name][2]
        if permissive:
            committed.append(name)
        if only and name not in only:
            continue
        if permissive:
            dest = REAL_DIR / f.name
            shutil.copyfile(f, dest)
            out = REAL_DIR / (name + ".expected.json")
        else:
            out = tdir / (name + ".expected.json")
        cases = process(f, out)
        ok = sum(1 for c in cases if "expected" in c)
        raised = sum(1 for c in cases if "raised" in c)
        print(f"{'repo ' if permissive else 'outside'} {name}: {ok} rendered, {raised} raised, "
              f"{len(cases) - ok - raised} errors")
    write_readme(committed, args.source_commit)


if __name__ == "__main__":
    main()
