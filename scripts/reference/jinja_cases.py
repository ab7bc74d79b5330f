#!/usr/bin/env python3
"""Writes tests/data/templates/cases.json: small Jinja cases with the output Python's jinja2
gives when configured as Hugging Face's apply_chat_template configures it
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson with
ensure_ascii=False, raise_exception, strftime_now), for tests/template/test_jinja.c.

Run with the reference environment (docs/reference.md):

    /work/venv-ref/bin/python scripts/reference/jinja_cases.py

Each case is a template, the variables as JSON text (default_vars when absent), and either the expected output or the
expected failure: the status our engine must return (jinja2 has no such codes, so the case
names it) and the line jinja2 reports. Cases marked "engine" test our limits (steps, output,
depth), which jinja2 does not have; their expectation is given here, not computed.
strftime_now renders the fixed time NOW (UTC) on both sides.
"""
import datetime
import json
import os
import sys
import traceback

from transformers.utils.chat_template_utils import _compile_jinja_template

NOW = 1700000000
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "data", "templates", "cases.json")

VARS = {
    "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke ☺"},
    ],
    "tools": [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                          "parameters": {"type": "object", "properties": {
                                              "city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "code_interpreter"},
    ],
    "add_generation_prompt": True,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "name": "World",
    "n": 3,
    "f": 2.5,
    "big": 12345678901234,
    "neg": -7,
    "nums": [3, 1, 2],
    "words": ["banana", "Apple", "cherry", "apple"],
    "d": {"b": 2, "a": 1, "C": 3},
    "s": "  Hello World  ",
    "u": "héllo wörld 🎉",
    "empty": "",
    "nothing": None,
    "t": True,
    "fl": [1.0, 1e-05, 1e20, 0.1, -0.0, 123456789.123, 1e16, 1.5e-07],
    "users": [{"name": "bob", "age": 30, "admin": True}, {"name": "alice", "age": 25},
              {"name": "Carol", "age": 35, "admin": False}],
    "nested": {"a": {"b": {"c": [10, 20, 30]}}},
    "ctrl": "tab\there\nnew \"q\" back\\slash \u0001 \u007f é",
}

CASES = []


def case(name, template, vars=None, status=None, engine=None, opts=None, raw_vars=None,
         message=None):
    """status: the ts_status name expected when jinja2 fails (checked against it failing).
    engine: an expectation of our own (a status name) where jinja2 has no such limit.
    opts: ts_tpl_options fields for the render (max_steps, max_output, max_depth, ...).
    message: with engine, our exact error message (which limit stopped it)."""
    CASES.append({"name": name, "template": template,
                  "vars": raw_vars if raw_vars is not None else (VARS if vars is None else vars),
                  "status": status, "engine": engine, "opts": opts or {},
                  "message": message})


# ---- text, whitespace control, comments, raw ------------------------------------------
case("text", "plain text\nwith lines")
case("trailing_newline", "one newline at the end is dropped\n")
case("two_trailing_newlines", "only one is dropped\n\n")
case("crlf", "a\r\nb\rc\r\n")
case("var", "Hello {{ name }}!")
case("comment", "a{# a comment #}b")
case("comment_multiline", "a\n{# one\ntwo #}\nb")
case("trim_blocks", "{% if t %}\nyes\n{% endif %}\nend")
case("lstrip_blocks", "x\n    {% if t %}\n    in\n    {% endif %}\ny")
case("lstrip_not_var", "x\n    {{ name }}\ny")
case("lstrip_tabs", "x\n\t\t{% if t %}in{% endif %}\ny")
case("lstrip_not_midline", "x  {% if t %}in{% endif %}  y")
case("lstrip_comment", "a\n   {# c #}\nb")
case("minus_left", "a   \n  {{- name }}")
case("minus_right", "{{ name -}}   \n  b")
case("minus_both_block", "a  \n {%- if t -%}  \n x \n {%- endif -%} \n b")
case("plus_left", "x\n    {%+ if t %}in{% endif %}\ny")
case("plus_right", "{% if t +%}\nin{% endif %}")
case("minus_comment", "a  {#- c -#}  b")
case("raw", "{% raw %}{{ not a var }} {% if %}{% endraw %}")
case("raw_ws", "a\n  {%- raw -%}  {{ x }}  {%- endraw -%}  \nb")
case("raw_trim", "{% raw %}\nx\n{% endraw %}\ny")
case("first_line_lstrip", "   {% if t %}a{% endif %}")
case("var_dict_literal", "{{ {'a': {'b': 1}} }}")
case("block_then_text_newlines", "{% set x = 1 %}\n\n{{ x }}")

# ---- literals and printing ------------------------------------------------------------
case("int", "{{ 42 }} {{ -3 }} {{ 1_000 }} {{ 0x1f }} {{ 0o17 }} {{ 0b101 }}")
case("float", "{{ 1.5 }} {{ 2.0 }} {{ 1e3 }} {{ 1.5e-7 }} {{ 0.1 + 0.2 }}")
case("float_repr", "{% for x in fl %}{{ x }}|{% endfor %}")
case("bools_none", "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}")
case("string_escapes", r"""{{ 'a\'b' }} {{ "c\"d" }} {{ 'tab\tnl\nx' }} {{ '\x41\u00e9\U0001F600' }} {{ '\d' }}""")
case("adjacent_strings", "{{ 'a' 'b' \"c\" }}")
case("list_repr", "{{ [1, 'a', 2.5, none, true, [\"x\"], {'k': 'v'}] }}")
case("tuple_repr", "{{ (1,) }} {{ (1, 2) }} {{ () }}")
case("dict_repr", "{{ {'a': 1, 'b': [1, 2], 3: 'x'} }}")
case("str_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }}")
case("str_repr_ctrl", "{{ [ctrl] }}")
case("undefined_prints_empty", "[{{ missing }}]")
case("unicode_passthrough", "{{ u }}|{{ u|length }}|{{ u[1] }}|{{ u[-1] }}|{{ u[:5] }}")
case("print_namespace", "{{ namespace(a=1, b='x') }}")
case("print_nested", "{{ nested }}")

# ---- expressions ----------------------------------------------------------------------
case("arith", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}")
case("arith_neg", "{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }}")
case("arith_mixed", "{{ 1 + 2.5 }} {{ true + 1 }} {{ 10 / 4 }} {{ 3 * 1.0 }}")
case("pow_left_assoc", "{{ 2 ** 3 ** 2 }}")
case("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ not 1 == 2 }}")
case("concat_tilde", "{{ 'a' ~ 1 ~ none ~ missing ~ [1] }}")
case("str_plus", "{{ 'a' + 'b' }} {{ [1] + [2, 3] }} {{ (1,) + (2,) }}")
case("str_mul", "{{ 'ab' * 3 }} {{ 2 * 'x' }} {{ [0] * 3 }}")
case("compare", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 != 2 }}")
case("compare_chain", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }}")
case("in_ops", "{{ 'ell' in 'hello' }} {{ 2 in nums }} {{ 'a' in d }} {{ 'z' not in d }} {{ 5 not in nums }}")
case("and_or_values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or none }} {{ [] or {} }}")
case("not", "{{ not '' }} {{ not [1] }} {{ not missing }}")
case("ternary", "{{ 'y' if t else 'n' }} {{ 'y' if nothing else 'n' }} [{{ 'y' if false }}]")
case("ternary_nested", "{{ 'a' if n > 5 else 'b' if n > 2 else 'c' }}")
case("truthiness", "{% for v in [0, 1, '', 'x', [], [0], {}, none, 0.0] %}{{ 'T' if v else 'F' }}{% endfor %}")
case("attr_item", "{{ messages[0].role }} {{ messages[0]['content'] }} {{ nested.a.b.c[1] }} {{ nested['a']['b'].c[-1] }}")
case("attr_int", "{{ nums.0 }} {{ nested.a.b.c.2 }}")
case("missing_attr", "[{{ messages[0].nope }}] [{{ d.zz }}] [{{ nums[10] }}]")
case("dict_method_vs_key", "{{ {'items': 1}['items'] }} {{ {'x': 1}.items() | list }}")
case("slices", "{{ nums[1:] }} {{ nums[:-1] }} {{ nums[::-1] }} {{ nums[::2] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[::-2] }} {{ nums[5:] }} {{ nums[-10:2] }}")
case("slice_unicode", "{{ u[::-1] }} {{ u[2:8] }}")
case("negative_index", "{{ nums[-1] }} {{ 'xyz'[-2] }}")
case("call_kwargs", "{{ 'a-b-c'.split('-', maxsplit=1) }}")
case("list_dict_literals", "{% set x = [1, [2, 3], {'k': [4]}] %}{{ x[1][0] }}{{ x[2].k[0] }}")
case("parens_tuple", "{% set a, b = (1, 2) %}{{ a }}{{ b }}")

# ---- statements -----------------------------------------------------------------------
case("if_elif_else", "{% for i in range(4) %}{% if i == 0 %}zero{% elif i == 1 %}one{% elif i == 2 %}two{% else %}many{% endif %} {% endfor %}")
case("for_basic", "{% for m in messages %}{{ m.role }}:{{ m.content }}\n{% endfor %}")
case("for_loop_vars", "{% for x in nums %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}")
case("for_prev_next", "{% for x in nums %}[{{ loop.previtem }},{{ loop.nextitem }}]{% endfor %}")
case("for_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}")
case("for_changed", "{% for x in [1, 1, 2, 2, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}")
case("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}")
case("for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}")
case("for_filter_else", "{% for x in nums if x > 10 %}{{ x }}{% else %}none{% endfor %}")
case("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}")
case("for_dict_keys", "{% for k in d %}{{ k }}{% endfor %}")
case("for_string", "{% for ch in 'héy' %}[{{ ch }}]{% endfor %}")
case("for_nested_loop", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}")
case("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}")
case("for_undefined", "[{% for x in missing %}x{% endfor %}]")
case("for_none_iter_fails", "{% for x in nothing %}{% endfor %}", status="TS_ERR_TYPE")
case("set_scoping", "{% set x = 1 %}{% for i in range(3) %}{{ x }}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }}")
case("set_loop_fresh", "{% for i in range(3) %}{% if i > 0 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}")
case("set_if_leaks", "{% if t %}{% set x = 5 %}{% endif %}{{ x }}")
case("namespace", "{% set ns = namespace(count=0, last=none) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.count }} {{ ns.last }}")
case("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}")
case("set_tuple", "{% set a, b = [1, 2] %}{{ b }}{{ a }}")
case("set_block", "{% set x %}Hello {{ name }}{% endset %}[{{ x }}]")
case("set_block_filter", "{% set x | upper | trim %}  hi {{ name }}  {% endset %}[{{ x }}]")
case("set_multi_value", "{% set x = 1, 2 %}{{ x }}")
case("macro", "{% macro greet(who, punct='!') %}Hi {{ who }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', who='c') }}")
case("macro_defaults_ref", "{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }}")
case("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}")
case("macro_missing_arg", "{% macro m(a, b) %}[{{ a }}][{{ b }}]{% endmacro %}{{ m(1) }}")
case("macro_scope", "{% set g = 'global' %}{% macro m() %}{{ g }}{% set g = 'local' %}{{ g }}{% endmacro %}{{ m() }} {{ g }}")
case("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ fact(10) }}")
case("macro_returns_string", "{% macro m() %}  x  {% endmacro %}[{{ m() | trim }}]{{ m() | length }}")
case("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inside {{ name }}{% endcall %}")
case("call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% endfor %}{% endmacro %}{% call(item, i) each(nums) %}{{ i }}={{ item }};{% endcall %}")
case("filter_block", "{% filter upper %}hello {{ name }}{% endfilter %}")
case("filter_block_chain", "{% filter trim | replace('l', 'L') %}   hello   {% endfilter %}!")
case("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]")
case("generation_block", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}")
case("print_tag", "{% print name ~ '!' %}")
case("filter_block_scope", "{% filter upper %}{% set y = 1 %}{{ y }}{% endfilter %}[{{ y }}]")
case("set_block_scope", "{% set x %}{% set y = 2 %}{{ y }}{% endset %}{{ x }}[{{ y }}]")
case("break_in_set_block", "{% for i in range(5) %}{% set x %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endset %}{{ x }}{% endfor %}")
case("break_in_filter_block", "{% for i in range(5) %}{% filter upper %}a{% if i == 1 %}{% continue %}{% endif %}b{% endfilter %}{% endfor %}")
case("err_break_outside_loop", "x\n{% break %}", status="TS_ERR_FORMAT")
case("err_break_in_macro", "{% for i in xs %}{% macro m() %}\n{% break %}{% endmacro %}{% endfor %}",
     vars=dict(VARS, xs=[1]), status="TS_ERR_FORMAT")
case("err_continue_in_for_else", "{% for i in [] %}{% else %}\n{% continue %}{% endfor %}", status="TS_ERR_FORMAT")

# ---- tests (is) -----------------------------------------------------------------------
case("test_defined", "{{ name is defined }} {{ missing is defined }} {{ missing is undefined }} {{ messages[0].x is defined }}")
case("test_types", "{{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is integer }} {{ true is number }} {{ true is boolean }} {{ 'a' is string }} {{ d is mapping }} {{ nums is sequence }} {{ 'x' is iterable }} {{ 5 is iterable }}")
case("test_none_true_false", "{{ nothing is none }} {{ t is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }}")
case("test_numbers", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }}")
case("test_compare", "{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 3 is gt 2 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ nums|select('==', 1)|list }}")
case("test_in", "{{ 2 is in nums }} {{ 'x' is in 'xyz' }}")
case("test_case", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aB' is lower }} {{ '12' is lower }}")
case("test_not", "{{ name is not defined }} {{ 1 is not string }} {{ not name is defined }}")
case("test_sameas", "{{ nothing is sameas none }} {{ t is sameas true }} {{ 1 is sameas 1 }}")
case("test_callable", "{{ range is callable }} {{ name is callable }} {{ 'x'.upper is callable }}")
case("test_filter_test", "{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }}")
case("test_mapping_ns", "{{ namespace() is mapping }} {{ d is mapping }}")

# ---- filters --------------------------------------------------------------------------
case("f_trim", "[{{ s|trim }}] [{{ 'xxhixx'|trim('x') }}]")
case("f_upper_lower", "{{ name|upper }} {{ name|lower }} {{ u|upper }} {{ 'ÀÉÎ ΑΒΓ АБВ'|lower }}")
case("f_capitalize_title", "{{ 'hELLO wORLD'|capitalize }} {{ 'hello big-world (x) o\\'neil'|title }}")
case("f_length", "{{ nums|length }} {{ 'héllo'|length }} {{ d|count }} {{ missing|length }}")
case("f_join", "{{ nums|join(', ') }} {{ users|join('/', attribute='name') }} {{ [1, none, 'a']|join }}")
case("f_map", "{{ users|map(attribute='name')|join(',') }} {{ words|map('upper')|list }} {{ users|map(attribute='admin', default='?')|list }}")
case("f_map_filter_args", "{{ ['a-b', 'c-d']|map('replace', '-', '+')|list }}")
case("f_select_reject", "{{ range(10)|select('odd')|list }} {{ range(10)|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ nums|select('gt', 1)|list }}")
case("f_selectattr", "{{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }} {{ users|selectattr('age', 'gt', 26)|map(attribute='name')|list }} {{ users|selectattr('admin', 'defined')|list|length }}")
case("f_selectattr_eq", "{{ tools|selectattr('type', 'equalto', 'function')|list|length }} {{ messages|selectattr('role', 'eq', 'user')|list|length }}")
case("f_select_none_input", "{{ nothing|selectattr('x')|list }} {{ nothing|map('upper')|list }}")
case("f_generator_truthy", "{{ 'T' if nums|select('gt', 100) else 'F' }}")
case("f_first_last", "{{ nums|first }} {{ nums|last }} {{ 'abc'|first }} [{{ []|first }}]")
case("f_default", "{{ missing|default('dflt') }} {{ name|default('x') }} [{{ empty|default('e') }}] {{ empty|default('e', true) }} {{ nothing|d('n', boolean=true) }} [{{ missing|default }}]")
case("f_items", "{{ d|items|list }} {% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}")
case("f_list", "{{ 'abc'|list }} {{ d|list }} {{ range(3)|list }}")
case("f_string", "{{ 1|string + 'x' }} {{ nums|string }} {{ none|string }}")
case("f_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }}")
case("f_int_float", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1f'|int(base=16) }} {{ '3'|float }} {{ 'x'|float }} {{ 2|float }} {{ ' 12 '|int }} {{ '1_000'|int }}")
case("f_round", "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3.14159|round(3) }} {{ 7|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ -0.5|round }}")
case("f_unique", "{{ words|unique|list }} {{ words|unique(case_sensitive=true)|list }} {{ users|unique(attribute='admin')|map(attribute='name')|list }}")
case("f_dictsort", "{{ d|dictsort }} {{ d|dictsort(true) }} {{ d|dictsort(by='value', reverse=true) }}")
case("f_sort", "{{ nums|sort }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ words|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}")
case("f_indent", "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb\n'|indent('> ', blank=true) }}|{{ 'x'|indent(first=true) }}")
case("f_safe_escape", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|safe }} {{ ('<b>'|safe)|escape }} {{ '<'|forceescape }}")
case("f_markup_plus", "{{ '<b>'|safe + '<i>' }} {{ '<i>' + '<b>'|safe }}")
case("f_abs_sum_minmax", "{{ -3|abs }} {{ neg|abs }} {{ -2.5|abs }} {{ nums|sum }} {{ users|sum(attribute='age') }} {{ nums|sum(start=10) }} {{ nums|min }} {{ nums|max }} {{ words|min }} {{ words|max(case_sensitive=true) }} {{ users|max(attribute='age') }}")
case("f_reverse", "{{ 'abc'|reverse }} {{ nums|reverse|list }} {{ u|reverse }}")
case("f_batch", "{{ range(7)|batch(3)|list }} {{ range(5)|batch(2, 'x')|list }}")
case("f_wordcount_center", "{{ 'hello big world'|wordcount }} [{{ 'ab'|center(6) }}]")
case("f_format", "{{ '%s is %d years'|format('bob', 30) }} {{ '%05.1f|%x|%r'|format(3.14159, 255, 'q') }} {{ '%(a)s-%(b)s'|format(a=1, b=2) }}")
case("f_truncate", "{{ 'hello world foo bar baz qux'|truncate(12) }} {{ 'hello world'|truncate(8, true) }} {{ 'short'|truncate(10) }} {{ 'hello world foo'|truncate(9, end='~', leeway=0) }}")
case("f_striptags", "{{ '<p>Hello  <b>world</b></p><!-- c -->!'|striptags }}")
case("f_attr", "[{{ d|attr('a') }}] {{ namespace(x=1)|attr('x') }}")
case("f_count_loop", "{% for x in nums %}{{ loop.length }}{% endfor %}")

# ---- tojson ---------------------------------------------------------------------------
case("tojson_basic", "{{ messages|tojson }}")
case("tojson_types", "{{ [1, 1.0, 1e-05, 1e20, -0.0, true, false, none, 'x', [], {}]|tojson }}")
case("tojson_escapes", "{{ ctrl|tojson }}")
case("tojson_unicode", "{{ u|tojson }} {{ u|tojson(ensure_ascii=true) }}")
case("tojson_indent", "{{ tools|tojson(indent=2) }}")
case("tojson_indent_str", "{{ nested|tojson(indent='\\t') }}")
case("tojson_indent0", "{{ nested|tojson(indent=0) }}")
case("tojson_separators", "{{ d|tojson(separators=(',', ':')) }}")
case("tojson_sort_keys", "{{ d|tojson(sort_keys=true) }}")
case("tojson_int_keys", "{{ {1: 'a', 2.5: 'b', true: 'c', none: 'd'}|tojson }}")
case("tojson_positional_is_ensure_ascii", "{{ u|tojson(4) }}")
case("tojson_tuple", "{{ (1, 'a')|tojson }}")
case("tojson_big", "{{ big|tojson }} {{ big * 1000 }}")
case("tojson_undefined", "{{ missing|tojson }}", status="TS_ERR_TYPE")
case("tojson_generator", "{{ nums|map('string')|tojson }}", status="TS_ERR_TYPE")

# ---- methods --------------------------------------------------------------------------
case("m_strip", "[{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] [{{ 'xxaxx'.strip('x') }}] [{{ '\u3000a\u00a0'.strip() }}]")
case("m_split", "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ '  a  b  '.split(none, 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ''.split() }} {{ ''.split(',') }} {{ '  a  b  '.rsplit(none, 1) }} {{ ' b'.rsplit(none, 1) }} {{ 'a b c'.rsplit() }} {{ 'a--b--c'.rsplit('--', 1) }}")
case("m_startswith", "{{ name.startswith('Wo') }} {{ name.endswith('ld') }} {{ name.startswith(('x', 'W')) }} {{ name.endswith(('x',)) }}")
case("m_case", "{{ 'hello world'.title() }} {{ 'hello WORLD'.capitalize() }} {{ 'Hi'.upper() }}{{ 'Hi'.lower() }} {{ 'aBc'.swapcase() }} {{ \"they're bill's\".title() }}")
case("m_replace_find", "{{ 'a-b-c'.replace('-', '+') }} {{ 'a-b-c'.replace('-', '', 1) }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} {{ 'hello'.count('l') }} {{ 'hello'.index('e') }}")
case("m_join", "{{ ', '.join(['a', 'b']) }} {{ '-'.join('abc') }}")
case("m_format", "{{ '{} and {}'.format('a', 'b') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{x}!'.format(x=name) }} {{ '{{}}{}'.format(1) }} {{ '{!r}'.format('q') }}")
case("m_splitlines", "{{ 'a\nb\r\nc\n'.splitlines() }} {{ 'a\nb'.splitlines(true) }}")
case("m_is", "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ ' \t'.isspace() }} {{ 'a1'.isalnum() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }} {{ ''.isdigit() }}")
case("m_misc_str", "{{ 'ab'.removeprefix('a') }} {{ 'ab'.removesuffix('b') }} {{ '7'.zfill(3) }} {{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} [{{ 'x'.ljust(3) }}] [{{ 'x'.rjust(3, '.') }}]")
case("m_dict", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 9) }}")
case("m_list", "{{ nums.index(1) }} {{ [1, 1, 2].count(1) }}")
case("m_list_append_unsafe", "{% set l = [] %}{{ l.append(1) }}", status="TS_ERR_UNSUPPORTED")
case("m_dict_update_unsafe", "{% set x = {} %}{{ x.update({'a': 1}) }}", status="TS_ERR_UNSUPPORTED")
case("m_unsafe_defined", "{{ nums.append is defined }}")
case("m_dunder_unsafe", "{{ name.__class__.__name__ }}", status="TS_ERR_UNSUPPORTED")

# ---- globals --------------------------------------------------------------------------
case("range", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }} {{ range(0)|list }}")
case("dict_global", "{{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ dict({'k': 2}, j=3) }}")
case("raise_exception", "{% if t %}{{ raise_exception('Bad role: ' ~ name) }}{% endif %}", status="TS_ERR_ABORTED")
case("strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M %d %b %Y %A') }}")
case("range_too_big", "{{ range(10 ** 9)|length }}", status="TS_ERR_LIMIT")
case("range_edge", "{{ range(9223372036854775806, 9223372036854775807, 10)|list }} {{ [1, 2, 3][::9223372036854775807] }} {{ 1.5|round(-400) }}")
case("err_format_huge_index", "{{ '{99999999999}'.format(1) }}", status="TS_ERR_RANGE")
case("namespace_underscore", "{% set ns = namespace() %}{% set ns._x = 1 %}", status="TS_ERR_UNSUPPORTED")

# ---- chat-template idioms -------------------------------------------------------------
case("chatml", "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
case("llama3_like", "{{- bos_token }}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = '' %}\n{%- endif %}\n{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}\n{{- system_message }}\n{{- '<|eot_id|>' }}\n{%- for message in messages %}\n    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n")
case("loop_messages_alternate", "{% for m in messages[1:] %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('alternate') }}{% endif %}{{ m.role[0] }}{% endfor %}")
case("last_user_index", "{% set ns = namespace(idx=-1) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.idx = loop.index0 %}{% endif %}{% endfor %}{{ ns.idx }}")
case("content_is_string", "{% for m in messages %}{% if m.content is string %}s{% else %}o{% endif %}{% endfor %}")
case("tools_json_lines", "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}")
case("reasoning_split", "{% set c = '<think>abc</think>\n\nanswer' %}{{ c.split('</think>')[-1].lstrip('\n') }}|{{ c.split('</think>')[0].split('<think>')[-1] }}")
case("jinja_lookalike_content", "{{ messages[-1].content }}",
     vars=dict(VARS, messages=[{"role": "user", "content": "{{ x }} {% if %} {# c #}"}]))

# ---- errors: compile ------------------------------------------------------------------
case("err_unclosed_if", "a\n{% if t %}\nb", status="TS_ERR_FORMAT")
case("err_unclosed_for", "{% for x in nums %}\n{{ x }}", status="TS_ERR_FORMAT")
case("err_bad_endtag", "{% if t %}\n{% endfor %}", status="TS_ERR_FORMAT")
case("err_unclosed_var", "a\n{{ name ", status="TS_ERR_FORMAT")
case("err_unclosed_comment", "x\n{# never closed", status="TS_ERR_FORMAT")
case("err_unknown_tag", "\n\n{% include 'x.html' %}", status="TS_ERR_UNSUPPORTED")
case("err_extends", "{% extends 'base' %}", status="TS_ERR_UNSUPPORTED")
case("err_do_tag", "{% set l = [] %}\n{% do l.append(1) %}", status="TS_ERR_UNSUPPORTED")
case("err_unknown_filter", "\n{{ name|nosuchfilter }}", status="TS_ERR_UNSUPPORTED")
case("err_unknown_filter_in_if_ok", "{% if false %}{{ name|from_json }}{% endif %}ok")
case("err_unknown_filter_in_if_runs", "{% if t %}\n{{ name|from_json }}{% endif %}", status="TS_ERR_UNSUPPORTED")
case("err_unknown_test", "{{ 1 is nosuchtest }}", status="TS_ERR_UNSUPPORTED")
case("unknown_filter_inline_if", "{{ name|from_json if false else 'ok' }}")
case("err_unknown_filter_loop_in_if", "{% if false %}{% for x in nums %}\n{{ x|from_json }}{% endfor %}{% endif %}", status="TS_ERR_UNSUPPORTED")
case("unknown_filter_for_iter_in_if", "{% if false %}{% for x in nums|from_json %}{% endfor %}{% endif %}ok")
case("err_syntax_expr", "{{ 1 + }}", status="TS_ERR_FORMAT")
case("err_unbalanced", "{{ (1 }}", status="TS_ERR_FORMAT")
case("err_unterminated_string", "{{ 'abc }}", status="TS_ERR_FORMAT")
case("err_else_outside", "{% else %}", status="TS_ERR_FORMAT")

# ---- errors: runtime ------------------------------------------------------------------
case("err_undefined_attr", "line1\n{{ missing.attr }}", status="TS_ERR_FORMAT")
case("err_undefined_chain", "{{ messages[0].nope.deeper }}", status="TS_ERR_FORMAT")
case("err_call_undefined", "\n\n{{ nosuchfn() }}", status="TS_ERR_FORMAT")
case("err_add_types", "{{ 'a' + 1 }}", status="TS_ERR_TYPE")
case("err_add_undefined", "{{ missing + 1 }}", status="TS_ERR_FORMAT")
case("err_div_zero", "{{ 1 / 0 }}", status="TS_ERR_RANGE")
case("err_mod_zero", "{{ 1 % 0 }}", status="TS_ERR_RANGE")
case("err_compare_types", "{{ 1 < 'a' }}", status="TS_ERR_TYPE")
case("err_not_callable", "{{ name() }}", status="TS_ERR_TYPE")
case("err_unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", status="TS_ERR_TYPE")
case("err_length_int", "{{ 5|length }}", status="TS_ERR_TYPE")
case("err_length_generator", "{{ nums|select('odd')|length }}", status="TS_ERR_TYPE")
case("err_items_not_mapping", "{{ nums|items|list }}", status="TS_ERR_TYPE")
case("err_join_non_str", "{{ ', '.join([1, 2]) }}", status="TS_ERR_TYPE")
case("err_set_attr_non_ns", "{% set x = {} %}{% set x.a = 1 %}", status="TS_ERR_TYPE")
case("err_dictsort_list", "{{ nums|dictsort }}", status="TS_ERR_TYPE")
case("err_int_undefined", "{{ missing|int }}", status="TS_ERR_FORMAT")
case("err_abs_undefined", "{{ missing|abs }}", status="TS_ERR_TYPE")
case("err_indent_non_str", "{{ 5|indent }}", status="TS_ERR_TYPE")
case("err_truncate_int", "{{ 5|truncate }}", status="TS_ERR_TYPE")
case("truncate_short_list", "{{ nums|truncate(5) }}")
case("err_percent_unused", "{{ 'abc' % 5 }}", status="TS_ERR_TYPE")
case("percent_float_d", "{{ '%d|%5d|%i'|format(4.4e50, -3.7, 2.9) }}")
case("err_percent_float_x", "{{ '%x'|format(3.0) }}", status="TS_ERR_TYPE")
case("percent_list_unused", "{{ 'abc' % [] }}")
case("err_in_dict_unhashable", "{{ [1] in d }}", status="TS_ERR_TYPE")
case("err_unique_unhashable", "{{ [[1], [1]]|unique|list }}", status="TS_ERR_TYPE")
case("undefined_filters", "[{{ missing|trim }}{{ missing|upper }}{{ missing|first }}{{ missing|sum }}{{ missing|join }}{{ missing|sort }}{{ missing|list }}{{ missing|wordcount }}{{ missing|e }}{{ missing|truncate }}{{ missing|min }}]")

# ---- limits (ours) --------------------------------------------------------------------
case("limit_steps", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
     engine="TS_ERR_LIMIT", opts={"max_steps": 1000000},
     message="template:1: step limit of 1000000 reached (max_steps)")
case("limit_output", "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
     engine="TS_ERR_LIMIT", opts={"max_output": 100000})
case("limit_depth", "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
     engine="TS_ERR_LIMIT", opts={"max_depth": 50})
case("limit_string_growth", "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
     engine="TS_ERR_LIMIT", opts={"max_output": 1000000})
case("limit_under", "{% for i in range(100) %}{{ i }}{% endfor %}",
     opts={"max_steps": 100000, "max_output": 1000})
case("no_trim_no_lstrip", "x\n    {% if t %}\nin\n    {% endif %}\ny",
     engine="OK", opts={"no_trim_blocks": 1, "no_lstrip_blocks": 1})
case("vars_not_object", "x", raw_vars="[1, 2]", engine="TS_ERR_FORMAT")
case("vars_bad_json", "x", raw_vars="{\"a\": }", engine="TS_ERR_FORMAT")
case("vars_int_float", "{{ a }} {{ b }} {{ c }} {{ a is integer }} {{ b is float }}",
     raw_vars='{"a": 1, "b": 1.0, "c": 1e2}')
case("vars_key_order", "{{ x|tojson }} {% for k in x %}{{ k }}{% endfor %}",
     raw_vars='{"x": {"z": 1, "a": 2, "m": {"y": [1, 2.50, -0]}}}')
case("vars_unicode_escapes", "{{ s }}|{{ s|length }}", raw_vars='{"s": "\\u00e9\\ud83c\\udf89\\n"}')


DEFAULT_VARS_TEXT = json.dumps(VARS, ensure_ascii=False)


def make_env_render(src):
    t = _compile_jinja_template(src)
    fixed = datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc)
    t.globals["strftime_now"] = lambda fmt: fixed.strftime(fmt)
    return t


def template_line(exc):
    """The template line jinja2 reports for exc: its lineno, or the innermost traceback frame
    that belongs to the template."""
    import jinja2
    if isinstance(exc, SyntaxError) and not isinstance(exc, jinja2.TemplateSyntaxError):
        return None  # Python's error in the generated code (break outside loop): no template line
    line = getattr(exc, "lineno", None)
    if line:
        return line
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == "<template>":
            return frame.lineno
    return None


def run(c):
    vars_text = c["vars"] if isinstance(c["vars"], str) else json.dumps(c["vars"], ensure_ascii=False)
    out = {"name": c["name"], "template": c["template"]}
    if vars_text != DEFAULT_VARS_TEXT:
        out["vars"] = vars_text
    if c["opts"]:
        out["opts"] = c["opts"]
    if c["engine"] == "OK":
        # Our no_trim_blocks / no_lstrip_blocks options: compare with jinja2's defaults.
        import jinja2.sandbox
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(extensions=["jinja2.ext.loopcontrols"])
        out["status"] = "TS_OK"
        out["output"] = env.from_string(c["template"]).render(**json.loads(vars_text))
        return out
    if c["engine"]:
        out["status"] = c["engine"]
        if c["message"]:
            out["message"] = c["message"]
        return out
    vars_obj = json.loads(vars_text)
    try:
        text = make_env_render(c["template"]).render(**vars_obj)
    except Exception as exc:  # noqa: BLE001 - any jinja2 failure is an expected refusal
        if not c["status"]:
            sys.exit(f"case {c['name']}: jinja2 failed but no status is expected: {exc!r}")
        out["status"] = c["status"]
        out["line"] = template_line(exc)
        out["jinja2_error"] = f"{type(exc).__name__}: {exc}"
        if c["status"] == "TS_ERR_ABORTED":
            out["message"] = f"template raised: {exc}"
        return out
    if c["status"]:
        sys.exit(f"case {c['name']}: expected {c['status']} but jinja2 rendered {text!r}")
    out["status"] = "TS_OK"
    out["output"] = text
    return out


def main():
    names = set()
    results = []
    for c in CASES:
        if c["name"] in names:
            sys.exit(f"duplicate case name {c['name']}")
        names.add(c["name"])
        results.append(run(c))
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/reference/jinja_cases.py", "now": NOW,
                   "default_vars": DEFAULT_VARS_TEXT, "cases": results}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(results)} cases to {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
