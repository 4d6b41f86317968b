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
    out: List[str] = []
    cur: List[str] = []
    i = 0
    quote: Optional[str] = None
    depth = 0  # inside $( ... )
    n = len(text)
    while i < n:
        c = text[i]
        if quote == "'":
            cur.append(c)
            if c == "'":
                quote = None
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i += 2
                continue
            cur.append(text[i:i + 2])
            i += 2
            continue
        if quote == '"':
            cur.append(c)
            if c == '"':
                quote = None
            elif c == "$" and text.startswith("$(", i):
                depth += 1
                cur.append("(")
                i += 1
            elif c == "(" and depth:
                depth += 1
            elif c == ")" and depth:
                depth -= 1
            i += 1
            continue
        if c in ("'", '"', "`"):
            if c == "`":
                end = text.find("`", i + 1)
                end = n - 1 if end < 0 else end
                cur.append(text[i:end + 1])
                i = end + 1
                continue
            quote = c
            cur.append(c)
            i += 1
            continue
        if c == "$" and text.startswith("$(", i):
            depth += 1
            cur.append("$(")
            i += 2
            continue
        if c == ")" and depth:
            depth -= 1
            cur.append(c)
            i += 1
            continue
        if depth:
            if c == "(":
                depth += 1
            cur.append(c)
            i += 1
            continue
        if c == "#" and (not cur or cur[-1][-1:] in (" ", "\t", "\n", ";", "&", "|")):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in "\n;|&":
            previous = "".join(cur)
            if c == "&" and (previous.endswith(">") or previous.endswith("<") or text.startswith("&>", i)):
                cur.append(c)
                i += 1
                continue
            statement = previous.strip()
            if statement:
                out.append(statement)
            cur = []
            i += 2 if text[i:i + 2] in ("&&", "||") else 1
            continue
        cur.append(c)
        i += 1
    statement = "".join(cur).strip()
    if statement:
        out.append(statement)
    return out


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
        while i < n and statement[i] in " \t\n":
            i += 1
        if i >= n:
            break
        # Redirections: [n]>file, >>file, <file, 2>&1, &>file.
        redirect = re.match(r"(\d*|&)(>>|>&|<&|>|<)(&?\d+|-)?", statement[i:])
        if redirect and redirect.group(2) and (redirect.group(1) or statement[i] in "<>"):
            i += redirect.end()
            if not redirect.group(3):
                while i < n and statement[i] in " \t":
                    i += 1
                while i < n and statement[i] not in " \t\n":
                    i += 1
            continue
        fields: List[str] = []
        cur: Optional[str] = None
        unresolved: List[str] = []
        assign: Optional[Tuple[str, str]] = None
        match = _ASSIGN_RE.match(statement[i:])
        no_split = False
        if match:
            assign = (match.group(1), "")
            i += match.end()
            cur = ""
            no_split = True

        def add_literal(text: str) -> None:
            nonlocal cur
            cur = (cur or "") + text

        def add_expansion(text: str, quoted: bool) -> None:
            nonlocal cur
            if quoted or no_split:
                add_literal(text)
                return
            parts = re.split(r"[ \t\n]+", text)
            for index, part in enumerate(parts):
                if index > 0 and cur is not None:
                    fields.append(cur)
                    cur = None
                if part:
                    cur = (cur or "") + part

        def backtick(pos: int) -> int:
            """Keep the `...` substitution at statement[pos] opaque; return the index after it."""
            end = statement.find("`", pos + 1)
            end = n - 1 if end < 0 else end
            add_literal(_opaque(statement[pos:end + 1]))
            unresolved.append(statement[pos:end + 1])
            return end + 1

        def expand(pos: int, quoted: bool) -> int:
            """Expand the $-construct at statement[pos]; return the index after it."""
            rest = statement[pos:]
            if rest.startswith("$(("):
                end = _closing_paren(rest, 1)
                if end > 0 and rest[end - 1] == ")":
                    value = None if "$(" in rest[3:end - 1] or "`" in rest[3:end - 1] else _arith(rest[3:end - 1], variables)
                    if value is not None:
                        add_expansion(value, quoted)
                    else:
                        add_literal(_opaque(rest[:end + 1]))
                        unresolved.append(rest[:end + 1])
                    return pos + end + 1
            if rest.startswith("$("):
                end = _closing_paren(rest, 1)
                if end < 0:
                    add_literal(rest)
                    unresolved.append(rest)
                    return n
                add_literal(_opaque(rest[:end + 1]))
                unresolved.append(rest[:end + 1])
                return pos + end + 1
            if rest.startswith("${"):
                end = rest.find("}")
                if end < 0:
                    add_literal(rest)
                    return n
                body = rest[2:end]
                m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*|\d+|[@*#?$!])(?:(:?[-=+?])(.*))?$", body, re.S)
                if not m:
                    add_literal(rest[:end + 1])
                    unresolved.append(rest[:end + 1])
                    return pos + end + 1
                var, op, word = m.group(1), m.group(2), m.group(3) or ""
                value = variables.get(var)
                is_set = value is not None
                empty = not value
                if op in (":-", ":="):
                    chosen = word if empty else value
                    if op == ":=" and empty:
                        variables[var] = word  # type: ignore[index]
                    add_expansion(_expand_plain(chosen or "", variables, unresolved), quoted)
                elif op in ("-", "="):
                    chosen = value if is_set else word
                    add_expansion(_expand_plain(chosen or "", variables, unresolved), quoted)
                elif op in (":+", "+"):
                    if (not empty) if op == ":+" else is_set:
                        add_expansion(_expand_plain(word, variables, unresolved), quoted)
                elif var in ("@", "*"):
                    unresolved.append("$" + var)
                elif is_set:
                    add_expansion(value or "", quoted)
                    unresolved.extend((tainted or {}).get(var, []))
                else:
                    add_literal(rest[:end + 1])
                    unresolved.append(rest[:end + 1])
                return pos + end + 1
            m = re.match(r"^\$([A-Za-z_][A-Za-z0-9_]*|\d|[@*#?$!])", rest)
            if not m:
                add_literal("$")
                return pos + 1
            var = m.group(1)
            if var in ("@", "*"):
                unresolved.append("$" + var)
            elif var in variables:
                add_expansion(variables[var], quoted)
                unresolved.extend((tainted or {}).get(var, []))
            else:
                add_literal(m.group(0))
                unresolved.append(m.group(0))
            return pos + m.end()

        while i < n and statement[i] not in " \t\n":
            c = statement[i]
            if c == "'":
                end = statement.find("'", i + 1)
                end = n if end < 0 else end
                add_literal(statement[i + 1:end])
                i = end + 1
            elif c == '"':
                i += 1
                if cur is None:
                    cur = ""
                while i < n and statement[i] != '"':
                    ch = statement[i]
                    if ch == "\\" and i + 1 < n and statement[i + 1] in '$`"\\':
                        add_literal(statement[i + 1])
                        i += 2
                    elif ch == "$":
                        i = expand(i, True)
                    elif ch == "`":
                        i = backtick(i)
                    else:
                        add_literal(ch)
                        i += 1
                i += 1
            elif c == "\\":
                if i + 1 < n:
                    add_literal(statement[i + 1])
                i += 2
            elif c == "$":
                i = expand(i, False)
            elif c == "`":
                i = backtick(i)
            else:
                add_literal(c)
                i += 1
        if cur is not None:
            fields.append(cur)
        if assign is not None:
            words.append(Word("".join(fields), (assign[0], "".join(fields)), unresolved))
        else:
            for index, field in enumerate(fields):
                words.append(Word(field, None, unresolved if index == 0 else []))
            if not fields and unresolved:
                words.append(Word("", None, unresolved))
    return [w for w in words if w.text != "" or w.assign is not None or w.unresolved]


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
