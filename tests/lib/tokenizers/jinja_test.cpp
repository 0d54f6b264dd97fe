// The Jinja engine against what jinja2 3.1 renders under Transformers' settings (each expected
// string is jinja2's own output for the template beside it), its bounds (output size, call depth,
// time) as one error line naming the template, and its errors with the template's line.
#include <gtest/gtest.h>

#include "lib/tokenizers/jinja.h"

namespace trainer::tokenizers::jinja {
namespace {

std::string render(const std::string& source, std::vector<std::pair<std::string, Value>> vars = {},
                   Limits limits = {}) {
  return Template::parse(source, "t.jinja", limits).render(vars).text;
}

struct Case {
  const char* source;
  const char* expected;
};

class JinjaRenders : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaRenders, AsJinja2Does) {
  const Value d = Value::from_json(nlohmann::ordered_json::parse(R"({"items": 1, "k": [1, 2]})"));
  EXPECT_EQ(render(GetParam().source, {{"d", d}}), GetParam().expected) << GetParam().source;
}

// Each expected value is jinja2 3.1.6's rendering (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols), checked by hand in Python.
INSTANTIATE_TEST_SUITE_P(
    Language, JinjaRenders,
    ::testing::Values(
        Case{"{% for i in [1,2,3] %}[{{ x }}]{% set x = i %}{% endfor %}<{{ x }}>", "[][][]<>"},
        Case{"{% set x = 'out' %}{% for i in [1,2] %}[{{ x }}]{% set x = i %}{% endfor %}<{{ x }}>",
             "[out][out]<out>"},
        Case{"{% generation %}{% set y = 1 %}{% endgeneration %}[{{ y }}]", "[]"},
        Case{"{% if true %}{% set z = 2 %}{% endif %}{{ z }}", "2"},
        Case{"{{ 1.0 }} {{ 1e20 }} {{ 0.1+0.2 }} {{ 10/4 }} {{ 7//2 }} {{ -7 % 3 }} {{ 2**3**2 }} "
             "{{ [1,'a',none,true,1.5] }} {{ {'a':[1]} }} {{ (1,) }}",
             "1.0 1e+20 0.30000000000000004 2.5 3 2 64 [1, 'a', None, True, 1.5] {'a': [1]} (1,)"},
        Case{"{{ 'abc'[::-1] }}{{ [1,2,3][1:] }}{{ 'h\xc3\xa9llo'|length }}{{ 'h\xc3\xa9llo'[1] }}",
             "cba[2, 3]5\xc3\xa9"},
        Case{"{{ 'a' ~ none ~ 1 ~ undefinedvar }}", "aNone1"},
        Case{"{{ none|tojson }} {{ {'a': '\xc3\xa9\"\\n', 'b': [1, 2.5, true]}|tojson }} "
             "{{ {'a': 1}|tojson(indent=2) }}",
             "null {\"a\": \"\xc3\xa9\\\"\\n\", \"b\": [1, 2.5, true]} {\n  \"a\": 1\n}"},
        Case{"{% macro m(a, b=2) %}{{ a }}-{{ b }}-{{ g }}{% endmacro %}{% set g = 5 %}{{ m(1) }}"
             "{{ m(1, b=3) }}",
             "1-2-51-3-5"},
        Case{"  {% if true %}\n  x\n  {% endif %}\n  y\n", "  x\n  y"},
        Case{"a  {%- if true -%}  b  {%- endif %}\nc {# comment #}\n d", "abc  d"},
        Case{"{{ x is sequence }}{{ x is iterable }}{{ x is defined }}{{ x|length }}",
             "TrueTrueFalse0"},
        Case{"{% for k, v in {'b':1,'a':2}|dictsort %}{{k}}{{v}}{% endfor %}{{ loop }}", "a2b1"},
        Case{"{{ 'a,b,,c'.split(',') }}{{ '  a b  '.split() }}{{ 'x'.startswith(('a','x')) }}",
             "['a', 'b', '', 'c']['a', 'b']True"},
        Case{"{{ 'ab' * 3 }}{{ [1] * 2 }}{{ 3 * 'x' }}", "ababab[1, 1]xxx"},
        Case{"{{ true == 1 }}{{ 1 == 1.0 }}{{ 'a' in 'cat' }}{{ 'k' in {'k':1} }}",
             "TrueTrueTrueTrue"},
        Case{"{{ 1e-5 }} {{ 1e16 }} {{ 123456789012345678.0 }} {{ 0.0001 }} {{ -0.0 }}",
             "1e-05 1e+16 1.2345678901234568e+17 0.0001 -0.0"},
        Case{"{{ [\"it's\", 'say \"hi\"', 'tab\\t', '\\x00', '\\u200b'] }}",
             "[\"it's\", 'say \"hi\"', 'tab\\t', '\\x00', '\\u200b']"},
        Case{"{% for m in [1,2,3] %}{{ loop.index }}{{ loop.previtem }}{{ loop.nextitem }}"
             "{{ loop.length }}{% if loop.last %}L{% endif %}{% endfor %}",
             "1232133323L"},
        Case{"{% set ns = namespace(a=1) %}{% for i in [1,2] %}{% set ns.a = ns.a + i %}"
             "{% endfor %}{{ ns.a }}{{ ns }}",
             "4<Namespace {'a': 4}>"},
        Case{"{% for i in [1,2,3] if i > 1 %}{{ loop.index }}{{ i }}{% else %}E{% endfor %}",
             "1223"},
        Case{"{{ 'x' if false }}|{{ none is none }}|{{ 1 is number }}{{ true is number }}",
             "|True|TrueTrue"},
        Case{"{{ d.k|map('string')|join(',') }} {{ d['k'][-1] }} {{ d.get('nope', 7) }}",
             "1,2 2 7"},
        Case{"{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}"
             "{% break %}{% endif %}{{ i }}{% endfor %}",
             "02"},
        Case{"{% set c %}  block {{ 1 }} {% endset %}[{{ c|trim }}]", "[block 1]"},
        Case{"{{ 'Hello World'|upper }} {{ 'x y'|title }} {{ '%s-%d' % ('a', 3) }}",
             "HELLO WORLD X Y a-3"},
        // The corners a hostile sweep against jinja2 found, each jinja2's output.
        Case{R"({{ '%5s|'|format('a') }}{{ '%-4d|%04d|%+.2f'|format(3, 7, 2.5) }})",
             "    a|3   |0007|+2.50"},
        Case{"{{ 'a\nb'|indent(7)|length }}", "10"},
        Case{R"({{ 'abcabc'.count('a', 1) }}{{ 'abcabc'.count('a',0,3) }}{{ 'abc'.count('',1) }})"
             R"({{ 'abcabc'.find('c',0,2) }}{{ 'abc'.find('',5) }}{{ 'abcabc'.rfind('a',0,3) }})"
             R"({{ 'abcabc'.index('c',3) }}{{ 'hello'.endswith('l',0,4) }})",
             "113-1-105True"},
        Case{R"({{ 'ff'|int(base=16) }} {{ '077'|int(base=8) }} {{ '0b11'|int(base=2) }} )"
             R"({{ '1_0.5'|float }} {{ ' 42 '|int }})",
             "255 63 3 10.5 42"},
        Case{R"({{ 2.675|round(2) }} {{ 2.55|round(1) }} {{ 1234|round(-2) }} {{ 5|round }} )"
             R"({{ 2.5|round }} {{ 1.5|round(0, 'floor') }})",
             "2.67 2.5 1200 5 2.0 1.0"},
        Case{"{{ 'bar_baz'.title() }} {{ \"they're\".title() }} {{ 'ab1cd'.title() }} "
             "{{ '\xc3\x9f'.title() }} {{ 'x y'|title }}",
             "Bar_Baz They'Re Ab1Cd Ss X Y"},
        Case{"{{ 'a\nb\r\nc'.splitlines(True) }}{{ 'a\nb'.splitlines() }}",
             "['a\\n', 'b\\n', 'c']['a', 'b']"},
        Case{"{% raw %}x\n  {% endraw %}|", "x\n|"},
        Case{R"({{ {'name':'b'}|attr('name') }}|{{ 1 is sameas 1 }}{{ 257 is sameas 257 }})"
             R"({{ none is sameas none }})",
             "|TrueFalseTrue"},
        Case{R"({{ 'ab'.center(7, '*') }}{{ 'ab'.ljust(4) }}|{{ 'ab'.rjust(4, '-') }})"
             R"({{ '-42'.zfill(6) }}{{ 'a=b=c'.partition('=') }}{{ 'a=b=c'.rpartition('=') }})"
             R"({{ 'xyz'.removeprefix('x') }}{{ 'xyz'.removesuffix('z') }}{{ 'aBc'.swapcase() }})",
             "***ab**ab  |--ab-00042('a', '=', 'b=c')('a=b', '=', 'c')yzxyAbC"},
        Case{R"({{ [3, 1.0, 1, 'a', 'A', true]|unique|list }})", "[3, 1.0, 'a']"},
        Case{R"({{ 'x'|split(',') if false else 'x' }}{% if false %}{{ 1|nofilter }}{% endif %})",
             "x"}));

TEST(Jinja, GenerationSpansCountCharactersOfTheTopLevelOutput) {
  const Rendered r =
      Template::parse("\xc3\xa9{% generation %}ab\xc3\xa9{% endgeneration %}!", "t").render({});
  EXPECT_EQ(r.text,
            "\xc3\xa9"
            "ab\xc3\xa9!");
  ASSERT_EQ(r.generation_chars.size(), 1u);
  EXPECT_EQ(r.generation_chars[0], (std::pair<size_t, size_t>{1, 4}));
  EXPECT_EQ(r.generation_bytes[0], (std::pair<size_t, size_t>{2, 6}));
}

void expect_error(const std::string& source, TemplateError::Kind kind, const std::string& part,
                  Limits limits = {}) {
  try {
    render(source, {}, limits);
    ADD_FAILURE() << "no error for " << source;
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind, kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(Jinja, BoundsAreOneLineNamingTheTemplate) {
  Limits small;
  small.max_output_bytes = 1 << 20;
  small.max_seconds = 0.5;
  expect_error("{{ 'a' * 10**12 }}", TemplateError::Kind::kLimit,
               "chat template t.jinja line 1: a string of 1 byte repeated 1,000,000,000,000 times "
               "passes 1,048,576 bytes",
               small);
  // What grew is named, not the output (9 characters here).
  expect_error("{{ ([1] * 100000000)|length }}", TemplateError::Kind::kLimit,
               "chat template t.jinja line 1: a list of 1 item repeated 100,000,000 times passes "
               "1,048,576 bytes (a string or list that large is refused)",
               small);
  expect_error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", TemplateError::Kind::kLimit,
               "macro 'm' nests deeper than 100 calls");
  expect_error("{% for i in range(10**9) %}{% endfor %}", TemplateError::Kind::kRuntime,
               "Range too big");
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
               TemplateError::Kind::kLimit, "rendering takes longer than 0.5 s", small);
  expect_error(
      "{{ range(100000)|map('string')|list|sort|unique|list|length }}{% for i in "
      "range(100000) %}{{ range(100000)|unique|list|length }}{% endfor %}",
      TemplateError::Kind::kLimit, "rendering takes longer than 0.5 s", small);
  expect_error("{{ ('x' * 1000000).split('x')|length }}", TemplateError::Kind::kLimit,
               "the output passes 1,048,576 bytes", small);
  expect_error("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}",
               TemplateError::Kind::kSyntax, "nests more than 200 levels");
}

TEST(Jinja, ErrorsNameTheLineAndWhat) {
  expect_error("a\n{% if %}", TemplateError::Kind::kSyntax, "line 2: unexpected");
  expect_error("a\nb\n{{ x.y }}", TemplateError::Kind::kRuntime, "line 3: 'x' is undefined");
  expect_error("{{ [1].append(2) }}", TemplateError::Kind::kRuntime,
               "access to attribute 'append' of 'list' object is unsafe.");
  expect_error("{{ 1 + 'a' }}", TemplateError::Kind::kRuntime,
               "unsupported operand type(s) for +: 'int' and 'str'");
  expect_error("{% include 'x.jinja' %}", TemplateError::Kind::kSyntax,
               "'include' is not available in chat templates");
  expect_error("{{ x|nofilter }}", TemplateError::Kind::kSyntax, "no filter named 'nofilter'");
  expect_error("{% set ns = namespace() %}{% set ns._x = 1 %}", TemplateError::Kind::kRuntime,
               "underscore-prefixed");
  expect_error("{% for %}", TemplateError::Kind::kSyntax, "line 1");
  expect_error(std::string("{{ '\xff' }}"), TemplateError::Kind::kSyntax, "is not UTF-8");
  expect_error("{% break %}", TemplateError::Kind::kSyntax, "'break' outside loop");
  expect_error("{% for i in [1] %}{% generation %}{% continue %}{% endgeneration %}{% endfor %}",
               TemplateError::Kind::kSyntax, "'continue' outside loop");
  expect_error("{% macro f(a) %}{% endmacro %}{{ f(1, a=2) }}", TemplateError::Kind::kRuntime,
               "got multiple values for argument 'a'");
  expect_error("{{ '%(a)s %(b)s'|format(a=1) }}", TemplateError::Kind::kRuntime, "KeyError: 'b'");
  expect_error("{{ [1] in {'a': 1} }}", TemplateError::Kind::kRuntime, "unhashable type: 'list'");
  expect_error("{{ '%\n' % 1 }}", TemplateError::Kind::kRuntime,
               "unsupported format character '\\n'");
}

}  // namespace
}  // namespace trainer::tokenizers::jinja
