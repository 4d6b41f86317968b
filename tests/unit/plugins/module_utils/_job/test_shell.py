# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shell reader under the train.sh parser (_job/shell.py).

LEX_TABLE and SPLIT_TABLE were recorded from the lexer as it was before it became
table-driven (commit 39fe7ac), quirks included (``${N=x}`` does not assign, ``${A:-x;y}``
splits at the ``;``, an empty word is dropped): the rewrite keeps every result. The
hypothesis properties check that words quoted the way this collection quotes them
(shlex.quote, and bash's own single, double and backslash quoting) read back unchanged.
"""
from __future__ import annotations

import copy
import re
import shlex
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import shell as _job_shell

hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is not installed; `pip install -r requirements-test.txt` (hypothesis==6.170.17)")
st = hypothesis.strategies

# (statement, variables, tainted, [(text, assign, unresolved)], variables afterwards)
LEX_TABLE = [
    ('echo hello world', {}, None,
     [('echo', None, []), ('hello', None, []), ('world', None, [])],
     {}),
    ('echo \'single quoted\' "double quoted"', {}, None,
     [('echo', None, []), ('single quoted', None, []), ('double quoted', None, [])],
     {}),
    ('echo \'it\'"\'"\'s\'', {}, None,
     [('echo', None, []), ("it's", None, [])],
     {}),
    ('echo "say \\"hi\\"" \'a"b\'', {}, None,
     [('echo', None, []), ('say "hi"', None, []), ('a"b', None, [])],
     {}),
    ('echo "a\'b" \'c\\d\'', {}, None,
     [('echo', None, []), ("a'b", None, []), ('c\\d', None, [])],
     {}),
    ('echo a\\ b c\\\\d \\$HOME', {}, None,
     [('echo', None, []), ('a b', None, []), ('c\\d', None, []), ('$HOME', None, [])],
     {}),
    ('echo "\\$X \\`y\\` \\\\ \\n"', {}, None,
     [('echo', None, []), ('$X `y` \\ \\n', None, [])],
     {}),
    ('echo $A ${A} "$A" "${A}"', {'A': 'x y'}, None,
     [('echo', None, []), ('x', None, []), ('y', None, []), ('x', None, []), ('y', None, []), ('x y', None, []), ('x y', None, [])],
     {'A': 'x y'}),
    ('echo $UNKNOWN ${UNKNOWN} "$UNKNOWN"', {}, None,
     [('echo', None, []), ('$UNKNOWN', None, ['$UNKNOWN']), ('${UNKNOWN}', None, ['${UNKNOWN}']), ('$UNKNOWN', None, ['$UNKNOWN'])],
     {}),
    ('echo ${A:-default} ${B:-default} ${B:-$A} ${B:-"two words"}', {'A': '1'}, None,
     [('echo', None, []), ('1', None, []), ('default', None, []), ('1', None, []), ('"two', None, []), ('words"', None, [])],
     {'A': '1'}),
    ('echo ${E:-d} ${E-d} ${U-d} ${E:+alt} ${E+alt} ${A:+alt} ${U+alt}', {'A': 'v', 'E': ''}, None,
     [('echo', None, []), ('d', None, []), ('d', None, []), ('alt', None, []), ('alt', None, [])],
     {'A': 'v', 'E': ''}),
    ('echo ${N:=assigned} $N', {}, None,
     [('echo', None, []), ('assigned', None, []), ('assigned', None, [])],
     {'N': 'assigned'}),
    ('echo ${N=assigned} ${N?err} ${N:?err}', {}, None,
     [('echo', None, []), ('assigned', None, []), ('${N?err}', None, ['${N?err}']), ('${N:?err}', None, ['${N:?err}'])],
     {}),
    ('echo ${@} ${*} $@ $* $# $? $$ $! $1 ${10}', {'1': 'one'}, None,
     [
         ('echo', None, []),
         ('', None, ['$@']),
         ('', None, ['$*']),
         ('', None, ['$@']),
         ('', None, ['$*']),
         ('$#', None, ['$#']),
         ('$?', None, ['$?']),
         ('$$', None, ['$$']),
         ('$!', None, ['$!']),
         ('one', None, []),
         ('${10}', None, ['${10}'])],
     {'1': 'one'}),
    ('echo ${A/x/y} ${#A} ${A', {'A': 'axa'}, None,
     [('echo', None, []), ('${A/x/y}', None, ['${A/x/y}']), ('${#A}', None, ['${#A}']), ('${A', None, [])],
     {'A': 'axa'}),
    ('echo $((A*B)) $((A + 2)) $(( (A+1) * (B-1) / 2 )) $((7 % 3)) $((-A))', {'A': '6', 'B': '7'}, None,
     [('echo', None, []), ('42', None, []), ('8', None, []), ('21', None, []), ('1', None, []), ('-6', None, [])],
     {'A': '6', 'B': '7'}),
    ('echo $((UNSET + 1)) $((1/0)) $((2**3)) $((x y)) $(($(nproc) * 2)) $((`nproc`+1))', {}, None,
     [
         ('echo', None, []),
         ('1', None, []),
         ('$((1/0))', None, ['$((1/0))']),
         ('$((2**3))', None, ['$((2**3))']),
         ('$((xy))', None, ['$((x y))']),
         ('$(($(nproc)*2))', None, ['$(($(nproc) * 2))']),
         ('$((`nproc`+1))', None, ['$((`nproc`+1))'])],
     {}),
    ('echo $((1 + 2)', {}, None,
     [('echo', None, []), ('$((1 + 2)', None, ['$((1 + 2)'])],
     {}),
    ('echo $(hostname) "$(date +%s)" $(echo $(nested) x) $(unterminated', {}, None,
     [
         ('echo', None, []),
         ('$(hostname)', None, ['$(hostname)']),
         ('$(date+%s)', None, ['$(date +%s)']),
         ('$(echo$(nested)x)', None, ['$(echo $(nested) x)']),
         ('$(unterminated', None, ['$(unterminated'])],
     {}),
    ('echo `hostname -s` "`id -u`" `unterminated', {}, None,
     [('echo', None, []), ('`hostname-s`', None, ['`hostname -s`']), ('`id-u`', None, ['`id -u`']), ('`unterminated', None, ['`unterminated'])],
     {}),
    ('echo a$A"b c"\'d\'$((1+1))e', {'A': 'X'}, None,
     [('echo', None, []), ('aXb cd2e', None, [])],
     {'A': 'X'}),
    ('echo \'\' "" x\'\'y ""\'\'', {}, None,
     [('echo', None, []), ('xy', None, [])],
     {}),
    ('echo $EMPTY "$EMPTY" \'\'$EMPTY', {'EMPTY': ''}, None,
     [('echo', None, [])],
     {'EMPTY': ''}),
    ('echo $SPLIT end', {'SPLIT': '  lead  mid\ttab  '}, None,
     [('echo', None, []), ('lead', None, []), ('mid', None, []), ('tab', None, []), ('end', None, [])],
     {'SPLIT': '  lead  mid\ttab  '}),
    ('echo pre$SPLIT"post"', {'SPLIT': 'a b'}, None,
     [('echo', None, []), ('prea', None, []), ('bpost', None, [])],
     {'SPLIT': 'a b'}),
    ('X=1 Y="two words" Z=$SPLIT W+=more cmd arg', {'SPLIT': 'a b'}, None,
     [
         ('1', ('X', '1'), []),
         ('two words', ('Y', 'two words'), []),
         ('a b', ('Z', 'a b'), []),
         ('more', ('W', 'more'), []),
         ('cmd', None, []),
         ('arg', None, [])],
     {'SPLIT': 'a b'}),
    ('EMPTY= next', {}, None,
     [('', ('EMPTY', ''), []), ('next', None, [])],
     {}),
    ('X=$(hostname) Y=${U:-$(date)}', {}, None,
     [('$(hostname)', ('X', '$(hostname)'), ['$(hostname)']), ('$(date)', ('Y', '$(date)'), [])],
     {}),
    ('export PATH=/usr/bin:$PATH', {'PATH': '/bin'}, None,
     [('export', None, []), ('/usr/bin:/bin', ('PATH', '/usr/bin:/bin'), [])],
     {'PATH': '/bin'}),
    ('cmd > out.log 2>&1', {}, None,
     [('cmd', None, [])],
     {}),
    ('cmd >> out.log 2> err.log < in.txt &> all.log', {}, None,
     [('cmd', None, [])],
     {}),
    ('cmd 1>&2 >&- <&0 >file2 arg', {}, None,
     [('cmd', None, []), ('arg', None, [])],
     {}),
    ('cmd a>b 2>&1x', {}, None,
     [('cmd', None, []), ('a>b', None, []), ('x', None, [])],
     {}),
    ('deepspeed --num_gpus $GPUS pretrain_gpt.py --tp $TP', {'GPUS': '8', 'TP': '2'}, {'TP': ['$(x)']},
     [
         ('deepspeed', None, []),
         ('--num_gpus', None, []),
         ('8', None, []),
         ('pretrain_gpt.py', None, []),
         ('--tp', None, []),
         ('2', None, ['$(x)'])],
     {'GPUS': '8', 'TP': '2'}),
    ('echo $T ${T} "$T" ${T:-x}', {'T': 'v'}, {'T': ['$(cmd)', '$U']},
     [('echo', None, []), ('v', None, ['$(cmd)', '$U']), ('v', None, ['$(cmd)', '$U']), ('v', None, ['$(cmd)', '$U']), ('v', None, [])],
     {'T': 'v'}),
    ('echo $ lone$ $- ${}', {}, None,
     [('echo', None, []), ('$', None, []), ('lone$', None, []), ('$-', None, []), ('${}', None, ['${}'])],
     {}),
    ('echo "unterminated', {}, None,
     [('echo', None, []), ('unterminated', None, [])],
     {}),
    ("echo 'unterminated", {}, None,
     [('echo', None, []), ('unterminated', None, [])],
     {}),
    ('echo trailing\\', {}, None,
     [('echo', None, []), ('trailing', None, [])],
     {}),
    ('echo "tab\tin" \'nl\nin\'', {}, None,
     [('echo', None, []), ('tab\tin', None, []), ('nl\nin', None, [])],
     {}),
    ('echo $A_B$C ${A_B}C $1x $12', {'1': 'p', 'A_B': 'ab', 'C': 'c'}, None,
     [('echo', None, []), ('abc', None, []), ('abC', None, []), ('px', None, []), ('p2', None, [])],
     {'1': 'p', 'A_B': 'ab', 'C': 'c'}),
    ('   ', {}, None,
     [],
     {}),
    ('', {}, None,
     [],
     {}),
    ('$X', {'X': ''}, None,
     [],
     {'X': ''}),
    ('$U', {}, None,
     [('$U', None, ['$U'])],
     {}),
    ('echo "${A:-"nested quotes"}"', {}, None,
     [('echo', None, []), ('"nested quotes"', None, [])],
     {}),
    ('echo ${A:-${B}} ${A:-x}}', {'B': 'b'}, None,
     [('echo', None, []), ('${B}', None, []), ('x}', None, [])],
     {'B': 'b'}),
]

SPLIT_TABLE = [
    ('a; b', ['a', 'b']),
    ('a && b || c | d & e', ['a', 'b', 'c', 'd', 'e']),
    ('a\nb\n\nc', ['a', 'b', 'c']),
    ('a \\\n  b \\\n  c', ['a   b   c']),
    ('# comment\na # trailing\nb#notcomment\nc #x; y', ['a', 'b#notcomment', 'c']),
    ('echo \'a;b\' "c;d" e\\;f', ['echo \'a;b\' "c;d" e\\;f']),
    ('echo "a\nb" \'c\nd\'', ['echo "a\nb" \'c\nd\'']),
    ('echo $(a; b) "$(c; d)" $(e $(f; g) h)', ['echo $(a; b) "$(c; d)" $(e $(f; g) h)']),
    ('echo `a; b` c; d', ['echo `a; b` c', 'd']),
    ('cmd > log 2>&1 &', ['cmd > log 2>&1']),
    ('cmd &> log; next', ['cmd &> log', 'next']),
    ('cmd >& log; next', ['cmd >& log', 'next']),
    ('a &&b||c', ['a', 'b', 'c']),
    ('a;;b', ['a', 'b']),
    ('x=1;y=2 # c', ['x=1', 'y=2']),
    ('echo "\\"; a" ; b', ['echo "\\"; a"', 'b']),
    ("echo 'it''s' ; c", ["echo 'it''s'", 'c']),
    ('echo "a $(b "c" d) e"; f', ['echo "a $(b "c" d) e"', 'f']),
    ('echo $( (a) ); b', ['echo $( (a) )', 'b']),
    ('echo (a; b)', ['echo (a', 'b)']),
    ('echo a\\', ['echo a\\']),
    ('echo a\\#b c\\ #d', ['echo a\\#b c\\']),
    ('echo a\\ ', ['echo a\\']),  # the statement is stripped, its escaped blank too
    ('echo "unterminated; x', ['echo "unterminated; x']),
    ("echo 'unterminated; x", ["echo 'unterminated; x"]),
    ('echo $(unterminated; x', ['echo $(unterminated; x']),
    ('echo `unterminated; x', ['echo `unterminated; x']),
    ('  ;  ; ', []),
    ('', []),
    ('a |& b', ['a', 'b']),
    ('cat <<EOF\nbody\nEOF', ['cat <<EOF', 'body', 'EOF']),
    ('f() { a; b; }', ['f() { a', 'b', '}']),
    ('echo a#b;#c\nd', ['echo a#b', 'd']),
    ('echo ${A:-x;y} z', ['echo ${A:-x', 'y} z']),
    ('echo $((1+2)); n', ['echo $((1+2))', 'n']),
    ('echo "$((1+(2)))"; n', ['echo "$((1+(2)))"', 'n']),
    ('a\t#tab comment\nb', ['a', 'b']),
]


def _read(words: List[_job_shell.Word]) -> List[Tuple[str, Optional[Tuple[str, str]], List[str]]]:
    return [(w.text, w.assign, w.unresolved) for w in words]


@pytest.mark.parametrize("statement, variables, tainted, expected, after", LEX_TABLE, ids=[row[0] or "empty" for row in LEX_TABLE])
def test_lex_words_table(statement: str, variables: Dict[str, str], tainted: Optional[Dict[str, List[str]]],
                         expected: List[Any], after: Dict[str, str]) -> None:
    variables = dict(variables)
    assert _read(_job_shell.lex_words(statement, variables, copy.deepcopy(tainted))) == expected
    assert variables == after  # ${N:=x} assigns N


@pytest.mark.parametrize("text, expected", SPLIT_TABLE, ids=[row[0] or "empty" for row in SPLIT_TABLE])
def test_split_statements_table(text: str, expected: List[str]) -> None:
    assert _job_shell.split_statements(text) == expected


# ---------------------------------------------------------------------------------------
# Properties: quoted words read back as the words.

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=")
# shlex.quote leaves [\w@%+=:,./-] bare; '=' is left out of bare pieces so that a drawn word
# never reads as NAME=value.
_BARE = st.text(st.sampled_from("abcXYZ019_@%+:,./-"), min_size=1, max_size=6)
_ANY = st.text(st.characters(min_codepoint=9, max_codepoint=0x7e, blacklist_characters="\x0b\x0c\r"), max_size=8)
_VARIABLES = {"A": "alpha", "B_2": "x", "EMPTY": ""}


def _expected_word(word: str) -> Tuple[str, Optional[Tuple[str, str]]]:
    """What lex_words makes of one word: NAME=value and NAME+=value are assignments."""
    match = _ASSIGNMENT.match(word)
    if match:
        value = word[match.end():]
        return value, (match.group(1), value)
    return word, None


@hypothesis.settings(max_examples=300, derandomize=True, database=None, deadline=None)
@hypothesis.given(st.lists(_ANY, min_size=1, max_size=6))
def test_shlex_join_reads_back(words: List[str]) -> None:
    line = shlex.join(words)
    assert _job_shell.split_statements(line) == [line]
    read = _job_shell.lex_words(line, {})
    # An empty word ('') is dropped unless it is an assignment (NAME=).
    expected = [(text, assign, []) for text, assign in map(_expected_word, words) if text or assign]
    assert _read(read) == expected


def _double_quoted(text: str) -> str:
    return '"' + re.sub(r'([$`"\\])', r"\\\1", text) + '"'


@st.composite
def _pieces(draw: Any) -> Tuple[str, str]:
    """One word as (shell text, value): bare, '...', "...", backslash-escaped and $VAR pieces
    side by side."""
    source, value = [], []
    for index in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("bare", "single", "double", "escape", "var", "braced", "default")))
        if kind == "bare" or (index == 0 and kind == "escape"):
            text = draw(_BARE)
            source.append(text)
        elif kind == "single":
            text = draw(_ANY.filter(lambda t: "'" not in t))
            source.append("'%s'" % text)
        elif kind == "double":
            text = draw(_ANY)
            source.append(_double_quoted(text))
        elif kind == "escape":
            text = draw(st.sampled_from(" \t'\"\\$`;&|<>()#*?"))
            source.append("\\" + text)
        elif kind in ("var", "braced"):
            name = draw(st.sampled_from(sorted(_VARIABLES)))
            text = _VARIABLES[name]
            source.append('"$%s"' % name if kind == "var" else "${%s}" % name)
        else:
            text = draw(_BARE)
            source.append("${UNSET:-%s}" % text)
        value.append(text)
    return "".join(source), "".join(value)


@hypothesis.settings(max_examples=300, derandomize=True, database=None, deadline=None)
@hypothesis.given(st.lists(_pieces(), min_size=1, max_size=5))
def test_quoted_pieces_read_back(words: List[Tuple[str, str]]) -> None:
    line = " ".join(piece[0] for piece in words)
    if not re.search(r"\\[ \t]$", line):  # split_statements strips a trailing escaped blank (SPLIT_TABLE)
        assert _job_shell.split_statements(line) == [line]
    read = _job_shell.lex_words(line, dict(_VARIABLES))
    assert [w.text for w in read] == [piece[1] for piece in words if piece[1]]
    assert all(w.assign is None and w.unresolved == [] for w in read)
