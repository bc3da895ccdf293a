"""Reading input text: one rule for every line-oriented file, one safe JSON and TOML loader.

Every file siftbus reads line by line (events, profiles, the pipeline's inputs) goes
through :func:`read_lines`, every JSON value from outside through :func:`parse_json_line`,
every TOML file (schema, network and pipeline configs) through :func:`read_toml`. The
rules, the same everywhere (``docs/architecture.md``, section "Limits"):

* **Encoding**: strict UTF-8. A byte sequence that is not UTF-8 is an error naming the
  file, the line and the column (in characters, from 1) of the first bad byte.
* **Byte order mark**: a UTF-8 BOM at the very start of a file is skipped (editors on
  Windows write one; Spark's text reader skips it too); anywhere else U+FEFF is an
  ordinary character.
* **Line ends**: ``\\n``, ``\\r\\n`` and a lone ``\\r`` each end a line (Python's universal
  newlines, and Spark's text reader); no other character does (not U+2028, not form
  feed). A last line without a line end is a line.
* **Limits**: a line longer than :attr:`TextLimits.max_line_bytes` is refused without
  being held in memory; JSON deeper than :attr:`TextLimits.max_json_depth` or with an
  integer of more than :attr:`TextLimits.max_int_digits` digits, TOML nested deeper than
  :attr:`TextLimits.max_toml_depth` (or a dotted key of more parts) and a TOML file larger than
  :attr:`TextLimits.max_file_bytes` are refused before a parser could recurse or spend
  quadratic time on them. Each limit is configurable by passing ``limits=``.

Errors are raised as the caller's kind of :class:`~siftbus.errors.InputError` (an event
file gives :class:`~siftbus.errors.EventError`, a schema
:class:`~siftbus.errors.SchemaError`, ...), so callers keep one ``except`` per kind.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, fields
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from typing import IO, Any

from siftbus.errors import InputError, excerpt

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class TextLimits:
    """Limits on input text; each exceeded with one clear error (``docs/architecture.md``)."""

    max_line_bytes: int = 16 * MiB
    """Longest line :func:`read_lines` accepts, in bytes (without its line end)."""
    max_json_depth: int = 64
    """Deepest nesting of JSON arrays and objects (``{"a": [1]}`` has depth 2)."""
    max_int_digits: int = 1000
    """Most digits of a JSON integer (Python itself refuses more than 4300)."""
    max_toml_depth: int = 32
    """Deepest nesting of TOML arrays and inline tables, and most parts of one dotted key or
    table header (``a.b.c`` has 3)."""
    max_file_bytes: int = 16 * MiB
    """Largest whole file read at once (schema and config TOML files)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            name, value = f.name, getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TextLimits.{name} must be a positive integer, got {value!r}")


TEXT_LIMITS = TextLimits()
"""The default limits."""

BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n} bytes"


def read_lines(file: str | os.PathLike[str] | IO[bytes], *, source: str | None = None,
               kind: type[InputError] = InputError, limits: TextLimits = TEXT_LIMITS,
               on_error: Callable[[InputError], object] | None = None,
               limit_name: str = "TextLimits.max_line_bytes",
               ) -> Generator[tuple[int, str], None, None]:
    """Each line of a text file as ``(line number from 1, text without its line end)``.

    ``file`` is a path or a binary stream (``sys.stdin.buffer``); ``source`` names it in
    errors (default: the path). Blank lines are yielded too: whether they mean anything is
    the caller's business; ``close()`` closes a file opened here. A line that is not UTF-8
    or is too long raises ``kind``; with ``on_error`` it is passed there instead and reading
    goes on with the next line (how ``siftbus check`` reports every bad line of a file).
    ``limit_name`` is the setting named in the error for a too-long line.
    """
    if isinstance(file, str | os.PathLike):
        path = Path(file)
        src = source if source is not None else str(path)
        try:
            fh: IO[bytes] = path.open("rb")
        except OSError as exc:
            raise kind(f"cannot read: {exc.strerror or exc}", source=src) from None
        with fh:
            yield from _decoded(fh, src, kind, limits.max_line_bytes, on_error, limit_name)
    else:
        yield from _decoded(file, source, kind, limits.max_line_bytes, on_error, limit_name)


def _decoded(fh: IO[bytes], source: str | None, kind: type[InputError], max_bytes: int,
             on_error: Callable[[InputError], object] | None, limit_name: str,
             ) -> Iterator[tuple[int, str]]:
    for n, raw in enumerate(_raw_lines(fh, max_bytes), start=1):
        if raw is None:
            err = kind(f"line longer than {_size(max_bytes)} ({limit_name})", source=source,
                       line=n, column=1)
        else:
            try:
                yield n, raw.decode("utf-8")
                continue
            except UnicodeDecodeError as exc:
                err = _not_utf8(raw, exc, source, n, kind)
        if on_error is None:
            raise err
        on_error(err)


def decode_line(raw: bytes, *, source: str | None = None, line: int | None = None,
                kind: type[InputError] = InputError) -> str:
    """One line's bytes as text by :func:`read_lines`'s rule (strict UTF-8); the error names
    the column of the first bad byte. For readers that split lines themselves (Spark)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc, source, line, kind) from None


def _not_utf8(raw: bytes, exc: UnicodeDecodeError, source: str | None, line: int | None,
              kind: type[InputError]) -> InputError:
    return kind(f"not UTF-8: byte 0x{raw[exc.start]:02x} {exc.reason}", source=source,
                line=line, column=len(raw[:exc.start].decode("utf-8", "replace")) + 1)


def _raw_lines(fh: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """The lines of ``fh`` as bytes, ``None`` for a line longer than ``limit``.

    Memory stays below about twice ``limit`` whatever the file holds: ``readline`` is asked
    for at most ``limit + 1`` bytes, a longer line is skipped without being kept.
    """
    carry = b""  # the start of a line whose end has not been read yet
    skip_lf = False  # the last chunk ended with "\r": a "\n" next completes that line end
    skipping = False  # inside a line already reported as too long
    first = True
    while True:
        raw = fh.readline(max(limit + 1, len(BOM)) if first else limit + 1)
        if not raw:
            break
        if first:
            first = False
            if raw.startswith(BOM):
                raw = raw[len(BOM):]
                if not raw:
                    continue
        if skip_lf:
            skip_lf = False
            if raw.startswith(b"\n"):
                raw = raw[1:]
                if not raw:
                    continue
        if not carry and not skipping and raw.endswith(b"\n"):
            # the common case: one whole line ending in "\n" or "\r\n" and no other "\r"
            body = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
            if b"\r" not in body and len(body) <= limit:
                yield body
                continue
        data = carry + raw if carry else raw
        carry = b""
        pieces = _LINE_END.split(data)
        *whole, rest = pieces  # `rest` is what follows the last line end (maybe empty)
        if data.endswith(b"\r"):
            skip_lf = True  # a "\r\n" may straddle two reads
        for piece in whole:
            if skipping:
                skipping = False  # the end of the too-long line
                continue
            yield piece if len(piece) <= limit else None
        if skipping:
            continue
        if len(rest) > limit:
            yield None
            skipping = True
        else:
            carry = rest
    if carry and not skipping:
        yield carry


def split_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of in-memory ``text`` by :func:`read_lines`'s rule (BOM, line ends)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    # str.splitlines() also breaks on \v, \f, \x1c-\x1e, \x85, U+2028 and U+2029; it is
    # much faster than the regex, so it is used when none of them occurs.
    if _OTHER_BREAKS.search(text) is None:
        lines = text.splitlines()
    else:
        lines = _STR_LINE_END.split(text)
        if lines[-1] == "":
            lines.pop()  # a final line end ends the last line; it does not start one
    yield from enumerate(lines, start=1)


_STR_LINE_END = re.compile(r"\r\n|\r|\n")
_OTHER_BREAKS = re.compile(r"[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


# --- JSON -------------------------------------------------------------------------------

_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
_OPEN_CLOSE_QUOTE = re.compile(r'["\[\]{}]')
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_SURROGATE = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


class _TooManyDigits(Exception):
    pass


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


class _NotJson(Exception):
    def __init__(self, word: str, *, number: bool = False) -> None:
        self.word = word
        self.number = number  # a number too large for a Decimal, not NaN or Infinity


def parse_json_line(text: str, *, source: str | None = None, line: int | None = None,
                    kind: type[InputError] = InputError, limits: TextLimits = TEXT_LIMITS,
                    decimals: bool = False, unique_keys: bool = False) -> Any:
    """Parse one JSON value from outside; the only outcomes are a value or ``kind``.

    Refused with ``source``, ``line`` and column: invalid JSON; nesting deeper than
    ``limits.max_json_depth`` (checked before parsing, so no ``RecursionError``); an
    integer of more than ``limits.max_int_digits`` digits (Python's own limit would give
    a ``ValueError``); ``NaN`` and ``Infinity`` (not JSON); a lone UTF-16 surrogate
    (``"\\ud800"``, which no UTF-8 encoder can write back). With ``decimals``, numbers
    with a fraction or exponent become :class:`~decimal.Decimal` (exact); with
    ``unique_keys`` an object that repeats a key is refused. ``line`` is the line of the
    text's first line (a multi-line text counts on from there).
    """
    base = 1 if line is None else line

    def fail(message: str, offset: int) -> InputError:
        ln, col = _line_col(text, offset)
        return kind(message, source=source, line=base + ln - 1, column=col)

    at = _too_deep(text, limits.max_json_depth)
    if at is not None:
        raise fail(f"JSON nested deeper than {limits.max_json_depth} "
                   "(TextLimits.max_json_depth)", at)
    long_ints = (len(text) > limits.max_int_digits
                 and _long_digits(limits.max_int_digits).search(text) is not None)
    decoder = _decoder(decimals, unique_keys, limits.max_int_digits if long_ints else None)
    try:
        value = decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON: {exc.msg}", exc.pos) from None
    except _TooManyDigits:
        raise fail(f"JSON integer of more than {limits.max_int_digits} digits "
                   "(TextLimits.max_int_digits)",
                   _long_int_at(text, limits.max_int_digits)) from None
    except _NotJson as exc:
        if exc.number:
            raise fail(f"number {excerpt(exc.word, 40)} is out of range",
                       _word_at(text, exc.word)) from None
        raise fail(f"{exc.word} is not a JSON value", _word_at(text, exc.word)) from None
    except _DuplicateKey as exc:
        raise fail(f"key {excerpt(repr(exc.key))} is given twice",
                   _duplicate_at(text, exc.key)) from None
    except RecursionError:  # only if the caller's stack is nearly full already
        raise fail("JSON nested too deeply for the interpreter's stack", 0) from None
    except ValueError as exc:  # belt and braces: the hooks above should leave none
        raise fail(f"invalid JSON: {exc}", 0) from None
    maybe_surrogate = "\\u" in text or not text.isascii()  # cheap tests before the regex
    if maybe_surrogate and _SURROGATE.search(text) is not None and _has_lone_surrogate(value):
        m = _SURROGATE.search(text)
        raise fail("JSON string holds a lone UTF-16 surrogate (not a Unicode character)",
                   m.start() if m else 0)
    return value


@cache
def _decoder(decimals: bool, unique_keys: bool, int_limit: int | None) -> json.JSONDecoder:
    """One decoder per combination of hooks (json.loads would build one per call)."""
    hooks: dict[str, Any] = {"parse_constant": _refuse_constant}
    if decimals:
        hooks["parse_float"] = _decimal
    if int_limit is not None:  # only for text holding a long run of digits: it is slower
        hooks["parse_int"] = _int_parser(int_limit)
    if unique_keys:
        hooks["object_pairs_hook"] = _no_duplicates
    return json.JSONDecoder(**hooks)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    """Line and column (from 1) of a character offset; columns count characters."""
    offset = max(0, min(offset, len(text)))
    ln = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return ln, offset - start + 1


def _too_deep(text: str, max_depth: int) -> int | None:
    """Offset of the first bracket that opens level ``max_depth + 1``, outside strings."""
    if text.count("[") + text.count("{") <= max_depth:
        return None  # cannot be deeper than the number of openers: no scan needed
    depth, pos = 0, 0
    search, string = _OPEN_CLOSE_QUOTE.search, _STRING.match
    while (m := search(text, pos)) is not None:
        c, at = m.group(), m.start()
        if c == '"':
            s = string(text, at)
            pos = s.end() if s else len(text)
            continue
        pos = at + 1
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return at
        elif depth:
            depth -= 1
    return None


@cache
def _long_digits(limit: int) -> re.Pattern[str]:
    """A run of more than ``limit`` digits; (?<![0-9]) starts matches only where a run
    starts, so the search takes linear time."""
    return re.compile(rf"(?<![0-9])[0-9]{{{limit + 1}}}")


def _int_parser(limit: int) -> Callable[[str], int]:
    def parse(s: str) -> int:
        if len(s.lstrip("-")) > limit:
            raise _TooManyDigits
        return int(s)
    return parse


def _long_int_at(text: str, limit: int) -> int:
    """Offset of the first integer (outside strings) with more than ``limit`` digits."""
    pos = 0
    while pos < len(text):
        c = text[pos]
        if c == '"':
            s = _STRING.match(text, pos)
            pos = s.end() if s else len(text)
        elif c == "-" or c.isdigit():
            m = _NUMBER.match(text, pos)
            if m is None:
                pos += 1
                continue
            if m[1] is None and m[2] is None and len(m[0].lstrip("-")) > limit:
                return pos
            pos = m.end()
        else:
            pos += 1
    return 0


def _refuse_constant(word: str) -> Any:
    raise _NotJson(word)


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:  # an exponent beyond what a Decimal holds (1e99999999999999999999)
        raise _NotJson(text, number=True) from None


def _word_at(text: str, word: str) -> int:
    pos = 0
    while (i := text.find(word, pos)) >= 0:
        if not _inside_string(text, i):
            return i
        pos = i + 1
    return 0


def _inside_string(text: str, offset: int) -> bool:
    pos = 0
    while (i := text.find('"', pos)) >= 0 and i < offset:
        s = _STRING.match(text, i)
        end = s.end() if s else len(text)
        if end > offset:
            return True
        pos = end
    return False


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return out


def _duplicate_at(text: str, key: str) -> int:
    """Offset of the second occurrence of ``key`` as a JSON string (a good guess)."""
    quoted = json.dumps(key)
    first = text.find(quoted)
    second = text.find(quoted, first + 1) if first >= 0 else -1
    return second if second >= 0 else max(first, 0)


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE_CHAR.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


_SURROGATE_CHAR = re.compile(r"[\ud800-\udfff]")


# --- whole files and TOML ---------------------------------------------------------------

def read_text(path: str | os.PathLike[str], *, source: str | None = None,
              kind: type[InputError] = InputError, limits: TextLimits = TEXT_LIMITS) -> str:
    """A whole text file (at most ``limits.max_file_bytes``), by :func:`read_lines`'s rules:
    strict UTF-8 (errors name line and column), a leading BOM skipped, every line end
    (``\\r\\n``, ``\\r``) read as ``\\n``."""
    p = Path(path)
    src = source if source is not None else str(p)
    try:
        with p.open("rb") as fh:
            data = fh.read(limits.max_file_bytes + 1)
    except OSError as exc:
        raise kind(f"cannot read: {exc.strerror or exc}", source=src) from None
    if len(data) > limits.max_file_bytes:
        raise kind(f"file larger than {_size(limits.max_file_bytes)} "
                   "(TextLimits.max_file_bytes)", source=src)
    return decode_text(data, source=src, kind=kind)


def decode_text(data: bytes, *, source: str | None = None,
                kind: type[InputError] = InputError) -> str:
    """Bytes of a whole text file as ``str`` by :func:`read_lines`'s rules."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lines = _STR_LINE_END.split(data[:exc.start].decode("utf-8", "replace"))
        raise kind(f"not UTF-8: byte 0x{data[exc.start]:02x} {exc.reason}", source=source,
                   line=len(lines), column=len(lines[-1]) + 1) from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)")
_TOML_KEY_TOKEN = re.compile(r"""[\[\]{}"'#\n=.,]""")
_TOML_VALUE_TOKEN = re.compile(r"""[\[\]{}"'#\n,]""")
_TOML_STRINGS = {
    # a multi-line string may end in up to two quotes before its closing three
    '"""': re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*+"{3,5}|"""', re.DOTALL),
    "'''": re.compile(r"'''(?:[^']|'(?!''))*+'{3,5}|'''", re.DOTALL),
    '"': re.compile(r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"?'),
    "'": re.compile(r"'[^'\n]*+'?"),
}
_TOML_LONG_INT = re.compile(r"(?<![0-9_])[0-9_]{4000}")


def parse_toml(text: str, *, source: str | None = None, kind: type[InputError] = InputError,
               limits: TextLimits = TEXT_LIMITS) -> dict[str, Any]:
    """Parse TOML text; errors raise ``kind`` with line and column.

    Arrays and inline tables nested deeper than ``limits.max_toml_depth``, and dotted keys
    or table headers of more parts than that, are refused before ``tomllib`` sees them: it
    recurses once per level (a ``RecursionError``) and spends quadratic time and memory on
    the parts of one dotted key (4,000 parts: 0.5 s and 75 MB).
    """
    deep = _toml_too_deep(text, limits.max_toml_depth)
    if deep is not None:
        at, what = deep
        ln, col = _line_col(text, at)
        raise kind(f"TOML {what} {limits.max_toml_depth} (TextLimits.max_toml_depth)",
                   source=source, line=ln, column=col)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = _TOML_POS.search(msg)
        raise kind(f"invalid TOML: {_TOML_POS.sub('', msg).strip()}", source=source,
                   line=int(m[1]) if m else None, column=int(m[2]) if m else None) from None
    except RecursionError:  # only if the caller's stack is nearly full already
        raise kind("TOML nested too deeply for the interpreter's stack",
                   source=source) from None
    except ValueError:  # int() of more than 4300 digits: tomllib does not catch it
        m = _TOML_LONG_INT.search(text)
        ln, col = _line_col(text, m.start() if m else 0)
        raise kind("TOML integer of more than 4300 digits", source=source,
                   line=ln if m else None, column=col if m else None) from None


def read_toml(path: str | os.PathLike[str], *, source: str | None = None,
              kind: type[InputError] = InputError,
              limits: TextLimits = TEXT_LIMITS) -> dict[str, Any]:
    """Read and parse a TOML file (:func:`read_text`, then :func:`parse_toml`)."""
    src = source if source is not None else str(Path(path))
    return parse_toml(read_text(path, source=src, kind=kind, limits=limits), source=src,
                      kind=kind, limits=limits)


def _toml_too_deep(text: str, max_depth: int) -> tuple[int, str] | None:
    """Where TOML nests deeper than ``max_depth``, and what does: ``(offset, what)``.

    A small scanner over TOML's structure: it skips strings of the four kinds and
    comments, follows arrays and inline tables (the value nesting ``tomllib`` recurses
    on) and counts the parts of every key (a table header is a key). Exact for valid
    TOML; on invalid TOML it may guess wrong, and then ``tomllib`` reports the error.
    """
    if (text.count("[") + text.count("{") <= max_depth
            and text.count(".") < max_depth):
        return None  # fewer openers and dots than the limit: nothing can exceed it
    stack: list[str] = []  # the open "[" and "{" of the current value
    key, header, parts = True, False, 1  # reading a key (or a header) and its parts so far
    line_start, pos, n = 0, 0, len(text)
    while pos < n:
        m = (_TOML_KEY_TOKEN if key else _TOML_VALUE_TOKEN).search(text, pos)
        if m is None:
            break
        c, at = m.group(), m.start()
        pos = at + 1
        if c == "\n":
            if not stack:  # a new line at the top level starts with a key or a header
                key, header, parts = True, False, 1
            line_start = pos
        elif c == "#":
            end = text.find("\n", at)
            pos = n if end < 0 else end
        elif c in "\"'":
            quote = c * 3 if text.startswith(c * 3, at) else c
            s = _TOML_STRINGS[quote].match(text, at)
            pos = max(s.end() if s else at + 1, at + 1)
        elif key:
            if c == ".":
                parts += 1
                if parts > max_depth:
                    return at, "dotted key or table header of more parts than"
            elif c == "=":
                key = False
            elif c == "[" and not stack and not header and not text[line_start:at].strip():
                header = True  # [table] or [[array.of.tables]]
                if text.startswith("[[", at):
                    pos = at + 2
            elif c == "]" and header:
                key = header = False  # the rest of the line is a comment or nothing
            elif c == "}" and stack:  # an empty inline table: {}
                stack.pop()
                key = False
        elif c in "[{":
            stack.append(c)
            if len(stack) > max_depth:
                return at, "arrays and inline tables nested deeper than"
            if c == "{":
                key, parts = True, 1
        elif c in "]}":
            if stack:
                stack.pop()
        elif stack and stack[-1] == "{":  # "," inside an inline table: a key follows
            key, parts = True, 1
    return None
