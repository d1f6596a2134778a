"""Jinja feature parity: small templates exercising one construct each (whitespace control,
filters, tests, methods, slicing, loops, macros, namespaces, Undefined, Markup, tojson options,
Python printing of values, errors) rendered by memra and by transformers' jinja2 environment.
Output must be byte-identical; where jinja2 raises, memra must raise too, with the same
raise_exception message, jinja2's message, or the same kind of error (template_errors.py)."""
import json
import subprocess

import pytest

import required
from template_errors import error_mismatch

transformers_utils = required.import_module("transformers.utils.chat_template_utils")

CTX = {
    "messages": [
        {"role": "system", "content": "  Be brief.  "},
        {"role": "user", "content": "Hi <there> & 'you'"},
        {"role": "assistant", "content": "Hello!", "tool_calls": [
            {"function": {"name": "f", "arguments": {"b": 2, "a": [1, 2.5, None, True]}}}]},
        {"role": "user", "content": [{"type": "text", "text": "part"}]},
    ],
    "d": {"b": 1, "a": 2, "C": 3},
    "xs": [3, 1, 2],
    "names": ["bob", "Alice", "carol", "alice"],
    "s": "Hello, World",
    "u": "héllo wörld 日本",
    "f": 2.5,
    "n": None,
    "t": True,
    "big": 12345678901234,
    "tools": None,
}

SNIPPETS = [
    # whitespace control, trim_blocks, lstrip_blocks, comments
    "a\n  {% if true %}\n  b\n  {% endif %}\nc",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "a\n  {%+ if true %}x{% endif %}\n",
    "x {# comment #}\n  {# c2 #}\ny\n",
    "{{- '  a  ' -}}\n\n{{ 'b' }}\n",
    "  {{ 'v' }}\n  {% set x = 1 %}\n{{ x }}\n\n",
    "line1\r\nline2\r\n{% if true %}\r\nx\r\n{% endif %}\r\n",
    "{% for m in messages %}\n  {{ m.role }}\n{% endfor %}\n",
    "{%- for m in messages -%}\n{{ m.role }},\n{%- endfor %}",
    # printing Python values
    "{{ n }} {{ t }} {{ f }} {{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1/3 }} {{ 2e-7 }} {{ big }}",
    "{{ xs }} {{ d }} {{ (1, 'a') }} {{ (1,) }} {{ [n, t, 'it''s'] }} {{ messages[3].content }}",
    "{{ \"a'b\" }} {{ ['a\"b', \"a'b\", 'a\\nb', 'tab\\t'] }} {{ {'k': [1, {'z': none}]} }}",
    "{{ undefined_var }}|{{ d.missing }}|{{ xs[10] }}|{{ n.attr }}",
    # arithmetic
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
    "{{ 1 + 2 * 3 - 4 / 2 }} {{ t + 1 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ xs + [9] }} {{ -f }} {{ +3 }}",
    "{{ 1 ~ 2 ~ 'x' ~ n ~ t }} {{ 'a' + 'b' }} {{ 10 / 4 }} {{ 3 == 3.0 }} {{ t == 1 }}",
    "{{ 1 / 0 }}",
    "{{ 'a' + 1 }}",
    "{{ 'a' < 1 }}",
    "{{ undefined_var + 1 }}",
    # comparisons, logic, in
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'b' in 'abc' }} {{ 2 in xs }} {{ 'a' in d }} {{ 'z' not in d }}",
    "{{ n or 'dflt' }} {{ 0 and 1 }} {{ 'x' and 'y' }} {{ not n }} {{ [] or {} }}",
    "{{ 'y' if t else 'n' }}|{{ 'y' if n }}|{{ 'a' if n else 'b' if t else 'c' }}",
    "{{ xs == [3, 1, 2] }} {{ (1, 2) == [1, 2] }} {{ d == {'a': 2, 'b': 1, 'C': 3} }}",
    # tests
    "{{ n is none }} {{ t is boolean }} {{ 1 is number }} {{ t is number }} {{ 1 is integer }} {{ t is integer }} {{ f is float }}",
    "{{ 's' is string }} {{ d is mapping }} {{ xs is mapping }} {{ xs is iterable }} {{ 's' is iterable }} {{ nope is iterable }} {{ xs is sequence }}",
    "{{ nope is defined }} {{ nope is undefined }} {{ d.a is defined }} {{ d.zz is defined }} {{ n is defined }}",
    "{{ 4 is divisibleby 2 }} {{ 3 is odd }} {{ 3 is even }} {{ 'a' is eq 'a' }} {{ 1 is ne 2 }} {{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 1 is lt 2 }} {{ 1 is le 0 }}",
    "{{ 2 is in xs }} {{ 'x' is equalto 'x' }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ t is true }} {{ t is false }} {{ n is sameas none }}",
    "{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }} {{ range is callable }} {{ 1 is not none }}",
    # filters
    "{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ 'hello wORLD-foo_bar'|title }}|{{ 'hELLO'|capitalize }}",
    "{{ xs|length }} {{ 'héllo'|length }} {{ d|count }} {{ nope|length }} {{ xs|first }} {{ xs|last }} {{ 'abc'|first }} {{ d|first }}",
    "{{ xs|join(', ') }} {{ names|join }} {{ messages|map(attribute='role')|join('/') }} {{ xs|map('string')|join('-') }}",
    "{{ nope|default('dflt') }} {{ ''|default('e', true) }} {{ ''|default('e') }} {{ n|default('x') }} {{ n|d('x', boolean=true) }}",
    "{{ xs|sort }} {{ xs|sort(reverse=true) }} {{ names|sort }} {{ names|sort(case_sensitive=true) }} {{ names|unique|list }}",
    "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }}",
    "{{ xs|select('odd')|list }} {{ xs|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ messages|selectattr('tool_calls')|list|length }}",
    "{{ messages|selectattr('tool_calls', 'defined')|map(attribute='role')|list }}",
    # map/select/reject/unique yield generators: no JSON, no len() (templates hit this with tojson)
    "{{ messages|map(attribute='role')|tojson }}",
    "{{ [xs|select('odd')]|tojson }}",
    "{{ xs|reject('odd')|length }}",
    "{{ xs|unique|tojson }}",
    "{{ n|map('string')|tojson }}",
    "{{ xs|map('string')|list|tojson }} {{ xs|select('odd')|list|length }} {{ xs|unique|join }}",
    "{{ d|dictsort }} {{ d|dictsort(true) }} {{ d|dictsort(by='value', reverse=true) }} {{ d|items|list }} {{ d.items()|list }}",
    "{{ xs|reverse|list }} {{ 'abc'|reverse }} {{ xs|list }} {{ 'ab'|list }} {{ d|list }} {{ xs|sum }} {{ xs|max }} {{ names|min }}",
    "{{ '42'|int }} {{ ' 7 '|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ '3.9'|int }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ '2.5'|float }} {{ 'a'|float }} {{ 3|float }}",
    "{{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ -3|abs }} {{ -2.5|abs }} {{ 5|round }}",
    "{{ s|replace('l', 'L') }} {{ s|replace('l', 'L', 1) }} {{ 'a b  c'|wordcount }} {{ 42|string }} {{ xs|string }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x\\ny'|indent('> ') }}",
    "{{ '<a>'|e }} {{ '<a>'|escape|escape }} {{ '<b>'|safe }} {{ ('<b>'|safe + '<i>') }} {{ ('<i>' + '<b>'|safe) }} {{ '<b>'|safe ~ '<i>' }}",
    "{{ ('x'|safe + '&')|length }} {{ ('a'|safe + '<')|upper }} {{ '<p>'|safe|trim + '<' }}",
    # tojson
    "{{ d|tojson }} {{ xs|tojson }} {{ 'é \"q\" \\n'|tojson }} {{ n|tojson }} {{ t|tojson }} {{ f|tojson }} {{ 1e20|tojson }}",
    "{{ messages[2].tool_calls[0].function.arguments|tojson }} {{ messages[2]|tojson(indent=2) }}",
    "{{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }} {{ 'é'|tojson(ensure_ascii=true) }} {{ '😀'|tojson(ensure_ascii=true) }} {{ {}|tojson(indent=2) }}",
    "{{ {'a': [], 'b': {}}|tojson(indent=4) }}",
    "{{ nope|tojson }}",
    "{{ (1, 2)|tojson }} {{ '<script>'|tojson }} {{ '\\u2028'|tojson }}",
    # string methods
    "{{ s.split(', ') }} {{ 'a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b  '.split(none, 1) }}",
    "{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ 'abcba'.lstrip('ab') }}",
    "{{ s.startswith('Hell') }} {{ s.endswith(('x', 'ld')) }} {{ s.upper() }} {{ s.lower() }} {{ 'ab cd'.title() }} {{ 'aBC'.capitalize() }}",
    "{{ s.replace('o', '0') }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ s.count('l') }} {{ '-'.join(['a', 'b']) }} {{ u.find('w') }}",
    "{{ 'a\\nb\\r\\nc'.splitlines() }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'Ab'.islower() }}",
    "{{ s.index('z') }}",
    "{{ s.format(1) }} {{ '{}-{}'.format(1, 'a') }} {{ '{1}{0}{x}'.format('a', 'b', x=n) }} {{ '{{}}{!r}'.format('q') }}",
    # dict / list methods, sandbox
    "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d.keys()|list }} {{ d.values()|list }} {{ xs.index(1) }} {{ xs.count(3) }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
    "{{ xs.append(4) }}",
    "{{ d.pop('a') }}",
    "{{ d.update({}) }}",
    "{{ xs.pop }}|{{ d.items is callable }}",
    "{{ s.__class__ }}",
    # indexing and slicing
    "{{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ s[7:] }} {{ s[-5:] }} {{ s[::-1] }} {{ u[1:4] }} {{ u[-2:] }}",
    "{{ xs[5:] }} {{ xs[-10:1] }} {{ 'abcdef'[4:1:-1] }} {{ 'abcdef'[::-2] }} {{ d['a'] }} {{ messages[0]['role'] }} {{ xs.0 }}",
    "{{ xs[::0] }}",
    "{{ nope[0] }}",
    "{{ nope.attr }}",
    # loops
    "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
    "{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}",
    "{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "{% for x in xs if x > 1 %}{{ x }}{{ loop.index }}{{ loop.length }}{% else %}none{% endfor %}",
    "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
    "{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %} {% for c in 'ab' %}{{ c }}{% endfor %} {% for k in d %}{{ k }}{% endfor %}",
    "{% set x = 0 %}{% for i in xs %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}",
    "{% for i in xs %}{% set y = i %}{% endfor %}{{ y }}",
    "{% for i in range(3) %}{% for j in range(i) %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}",
    "{{ range(5)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}",
    "{% for x in n %}{% endfor %}",
    "{{ range(1000000)|length }}",
    # set, namespace, with, macros, call, filter blocks
    "{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t2 = 1, 2 %}{{ t2 }}",
    "{% set ns = namespace(c=0, items=[]) %}{% for x in xs %}{% set ns.c = ns.c + x %}{% set ns.items = ns.items + [x] %}{% endfor %}{{ ns.c }} {{ ns.items }}",
    "{% set ns = namespace(d) %}{{ ns.a }}{{ ns.zz }}{% set ns.q = 5 %}{{ ns.q }}",
    "{% set x = 1 %}{% set x.y = 2 %}",
    "{% set block_var %}\n  inner {{ xs|length }}\n{% endset %}[{{ block_var }}]",
    "{% set bv | upper %}abc{% endset %}{{ bv }}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}",
    "{% macro m(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m() }}",
    "{% macro m(a) %}{{ a }}{{ outer }}{% endmacro %}{% set outer = 'O' %}{{ m('x') }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=2) }}",
    "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('p') %}body {{ xs|length }}{% endcall %}",
    "{% macro row(x) %}{{ caller(x * 2) }}{% endmacro %}{% call(v) row(21) %}v={{ v }}{% endcall %}",
    "{% macro rec(n) %}{{ n }}{% if n > 0 %}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{% macro rec(n) %}{{ rec(n + 1) }}{% endmacro %}{{ rec(0) }}",
    "{% filter upper %}abc {{ s }}{% endfilter %}|{% filter trim %}  x  {% endfilter %}",
    "{% generation %}gen{% endgeneration %}",
    # errors and globals
    "{{ raise_exception('bad input') }}",
    "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}",
    "{{ strftime_now('%Y') | length }}",
    "{{ dict(a=1, b=2) }} {{ namespace(a=1).a }} {% set j = joiner('|') %}{{ j() }}a{{ j() }}b",
    "{% if x %}",
    "{% for %}",
    "{{ 'unterminated }}",
    "{% endfor %}",
    "{{ xs|nosuchfilter }}",
    "{% if false %}{{ xs|nosuchfilter }}{% endif %}ok",
    "{% if true %}{{ xs|nosuchfilter }}{% endif %}ok",
    "{% for x in xs %}{{ x|nosuchfilter }}{% endfor %}",
    "{{ xs is nosuchtest }}",
    "{% include 'x.jinja' %}",
    "{{ 'a' 'b' }} {{ \"\\x41\\u00e9\\t|\" }} {{ '\\'' }}",
    "{{ messages[1].content|e }} {{ messages[1].content }}",
    "{% set content = messages[3].content %}{% if content is string %}S{% else %}{% for c in content %}{{ c.text }}{% endfor %}{% endif %}",
    "{{ messages[2].tool_calls[0].function.arguments.items()|list }}",
    "{% for k, v in messages[2].tool_calls[0].function.arguments|items %}{{ k }}:{{ v|tojson }};{% endfor %}",
    "{{ tools is none }} {{ tools is defined }} {{ tools|length if tools else 0 }}",
    # more edge semantics
    "{{ {1: 'a', 2.5: none, none: t} }} {{ {1: 'a', t: 2}|tojson }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ nope|items|list }}",
    "{{ 1e300 * 1e10 }} {{ -1e300 * 1e10 }} {{ 0.0 * -1 }} {{ 123456789.123456789 }} {{ 1.5e-10 }} {{ 100000000000000000.0 }}",
    "{{ '%s' % 1 }} {{ '%s-%r-%d%%' % ('a', 'b', 3.7) }} {{ 'x%sy' % xs }}",
    "{{ '%s %s' % (1,) }}",
    "{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor %} {{ 'abc'|list|join(',') }} {{ n|string }} {{ [1, 'a', n]|join('|') }}",
    "{{ loop.index }}|{{ range(3)|map('string')|list }}|{{ xs|map('int')|sum }}|{{ names|map('upper')|list }}",
    "{{ ('<b>'|safe)|length }} {{ '<b>'|safe|string + '<' }} {{ ['<'|safe, '<']|join }} {{ '<'|safe ~ '<' }}",
    "{% set x %}{% for m in messages %}{{ m.role }} {% endfor %}{% endset %}{{ x|trim }}|{{ x|wordcount }}",
    "{% macro m() %}{{ caller is defined }}{% endmacro %}{{ m() }}{% call m() %}{% endcall %}",
    "{% for x in xs %}{% for y in xs %}{% if y == 1 %}{% break %}{% endif %}{{ x }}{{ y }}{% endfor %}{% endfor %}",
    "{{ messages|selectattr('content', 'string')|list|length }} {{ messages|map(attribute='content')|select('string')|list|length }}",
    "{{ messages|map(attribute='missing', default='D')|list }} {{ messages|map(attribute='tool_calls')|list|length }}",
    "{{ xs|unique|list }} {{ [1, '1', 1.0, t]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ names|unique(case_sensitive=true)|list }}",
    "{{ 'Hello'[1] }} {{ 'Hello'[-1] }} {{ 'Hello'[10] }} {{ u[0] }} {{ u|length }} {{ u[::-1] }}",
    "{{ '  '.join(['a', 'b']) }} {{ ','.join(xs) }}",
    "{{ s.split() }} {{ ''.split(',') }} {{ 'a,,b'.split(',') }} {{ 'x'.rsplit(',', 5) }} {{ 'a b c'.rsplit(none, 1) }}",
    "{{ 3 is divisibleby(2) }} {{ (xs|first) is odd }} {{ d.a is integer }} {{ f is number }}",
    "{{ 'x' if messages else 'y' }}{{ 'yes' if messages[0].content.strip() == 'Be brief.' }}",
    "{%- for m in messages %}{%- if loop.first %}[{{ m.role }}]{% elif loop.last %}({{ m.role }}){% else %}.{% endif %}{%- endfor %}",
    "{{ messages[2].tool_calls[0].function.arguments.a[1:] }} {{ messages[2].tool_calls[0] | tojson(sort_keys=true) }}",
    "{{ d.b if d.b is defined else 'no' }} {{ xs|length > 2 and 'long' or 'short' }} {{ not xs|length }}",
]


# Refused by name (documented in ARCHITECTURE.md), where jinja2 would produce text.
REFUSED = {
    "{{ 10 ** 20 }}": "integer overflow",
    "{{ '%5s' % 'a' }}": "not supported",
    "{{ '{:>5}'.format(1) }}": "not supported",
}


def oracle(source):
    try:
        return ("text", transformers_utils._compile_jinja_template(source).render(**CTX))
    except Exception as e:
        return ("error", f"{type(e).__name__}: {e}")


def test_snippets_match_jinja2(memra_bin, tmp_path):
    batch = {"templates": {}, "cases": []}
    for i, src in enumerate(SNIPPETS):
        path = tmp_path / f"s{i}.jinja"
        path.write_text(src, encoding="utf-8")
        batch["templates"][f"s{i}"] = str(path)
        batch["cases"].append({"template": f"s{i}", "context": CTX})
    (tmp_path / "batch.json").write_text(json.dumps(batch), encoding="utf-8")
    proc = subprocess.run([str(memra_bin), "template", "--batch", str(tmp_path / "batch.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    failures = []
    for src, result in zip(SNIPPETS, got):
        kind, want = oracle(src)
        if kind == "error":
            if "error" not in result:
                failures.append(f"{src!r}: jinja2 raised {want!r}, memra gave {result['text']!r}")
            elif why := error_mismatch(want, result["error"]):
                failures.append(f"{src!r}: {why}")
        elif "error" in result:
            failures.append(f"{src!r}: memra raised {result['error']!r}, jinja2 gave {want!r}")
        elif result["text"] != want:
            failures.append(f"{src!r}:\n   memra  {result['text']!r}\n   jinja2 {want!r}")
    assert not failures, f"{len(failures)} of {len(SNIPPETS)} differ:\n" + "\n".join(failures)


def test_refusals_are_named(memra_bin, tmp_path):
    for i, (src, reason) in enumerate(REFUSED.items()):
        path = tmp_path / f"r{i}.jinja"
        path.write_text(src, encoding="utf-8")
        proc = subprocess.run([str(memra_bin), "template", "--template", str(path), "--context", "{}"],
                              capture_output=True, text=True)
        assert proc.returncode != 0 and reason in proc.stderr, (src, proc.stderr)


def test_template_error_names_line(memra_bin, tmp_path):
    path = tmp_path / "bad.jinja"
    path.write_text("line one\n{% if true %}\n{{ raise_exception('boom') }}\n{% endif %}\n")
    proc = subprocess.run([str(memra_bin), "template", "--template", str(path), "--context", "{}"],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "line 3" in proc.stderr and "boom" in proc.stderr
    path.write_text("ok\n\n{% for x in %}\n")
    proc = subprocess.run([str(memra_bin), "template", "--template", str(path), "--context", "{}"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "line 3" in proc.stderr
