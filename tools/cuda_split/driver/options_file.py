"""nvcc's `--options-file FILE` (`-optf`): the arguments a file holds, as nvcc reads them.

CMake's Makefile generator passes a target's include directories this way. The driver
reads the files only to make its own decisions (the inputs, `-o`, `-MF`, the mode, the
archs); nvcc's `--dryrun`, which gives the plan, is handed the command as it came, files
and all, so what the steps run is nvcc's reading of them.

How nvcc 13.0 reads a file (checked with `nvcc --dryrun --options-file F`): words are
separated by whitespace, newlines included; a double quote groups a word's characters
(`-I"/a b/inc"`, `"-DX=1 2"`, `-DQ=a"b c"d` are one word each) and is dropped; a
backslash makes the next character literal (`-DY=a\\ b` is one word) and is dropped;
single quotes and `#` are ordinary characters. A quote left open or a backslash at the
end is an error nvcc reports ("Stray ... character"). Files are named relative to the
working directory, several at once as a comma-separated list (`-optf a.rsp,b.rsp`), and a
file may name more files. (nvcc then reads each word as it reads a command-line
argument, with backslashes again: the driver keeps the word, which differs only for
`-D` values with backslashes or quotes, and none of its decisions reads those.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

OPTIONS_FILE = "optf"  # the option's short name, as the driver's option reader gives it
MAX_DEPTH = 16  # files naming files: deeper is a loop


class OptionsFileError(Exception):
    """An options file the driver cannot read as nvcc does: nvcc runs the command."""


class _Option(Protocol):
    name: str
    value: str | None
    tokens: list[str]


def file_words(text: str) -> list[str]:
    """The words of an options file's text, as nvcc splits them. Raises
    OptionsFileError for an unclosed quote or a trailing backslash."""
    words: list[str] = []
    word: list[str] = []
    in_word = quoted = False
    chars = iter(text)
    for c in chars:
        if c == "\\":
            escaped = next(chars, None)
            if escaped is None:
                raise OptionsFileError("a backslash ends it")
            word.append(escaped)
            in_word = True
        elif c == '"':
            quoted = not quoted
            in_word = True
        elif c.isspace() and not quoted:
            if in_word:
                words.append("".join(word))
            word, in_word = [], False
        else:
            word.append(c)
            in_word = True
    if quoted:
        raise OptionsFileError("a quote is not closed")
    if in_word:
        words.append("".join(word))
    return words


def expand_options_files(
    args: Sequence[str], read_options: Callable[[Sequence[str]], Sequence[_Option]]
) -> tuple[list[str], list[str]]:
    """`args` with every options-file option replaced by the words of its files, and
    why the driver could not read one ([] if it could; the option then stays as it was,
    for nvcc to report). `read_options` splits arguments into options as nvcc does."""
    try:
        return _expand(args, read_options, 0), []
    except OptionsFileError as e:
        return list(args), [str(e)]


def _expand(
    args: Sequence[str], read_options: Callable[[Sequence[str]], Sequence[_Option]], depth: int
) -> list[str]:
    out: list[str] = []
    for option in read_options(args):
        if option.name != OPTIONS_FILE:
            out += option.tokens
            continue
        if option.value is None:
            raise OptionsFileError("--options-file lacks its value")
        if depth >= MAX_DEPTH:
            raise OptionsFileError(f"options files nest deeper than {MAX_DEPTH}")
        for name in option.value.split(","):
            try:
                with open(name, encoding="utf-8", errors="surrogateescape") as f:
                    text = f.read()
            except OSError as e:
                raise OptionsFileError(f"options file {name}: {e.strerror}") from e
            try:
                words = file_words(text)
            except OptionsFileError as e:
                raise OptionsFileError(f"options file {name}: {e}") from e
            out += _expand(words, read_options, depth + 1)
    return out
