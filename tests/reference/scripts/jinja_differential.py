"""Generated Jinja templates rendered by jinja2 as Transformers compiles chat templates
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols), for the engine's
differential test (tests/lib/tokenizers/jinja_differential_test.cpp): numbers (ints past 64 bits,
floats, every operator), attributes and methods of numbers, strings and lists, filters with their
arguments, tests, printf formats, loops (loop.*, changed, cycle), with blocks and joiner.

usage: jinja_differential.py OUT [COUNT] [SEED]
Writes OUT/cases.jsonl: a line per template, {"source": ..., "text": what jinja2 renders},
{"source": ..., "error": "ExceptionType: message"} where rendering (or compiling) raised, or
{"source": ..., "complex": true} where a ** made a complex number (which the engine refuses by
name). Templates whose constants jinja2 folds into an inf or a nan are left out: jinja2 then
emits the name `inf` and fails with a NameError (its bug).
COUNT templates (default 2500) from random.Random(SEED) (default 0); a larger count and another
seed make the fuzzing runs of docs/chat-templates.md (the test reads any such file through
TRAINER_JINJA_CASES).
"""
import json
import os
import random
import re
import sys

import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from transformers.utils.chat_template_utils import _compile_jinja_template


class ComplexResult(Exception):
    pass


class ComplexProbe(ImmutableSandboxedEnvironment):
    """Transformers' environment, but a ** that makes a complex number raises (the engine refuses
    complex numbers by name, as the issue allows); ** is intercepted, so never folded."""

    intercepted_binops = frozenset(["**"])

    def call_binop(self, context, operator, left, right):
        result = super().call_binop(context, operator, left, right)
        if isinstance(result, complex):
            raise ComplexResult()
        return result


PROBE = ComplexProbe(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

INTS = ["0", "1", "2", "3", "7", "-1", "-8", "10", "255", "1000", "2**63", "2**64", "10**20",
        "-(2**63)", "9223372036854775807", "18446744073709551616", "123456789012345678901234567890",
        "0x10", "0b101", "0o17", "1_000", "true", "false", "2**100", "-(10**25)", "3**40"]
FLOATS = ["0.5", "1.0", "-2.5", "1e20", "1e-5", "0.1", "3.14159", "1e16", "-0.0", "2.5e-3",
          "123456789.125", "1e308", "(1/3)", "(2/3)", "1e400", "-1e400"]
STRINGS = ["'abc'", "'Hello World'", "'  pad  '", "'a,b,,c'", "'x'", "''", "'ünï cödé'",
           "'The quick brown fox jumps over the lazy dog'", "'12'", "'-7'", "'3.5'", "'0x1f'",
           "'abc def ghi'", "'a\\tb\\nc'", "'%s'"]
LISTS = ["[1, 2, 3]", "[3, 1, 2]", "[]", "['b', 'a', 'c']", "[1, 'a', none]", "[[1, 2], [3]]",
         "[2**64, 1, -3]", "[1.5, 2, 0.5]", "(1, 2)", "[true, false, 1, 0]", "[1, 1, 2, 2, 3]"]
EXPONENTS = ["0", "1", "2", "3", "5", "64", "-1", "-2", "0.5", "(1/3)", "2.5", "-0.5", "true"]
DICTS = ["{'a': 1, 'b': 2}", "{'b': [1], 'a': none}", "{1: 'x', 2**64: 'y', 1.5: 'z'}", "{}"]
DICT_METHODS = [".get('a')", ".get('q', 7)", ".keys()|list", ".items()|list", ".values()|list",
                "['a']", "[2**64]", ".a", "|dictsort", "|items|list", "|length", "|tojson",
                "|tojson(indent=2)", "|list", "|first"]
BINARY = ["+", "-", "*", "/", "//", "%", "**"]
COMPARE = ["==", "!=", "<", ">", "<=", ">="]
INT_ATTRS = [".real", ".imag", ".numerator", ".denominator", ".bit_length()", ".bit_count()",
             ".conjugate()", ".as_integer_ratio()"]
FLOAT_ATTRS = [".real", ".imag", ".is_integer()", ".hex()", ".as_integer_ratio()", ".conjugate()"]
STR_METHODS = [".upper()", ".lower()", ".title()", ".capitalize()", ".swapcase()", ".strip()",
               ".lstrip()", ".rstrip('c')", ".split()", ".split(',')", ".split(' ', 1)",
               ".rsplit(' ', 1)", ".replace('a', 'X')", ".find('b')", ".rfind('a')", ".count('a')",
               ".startswith('a')", ".endswith('c')", ".center(9, '*')", ".ljust(6)", ".rjust(6)",
               ".zfill(6)", ".partition(' ')", ".rpartition(',')", ".isdigit()", ".isalpha()",
               ".isspace()", ".isupper()", ".islower()", ".splitlines()", ".removeprefix('a')",
               ".removesuffix('c')", "[1:]", "[::-1]", "[-2:]", "[0]", "[10]", "[2**64:]"]
LIST_METHODS = [".index(1)", ".count(1)", "[1:]", "[::2]", "[-1]", "[0]", "[5]", "[2**64]"]
FILTERS_ANY = ["string", "length", "tojson", "first", "last", "list", "reverse|list", "default(7)",
               "string|length", "lower", "upper", "trim", "title", "capitalize", "wordcount",
               "center(12)", "truncate(8)", "truncate(9, true)", "truncate(8, false, '..', 0)",
               "batch(2)|list", "batch(2, 0)|list", "slice(2)|list", "slice(3, 'z')|list",
               "int", "float", "abs", "round", "round(1)", "round(-1)", "round(2, 'floor')",
               "round(1, 'ceil')", "int(7)", "float(1.5)", "int(0, 16)", "sum", "max", "min",
               "sort|list", "unique|list", "join(',')", "join", "count", "e", "replace('a', 'b')",
               "indent(2)", "indent(2, true)", "format(1)", "map('string')|list",
               "select('odd')|list", "reject('none')|list", "attr('real')", "sort(reverse=true)",
               "tojson(indent=1)", "string|replace('1', '%')", "max(case_sensitive=true)"]
TESTS = ["odd", "even", "divisibleby 3", "divisibleby(2)", "integer", "float", "number", "string",
         "sequence", "iterable", "mapping", "defined", "none", "boolean", "true", "false",
         "callable", "sameas 1", "eq 1", "lt 3", "ge 0"]
FORMATS = ["'%d'", "'%5d'", "'%-5d|'", "'%05d'", "'%+d'", "'%x'", "'%X'", "'%#x'", "'%o'",
           "'%s'", "'%r'", "'%.2f'", "'%8.3f'", "'%e'", "'%g'", "'%i'", "'%c'"]


def pick(rng, items):
    return items[rng.randrange(len(items))]


def number(rng, depth=0):
    roll = rng.random()
    if depth > 2 or roll < 0.45:
        return pick(rng, INTS) if rng.random() < 0.65 else pick(rng, FLOATS)
    if roll < 0.8:
        op = pick(rng, BINARY)
        # A power's exponent stays small: 2**64 ** 10**20 would take Python's memory.
        right = pick(rng, EXPONENTS) if op == "**" else number(rng, depth + 1)
        return f"({number(rng, depth + 1)} {op} {right})"
    if roll < 0.9:
        return f"(-{number(rng, depth + 1)})"
    return f"({number(rng, depth + 1)} {pick(rng, COMPARE)} {number(rng, depth + 1)})"


def value(rng):
    roll = rng.random()
    if roll < 0.45:
        return number(rng)
    if roll < 0.75:
        return pick(rng, STRINGS)
    return pick(rng, LISTS)


def expression(rng):
    roll = rng.random()
    if roll < 0.25:
        return number(rng)
    if roll < 0.35:
        return f"({pick(rng, INTS)}){pick(rng, INT_ATTRS)}"
    if roll < 0.42:
        return f"({pick(rng, FLOATS)}){pick(rng, FLOAT_ATTRS)}"
    if roll < 0.55:
        return f"{pick(rng, STRINGS)}{pick(rng, STR_METHODS)}"
    if roll < 0.6:
        return f"{pick(rng, LISTS)}{pick(rng, LIST_METHODS)}"
    if roll < 0.75:
        return f"{value(rng)}|{pick(rng, FILTERS_ANY)}"
    if roll < 0.8:
        return f"{pick(rng, DICTS)}{pick(rng, DICT_METHODS)}"
    if roll < 0.88:
        return f"{value(rng)} is {pick(rng, TESTS)}"
    if roll < 0.95:
        return f"{pick(rng, FORMATS)} % {value(rng)}"
    return f"{value(rng)} ~ {value(rng)}"


def statement(rng):
    roll = rng.random()
    if roll < 0.7:
        return "{{ " + expression(rng) + " }}"
    if roll < 0.8:
        items = pick(rng, LISTS + ["range(4)", "'abc'", "[1, 1, 2, 1]"])
        body = pick(rng, ["{{ loop.index }}{{ loop.changed(x) }}", "{{ loop.cycle('a', 'b') }}",
                          "{{ loop }}", "{{ loop.revindex }}{{ loop.first }}{{ loop.last }}",
                          "{{ loop['index0'] }}{{ loop.length }}", "{{ loop.previtem }}|",
                          "{{ loop.changed(x % 2 if x is number else x) }}"])
        return "{% for x in " + items + " %}" + body + "{% endfor %}"
    if roll < 0.88:
        a, b = expression(rng), value(rng)
        return ("{% set a = 5 %}{% with a = " + a + ", b = a %}{{ a }}|{{ b }}|{{ " + b +
                " }}{% endwith %}{{ a }}")
    if roll < 0.94:
        return ("{% set j = joiner(" + pick(rng, ["", "'; '", "1"]) +
                ") %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}")
    return "{{ self }}|{{ self.__dict__ }}|{{ " + expression(rng) + " }}"


def render(source):
    """The case, or None where jinja2's constant folding turned an inf or a nan into a name
    (NameError: name 'inf' is not defined: a bug of jinja2's, not copied)."""
    try:
        PROBE.from_string(source).render()
    except ComplexResult:
        return {"source": source, "complex": True}
    except Exception:  # the same failure again below
        pass
    try:
        text = _compile_jinja_template(source).render()
        # A complex number printed (a ** the probe could not see, its constants folded first).
        if re.search(r"(\d|inf|nan)j\)?", text):
            return {"source": source, "complex": True}
        return {"source": source, "text": text}
    except NameError as e:
        if str(e) in ("name 'inf' is not defined", "name 'nan' is not defined"):
            return None
        return {"source": source, "error": f"{type(e).__name__}: {e}"[:300]}
    except Exception as e:  # every failure is an expected outcome: the test wants one there too
        return {"source": source, "error": f"{type(e).__name__}: {e}"[:300]}


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2500
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cases.jsonl"), "w") as f:
        written = 0
        while written < count:
            case = render("".join(statement(rng) for _ in range(rng.randint(1, 3))))
            if case:
                f.write(json.dumps(case, ensure_ascii=False) + "\n")
                written += 1


if __name__ == "__main__":
    main()
