# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shell reader under the train.sh parser: statements, words, expansions.

It reads a bash script the way bash would for what a launch line needs: ``VAR=value`` and
``export``, ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``$((arithmetic))``, quotes, line
continuations, comments and redirections. Nothing is executed: a command substitution or an
unknown variable is kept as written and reported as unresolved.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import ast
import operator
import re
from typing import Callable, Dict, List, Mapping, Optional, Tuple

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
DECLARATION = {"export", "declare", "typeset", "local", "readonly"}
WRAPPERS = {"nohup", "env", "time", "exec", "stdbuf", "numactl", "srun", "mpirun", "nsys", "sudo"}


class Word:
    """One shell word after expansion: its text, whether it was an assignment, which
    variables could not be resolved."""

    __slots__ = ("text", "assign", "unresolved")

    def __init__(self, text: str, assign: Optional[Tuple[str, str]], unresolved: List[str]) -> None:
        self.text = text
        self.assign = assign
        self.unresolved = unresolved


def split_statements(text: str) -> List[str]:
    """Raw statements: line continuations joined, comments dropped, split at unquoted
    newlines, ``;``, ``&&``, ``||``, ``|`` and a lone ``&``."""
    return _StatementSplitter(text).run()


class _StatementSplitter:
    """split_statements' state machine: the quote state (None, "'" or '"') picks a table that
    maps a character class to an action; ``depth`` counts the open ``$(`` that hide
    separators. Each action consumes what it reads and advances ``i``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.i = 0
        self.quote: Optional[str] = None
        self.depth = 0  # inside $( ... )
        self.cur: List[str] = []
        self.out: List[str] = []

    def run(self) -> List[str]:
        while self.i < self.n:
            c = self.text[self.i]
            table = _SPLIT_ACTIONS[self.quote]
            table.get(_SPLIT_CLASSES.get(c, "other"), _StatementSplitter._keep)(self, c)
        self._flush()
        return self.out

    def _flush(self) -> None:
        statement = "".join(self.cur).strip()
        if statement:
            self.out.append(statement)
        self.cur = []

    def _keep(self, c: str) -> None:
        self.cur.append(c)
        self.i += 1

    def _close_quote(self, c: str) -> None:
        self._keep(c)
        self.quote = None

    def _escape(self, c: str) -> None:
        """A backslash keeps the next character; a backslash-newline joins the lines."""
        if self.i + 1 >= self.n:
            self._keep(c)
        elif self.text[self.i + 1] == "\n":
            self.i += 2
        else:
            self.cur.append(self.text[self.i:self.i + 2])
            self.i += 2

    def _open_quote(self, c: str) -> None:
        self.quote = c
        self._keep(c)

    def _backtick(self, c: str) -> None:
        end = self.text.find("`", self.i + 1)
        end = self.n - 1 if end < 0 else end
        self.cur.append(self.text[self.i:end + 1])
        self.i = end + 1

    def _dollar(self, c: str) -> None:
        if self.text.startswith("$(", self.i):
            self.depth += 1
            self.cur.append("$(")
            self.i += 2
        else:
            self._keep(c)

    def _open_paren(self, c: str) -> None:
        if self.depth:
            self.depth += 1
        self._keep(c)

    def _close_paren(self, c: str) -> None:
        if self.depth:
            self.depth -= 1
        self._keep(c)

    def _hash(self, c: str) -> None:
        """A comment starts at a '#' that begins a word outside $( )."""
        if self.depth or (self.cur and self.cur[-1][-1:] not in (" ", "\t", "\n", ";", "&", "|")):
            self._keep(c)
            return
        end = self.text.find("\n", self.i)
        self.i = self.n if end < 0 else end

    def _separator(self, c: str) -> None:
        """Newline, ';', '|', '&', '&&' and '||' end a statement outside $( ); the '&' of a
        redirection (2>&1, >&file, &>file) does not."""
        if self.depth:
            self._keep(c)
            return
        previous = "".join(self.cur)
        if c == "&" and (previous.endswith(">") or previous.endswith("<") or self.text.startswith("&>", self.i)):
            self._keep(c)
            return
        self._flush()
        self.i += 2 if self.text[self.i:self.i + 2] in ("&&", "||") else 1

    def _dollar_in_double(self, c: str) -> None:
        self._keep(c)
        if self.text.startswith("(", self.i):
            # "$(" inside double quotes: the same depth count as outside them.
            self.depth += 1
            self._keep("(")


# Character -> class; any other character is "other". Quote state x class -> action; a class
# missing from a state's table keeps the character (inside single quotes all but the closing one).
_SPLIT_CLASSES: Dict[str, str] = dict(
    [("\\", "escape"), ("'", "single"), ('"', "double"), ("`", "backtick"), ("$", "dollar"), ("(", "open"), (")", "close"),
     ("#", "hash")] + [(c, "separator") for c in "\n;|&"])
_SPLIT_ACTIONS: Dict[Optional[str], Dict[str, Callable[[_StatementSplitter, str], None]]] = {
    None: {
        "escape": _StatementSplitter._escape, "single": _StatementSplitter._open_quote,
        "double": _StatementSplitter._open_quote, "backtick": _StatementSplitter._backtick, "dollar": _StatementSplitter._dollar,
        "open": _StatementSplitter._open_paren, "close": _StatementSplitter._close_paren,
        "hash": _StatementSplitter._hash, "separator": _StatementSplitter._separator,
    },
    "'": {"single": _StatementSplitter._close_quote},
    '"': {
        "escape": _StatementSplitter._escape, "double": _StatementSplitter._close_quote,
        "dollar": _StatementSplitter._dollar_in_double,
        "open": _StatementSplitter._open_paren, "close": _StatementSplitter._close_paren,
    },
}


_ARITH_OPS: Dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod,
}


def _arith(expr: str, variables: Mapping[str, str]) -> Optional[str]:
    """Evaluate bash $(( )) integer arithmetic over + - * / % and parentheses; None if not."""
    def name(match: "re.Match[str]") -> str:
        return variables.get(match.group(1), "0") or "0"

    expr = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", name, expr)
    expr = re.sub(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", name, expr)
    try:
        tree = ast.parse(expr.replace("/", "//").strip(), mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            return _ARITH_OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError("unsupported")

    try:
        return str(ev(tree))
    except (ValueError, ZeroDivisionError):
        return None


_REDIRECT_RE = re.compile(r"(\d*|&)(>>|>&|<&|>|<)(&?\d+|-)?")
_BRACED_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|\d+|[@*#?$!])(?:(:?[-=+?])(.*))?$", re.S)
_SIMPLE_VAR_RE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*|\d|[@*#?$!])")
_BLANKS = " \t\n"


def lex_words(statement: str, variables: Mapping[str, str],
              tainted: Optional[Mapping[str, List[str]]] = None) -> List[Word]:
    """Split a statement into words the way bash would after parameter expansion: quotes
    removed, $VAR / ${VAR} / ${VAR:-default} / $((arithmetic)) expanded, unquoted expansions
    word-split, redirections dropped. Unknown variables stay as written ('$FOO') and are
    reported; command substitutions stay as written too."""
    words: List[Word] = []
    i = 0
    n = len(statement)
    while i < n:
        while i < n and statement[i] in _BLANKS:
            i += 1
        if i >= n:
            break
        after_redirect = _skip_redirection(statement, i)
        if after_redirect is not None:
            i = after_redirect
            continue
        lexer = _WordLexer(statement, i, variables, tainted or {})
        i = lexer.run()
        words.extend(lexer.words())
    return [w for w in words if w.text != "" or w.assign is not None or w.unresolved]


def _skip_redirection(statement: str, i: int) -> Optional[int]:
    """The index after the redirection ([n]>file, >>file, <file, 2>&1, &>file) at
    ``statement[i]``, its target word included; None when there is none."""
    redirect = _REDIRECT_RE.match(statement, i)
    if not (redirect and redirect.group(2) and (redirect.group(1) or statement[i] in "<>")):
        return None
    i = redirect.end()
    if not redirect.group(3):
        while i < len(statement) and statement[i] in " \t":
            i += 1
        while i < len(statement) and statement[i] not in _BLANKS:
            i += 1
    return i


class _WordLexer:
    """One word of lex_words, read from ``statement[start]`` to the next unquoted blank.

    The unquoted character picks an action from _WORD_ACTIONS, a character inside double
    quotes one from _DOUBLE_QUOTED_ACTIONS. The word collects fields: an unquoted expansion
    splits at blanks into several (except in an assignment, which bash does not split)."""

    def __init__(self, statement: str, start: int, variables: Mapping[str, str], tainted: Mapping[str, List[str]]) -> None:
        self.statement = statement
        self.n = len(statement)
        self.i = start
        self.variables = variables
        self.tainted = tainted
        self.fields: List[str] = []
        self.cur: Optional[str] = None  # the field being built; None before its first character
        self.unresolved: List[str] = []
        self.assign: Optional[str] = None
        match = _ASSIGN_RE.match(statement[start:])
        if match:
            self.assign = match.group(1)
            self.i = start + match.end()
            self.cur = ""

    def run(self) -> int:
        """Read the word; return the index after it."""
        while self.i < self.n and self.statement[self.i] not in _BLANKS:
            c = self.statement[self.i]
            _WORD_ACTIONS.get(c, _WordLexer._literal_char)(self)
        return self.i

    def words(self) -> List[Word]:
        if self.cur is not None:
            self.fields.append(self.cur)
        if self.assign is not None:
            value = "".join(self.fields)
            return [Word(value, (self.assign, value), self.unresolved)]
        out = [Word(field, None, self.unresolved if index == 0 else []) for index, field in enumerate(self.fields)]
        if not self.fields and self.unresolved:
            out.append(Word("", None, self.unresolved))
        return out

    # -- building fields ----------------------------------------------------------------
    def add_literal(self, text: str) -> None:
        self.cur = (self.cur or "") + text

    def add_expansion(self, text: str, quoted: bool) -> None:
        if quoted or self.assign is not None:
            self.add_literal(text)
            return
        for index, part in enumerate(re.split(r"[ \t\n]+", text)):
            if index > 0 and self.cur is not None:
                self.fields.append(self.cur)
                self.cur = None
            if part:
                self.cur = (self.cur or "") + part

    def keep_opaque(self, construct: str, written: str) -> None:
        """A construct not evaluated here: kept as ``construct``, reported as ``written``."""
        self.add_literal(construct)
        self.unresolved.append(written)

    # -- unquoted characters ------------------------------------------------------------
    def _literal_char(self) -> None:
        self.add_literal(self.statement[self.i])
        self.i += 1

    def _single_quoted(self) -> None:
        end = self.statement.find("'", self.i + 1)
        end = self.n if end < 0 else end
        self.add_literal(self.statement[self.i + 1:end])
        self.i = end + 1

    def _double_quoted(self) -> None:
        self.i += 1
        if self.cur is None:
            self.cur = ""
        while self.i < self.n and self.statement[self.i] != '"':
            c = self.statement[self.i]
            _DOUBLE_QUOTED_ACTIONS.get(c, _WordLexer._literal_char)(self)
        self.i += 1

    def _escape(self) -> None:
        if self.i + 1 < self.n:
            self.add_literal(self.statement[self.i + 1])
        self.i += 2

    def _escape_in_double_quotes(self) -> None:
        """Inside double quotes a backslash escapes only $ ` " and itself."""
        if self.i + 1 < self.n and self.statement[self.i + 1] in '$`"\\':
            self.add_literal(self.statement[self.i + 1])
            self.i += 2
        else:
            self._literal_char()

    def _backtick(self) -> None:
        """Keep the `...` substitution opaque."""
        end = self.statement.find("`", self.i + 1)
        end = self.n - 1 if end < 0 else end
        construct = self.statement[self.i:end + 1]
        self.keep_opaque(_opaque(construct), construct)
        self.i = end + 1

    def _dollar(self) -> None:
        self.i = self.expand(self.i, False)

    def _dollar_in_double_quotes(self) -> None:
        self.i = self.expand(self.i, True)

    # -- $ expansions -------------------------------------------------------------------
    def expand(self, pos: int, quoted: bool) -> int:
        """Expand the $-construct at statement[pos]; return the index after it."""
        rest = self.statement[pos:]
        for prefix, action in _EXPANSIONS:
            if rest.startswith(prefix):
                end = action(self, rest, quoted)
                if end is not None:
                    return pos + end
        return pos + self._simple_variable(rest, quoted)

    def _arithmetic(self, rest: str, quoted: bool) -> Optional[int]:
        """$((...)); None when it is not closed by '))' (then it reads as $( ( ... ) )."""
        end = _closing_paren(rest, 1)
        if end <= 0 or rest[end - 1] != ")":
            return None
        body = rest[3:end - 1]
        value = None if "$(" in body or "`" in body else _arith(body, self.variables)
        if value is not None:
            self.add_expansion(value, quoted)
        else:
            self.keep_opaque(_opaque(rest[:end + 1]), rest[:end + 1])
        return end + 1

    def _command_substitution(self, rest: str, quoted: bool) -> int:
        end = _closing_paren(rest, 1)
        if end < 0:
            self.keep_opaque(rest, rest)
            return len(rest)
        self.keep_opaque(_opaque(rest[:end + 1]), rest[:end + 1])
        return end + 1

    def _braced(self, rest: str, quoted: bool) -> int:
        """${VAR} and ${VAR<op>word}, op one of :- := - = :+ + (and ? :?, kept as written)."""
        end = rest.find("}")
        if end < 0:
            self.add_literal(rest)
            return len(rest)
        m = _BRACED_RE.match(rest[2:end])
        if not m:
            self.keep_opaque(rest[:end + 1], rest[:end + 1])
            return end + 1
        var, op, word = m.group(1), m.group(2), m.group(3) or ""
        operator_action = _PARAMETER_OPERATORS.get(op)
        if operator_action is not None:
            operator_action(self, var, word, quoted)
        else:
            self._braced_variable(var, rest[:end + 1], quoted)
        return end + 1

    def _braced_variable(self, var: str, written: str, quoted: bool) -> None:
        """${VAR} and the operators not evaluated here (${VAR?message})."""
        value = self.variables.get(var)
        if var in ("@", "*"):
            self.unresolved.append("$" + var)
        elif value is not None:
            self.add_expansion(value or "", quoted)
            self.unresolved.extend(self.tainted.get(var, []))
        else:
            self.keep_opaque(written, written)

    def _expand_word(self, text: str, quoted: bool) -> None:
        self.add_expansion(_expand_plain(text, self.variables, self.unresolved), quoted)

    def _use_default(self, var: str, word: str, quoted: bool) -> None:  # ${VAR:-word}
        value = self.variables.get(var)
        self._expand_word((word if not value else value) or "", quoted)

    def _assign_default(self, var: str, word: str, quoted: bool) -> None:  # ${VAR:=word}
        value = self.variables.get(var)
        if not value:
            self.variables[var] = word  # type: ignore[index]
        self._expand_word((word if not value else value) or "", quoted)

    def _use_default_if_unset(self, var: str, word: str, quoted: bool) -> None:  # ${VAR-word}, ${VAR=word}
        value = self.variables.get(var)
        self._expand_word((value if value is not None else word) or "", quoted)

    def _use_alternative(self, var: str, word: str, quoted: bool) -> None:  # ${VAR:+word}
        if self.variables.get(var):
            self._expand_word(word, quoted)

    def _use_alternative_if_set(self, var: str, word: str, quoted: bool) -> None:  # ${VAR+word}
        if self.variables.get(var) is not None:
            self._expand_word(word, quoted)

    def _simple_variable(self, rest: str, quoted: bool) -> int:
        """$VAR, $1, $@ ...; a '$' that starts none of them is a literal '$'."""
        m = _SIMPLE_VAR_RE.match(rest)
        if not m:
            self.add_literal("$")
            return 1
        var = m.group(1)
        if var in ("@", "*"):
            self.unresolved.append("$" + var)
        elif var in self.variables:
            self.add_expansion(self.variables[var], quoted)
            self.unresolved.extend(self.tainted.get(var, []))
        else:
            self.keep_opaque(m.group(0), m.group(0))
        return m.end()


_WORD_ACTIONS: Dict[str, Callable[[_WordLexer], None]] = {
    "'": _WordLexer._single_quoted, '"': _WordLexer._double_quoted, "\\": _WordLexer._escape,
    "$": _WordLexer._dollar, "`": _WordLexer._backtick,
}
_DOUBLE_QUOTED_ACTIONS: Dict[str, Callable[[_WordLexer], None]] = {
    "\\": _WordLexer._escape_in_double_quotes, "$": _WordLexer._dollar_in_double_quotes, "`": _WordLexer._backtick,
}
# Tried in this order: "$((" falls back to "$(" when it is not arithmetic.
_EXPANSIONS: Tuple[Tuple[str, Callable[[_WordLexer, str, bool], Optional[int]]], ...] = (
    ("$((", _WordLexer._arithmetic), ("$(", _WordLexer._command_substitution), ("${", _WordLexer._braced),
)
# ${VAR=word} reads like ${VAR-word} here: it does not assign (only := does).
_PARAMETER_OPERATORS: Dict[Optional[str], Callable[[_WordLexer, str, str, bool], None]] = {
    ":-": _WordLexer._use_default, ":=": _WordLexer._assign_default,
    "-": _WordLexer._use_default_if_unset, "=": _WordLexer._use_default_if_unset,
    ":+": _WordLexer._use_alternative, "+": _WordLexer._use_alternative_if_set,
}


def _opaque(construct: str) -> str:
    """A command substitution we cannot run, kept as one word (its blanks squeezed out) so a
    variable holding it does not split into stray arguments when expanded."""
    return re.sub(r"\s+", "", construct)


def _closing_paren(text: str, start: int) -> int:
    """Index of the parenthesis that closes the one at ``text[start]``, or -1."""
    level = 0
    for offset in range(start, len(text)):
        if text[offset] == "(":
            level += 1
        elif text[offset] == ")":
            level -= 1
            if level == 0:
                return offset
    return -1


def _expand_plain(text: str, variables: Mapping[str, str], unresolved: List[str]) -> str:
    """Expand $VAR / ${VAR} inside a ${VAR:-default} word."""
    def sub(match: "re.Match[str]") -> str:
        var = match.group(1) or match.group(2)
        if var in variables:
            return variables[var]
        unresolved.append(match.group(0))
        return match.group(0)

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, text)


def is_shell_syntax(word: str) -> bool:
    """Redirections and separators that eval must see unquoted."""
    return re.match(r"^(\d*|&)(>>|>&|<&|>|<)(&?\d+|-)?$|^(\||;|&&|\|\||&)$", word) is not None


def basename(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def is_python(word: str) -> bool:
    return re.match(r"^python(\d+(\.\d+)?)?$", basename(word)) is not None
