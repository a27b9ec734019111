"""The PNG summary chart of `cuda-split profile --chart`: compile time per arch (cicc and
ptxas stacked), the slowest kernels and device functions, the costliest template
instantiations and headers, as horizontal bars. Standard library only (zlib): a small
canvas with a 5x7 pixel font, written as an 8-bit RGB PNG."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

# A 5x7 font: each glyph 35 bits, row-major, the top row in the high bits.
_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.,:_-+/()[]<>%*&='~"
_GLYPHS = [
    int(h, 16)
    for h in (
        "3a33ae62e 11842108e 3a211111f 7c441062e 8ca97c42 7e1e0862e 1910f462e 7c2222108 3a317462e "
        "3a317844c 3a31fc631 7a31f463e 3a308422e 72518c65c 7e10f421f 7e10f4210 3a30bc62f 4631fc631 "
        "38842108e 1c4210a4c 4654c5251 42108421f 4775ac631 4639ace31 3a318c62e 7a31f4210 3a318d64d "
        "7a31f5251 3e107043e 7c8421084 46318c62e 46318c544 4631ad6aa 462a22a31 463151084 7c222221f "
        "e0be2f 4216cc63e e8422e 42d9c62f e8fe0e 1928e2108 1f18bc2e 4216cc631 100c2108e 80610a4c "
        "4212a6292 30842108e 1aad631 16cc631 e8c62e 1e8fa10 d9bc21 16cc210 e8383e 211c42126 "
        "118c66d 118c544 118d6aa 1151151 118bc2e 1f1111f 18c 3088 18c03180 1f f8000 84f9080 "
        "44222110 88842082 208210888 39084210e 38421084e 88882082 208208888 672222273 9575480 "
        "32544564d 1f07c00 108800000 8a8800"
    ).split()
]
FONT = dict(zip(_CHARS, _GLYPHS, strict=True))
Color = tuple[int, int, int]
WHITE, INK, GRID = (255, 255, 255), (33, 33, 33), (220, 220, 220)
TOOL_COLORS = {"cicc": (66, 133, 244), "ptxas": (244, 160, 0)}
OTHER = (150, 150, 150)
BAR = (52, 168, 83)


class Canvas:
    """An RGB image that draws filled rectangles and text."""

    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self.rows = [bytearray(WHITE * width) for _ in range(height)]

    def rect(self, x: int, y: int, w: int, h: int, color: Color) -> None:
        x0, x1 = max(x, 0), min(x + w, self.width)
        if x1 <= x0:
            return
        for row in self.rows[max(y, 0) : min(y + h, self.height)]:
            row[3 * x0 : 3 * x1] = bytes(color) * (x1 - x0)

    def text(self, x: int, y: int, s: str, color: Color = INK, scale: int = 1) -> int:
        """Draws `s` (unknown characters as blanks); returns the x after it."""
        for ch in s:
            bits = FONT.get(ch, 0)
            for i in range(35):
                if bits >> (34 - i) & 1:
                    self.rect(x + (i % 5) * scale, y + (i // 5) * scale, scale, scale, color)
            x += 6 * scale
        return x

    def png(self) -> bytes:
        raw = b"".join(b"\0" + bytes(r) for r in self.rows)

        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


WIDTH, LABEL, ROW, MARGIN = 1000, 330, 12, 10
BAR_WIDTH = WIDTH - LABEL - 2 * MARGIN - 60


def _fit(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    if "/" in text:  # a path: its end says more
        return "..." + text[-(chars - 3) :]
    return text[: chars - 3] + "..."


def _bars(
    canvas: Canvas, y: int, title: str, rows: Sequence[tuple[str, list[tuple[float, Color]]]]
) -> int:
    canvas.text(MARGIN, y, title, scale=2)
    y += 22
    top = max((sum(v for v, _ in parts) for _, parts in rows), default=0.0) or 1.0
    for label, parts in rows:
        canvas.text(MARGIN, y + 2, _fit(label, (LABEL - MARGIN) // 6 - 1))
        x = LABEL
        canvas.rect(LABEL, y, BAR_WIDTH, ROW - 2, GRID)
        for value, color in parts:
            w = round(BAR_WIDTH * value / top)
            canvas.rect(x, y, w, ROW - 2, color)
            x += w
        canvas.text(LABEL + BAR_WIDTH + 6, y + 2, f"{sum(v for v, _ in parts):.2f}s")
        y += ROW
    return y + 12


def _sections(result: dict[str, Any]) -> list[tuple[str, list]]:
    archs = []
    for r in result["archs"]:
        parts = [(r.get(f"{t}_seconds", 0.0), c) for t, c in TOOL_COLORS.items()]
        rest = r["seconds"] - sum(v for v, _ in parts)
        archs.append((r["arch"] or "-", [*parts, (max(rest, 0.0), OTHER)]))
    listed = [
        ("Kernels and device functions", "functions", "demangled"),
        ("Template instantiations (inclusive)", "instantiations", "instantiation"),
        ("Headers (inclusive)", "headers", "header"),
    ]
    out = [("Compile time per arch: cicc (blue), ptxas (orange)", archs)]
    for title, key, column in listed:
        rows = [(f"{r['arch']} {r[column]}", [(r["seconds"], BAR)]) for r in result[key][:8]]
        out.append((title, rows))
    return out


def chart(result: dict[str, Any]) -> bytes:
    """The chart of `analyze`'s result as PNG bytes."""
    sections = _sections(result)
    height = MARGIN + sum(22 + ROW * len(rows) + 12 for _, rows in sections) + MARGIN
    canvas = Canvas(WIDTH, height)
    y = MARGIN
    for title, rows in sections:
        y = _bars(canvas, y, title, rows)
    return canvas.png()


def write_chart(path: str, result: dict[str, Any]) -> None:
    with open(path, "wb") as f:
        f.write(chart(result))
