"""Small inline SVG charts for the HTML report: no scripts, no network, text escaped."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2")


def grouped_bars(title: str, groups: Sequence[str], series: dict[str, Sequence[float | None]],
                 *, width: int = 720, bar_h: int = 12) -> str:
    """Horizontal bars in [0, 1]: one group per row, one bar per series."""
    names = list(series)
    row_h = bar_h * len(names) + 8
    label_w, chart_w = 190, width - 190 - 60
    height = 40 + row_h * len(groups) + 20
    out = [(f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'),
           f'<text x="0" y="16" class="chart-title">{escape(title)}</text>']
    for i, name in enumerate(names):
        x = label_w + i * 140
        out.append(f'<rect x="{x}" y="24" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                   f'<text x="{x + 14}" y="33" class="legend">{escape(name)}</text>')
    for g, group in enumerate(groups):
        y0 = 40 + g * row_h
        out.append(f'<text x="{label_w - 6}" y="{y0 + row_h / 2 + 4}" text-anchor="end" class="label">'
                   f'{escape(group[:28])}</text>')
        for i, name in enumerate(names):
            value = series[name][g]
            y = y0 + i * bar_h
            if value is None:
                out.append(f'<text x="{label_w + 4}" y="{y + bar_h - 2}" class="na">n/a</text>')
                continue
            w = max(0.0, min(1.0, value)) * chart_w
            out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" '
                       f'fill="{PALETTE[i % len(PALETTE)]}"><title>{escape(name)} {escape(group)}: {value:.3f}'
                       f'</title></rect><text x="{label_w + w + 4:.1f}" y="{y + bar_h - 3}" class="value">'
                       f'{value:.2f}</text>')
    out.append("</svg>")
    return "".join(out)


def delta_bars(title: str, deltas: Sequence[tuple[str, float]], *, width: int = 720) -> str:
    """Signed bars around a zero line (B minus A)."""
    row, label_w = 18, 190
    half = (width - label_w - 60) / 2
    zero = label_w + half
    scale = max((abs(d) for _, d in deltas), default=1.0) or 1.0
    height = 30 + row * len(deltas) + 10
    out = [(f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'),
           f'<text x="0" y="16" class="chart-title">{escape(title)}</text>',
           f'<line x1="{zero}" y1="22" x2="{zero}" y2="{height - 4}" stroke="#888"/>']
    for i, (name, d) in enumerate(deltas):
        y = 26 + i * row
        w = abs(d) / scale * half
        x = zero if d >= 0 else zero - w
        color = PALETTE[2] if d >= 0 else PALETTE[3]
        out.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end" class="label">{escape(name)}</text>'
                   f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 5}" fill="{color}"/>'
                   f'<text x="{(zero + w + 4) if d >= 0 else (zero - w - 4):.1f}" y="{y + 11}" class="value" '
                   f'text-anchor="{"start" if d >= 0 else "end"}">{d:+.3f}</text>')
    out.append("</svg>")
    return "".join(out)


def confusion(title: str, labels: Sequence[object], matrix: Sequence[Sequence[int]]) -> str:
    """A heat-mapped confusion matrix: rows the judge, columns the human."""
    cell, pad = 38, 70
    n = len(labels)
    size = pad + cell * n + 10
    top = max((v for row in matrix for v in row), default=1) or 1
    out = [(f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{size + 20}" height="{size + 30}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'),
           f'<text x="0" y="14" class="chart-title">{escape(title)}</text>',
           f'<text x="{pad}" y="{size + 24}" class="legend">columns: human · rows: judge</text>']
    for j, lab in enumerate(labels):
        out.append(f'<text x="{pad + j * cell + cell / 2}" y="{pad - 6}" text-anchor="middle" class="label">'
                   f'{escape(str(lab))}</text>')
    for i, lab in enumerate(labels):
        out.append(f'<text x="{pad - 6}" y="{pad + i * cell + cell / 2 + 4}" text-anchor="end" class="label">'
                   f'{escape(str(lab))}</text>')
        for j in range(n):
            v = matrix[i][j] if i < len(matrix) and j < len(matrix[i]) else 0
            shade = int(235 - 170 * v / top)
            out.append(f'<rect x="{pad + j * cell}" y="{pad + i * cell}" width="{cell - 2}" height="{cell - 2}" '
                       f'fill="rgb({shade},{shade + 10 if shade < 245 else 245},255)"/>'
                       f'<text x="{pad + j * cell + cell / 2}" y="{pad + i * cell + cell / 2 + 4}" '
                       f'text-anchor="middle" class="value">{v}</text>')
    out.append("</svg>")
    return "".join(out)


def interval(title: str, rows: Sequence[tuple[str, float | None, float | None, float | None]],
             *, width: int = 720, threshold: float | None = None) -> str:
    """Point estimates with confidence intervals on [-1, 1] (kappa)."""
    label_w, row = 190, 22
    chart_w = width - label_w - 60
    height = 30 + row * len(rows) + 16

    def x(v: float) -> float:
        return label_w + (max(-1.0, min(1.0, v)) + 1) / 2 * chart_w

    out = [(f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'),
           f'<text x="0" y="16" class="chart-title">{escape(title)}</text>']
    for tick in (-1, -0.5, 0, 0.5, 1):
        out.append(f'<line x1="{x(tick):.1f}" y1="22" x2="{x(tick):.1f}" y2="{height - 14}" stroke="#ddd"/>'
                   f'<text x="{x(tick):.1f}" y="{height - 2}" text-anchor="middle" class="legend">{tick}</text>')
    if threshold is not None:
        out.append(f'<line x1="{x(threshold):.1f}" y1="22" x2="{x(threshold):.1f}" y2="{height - 14}" '
                   f'stroke="{PALETTE[3]}" stroke-dasharray="4 3"/>')
    for i, (name, k, lo, hi) in enumerate(rows):
        y = 30 + i * row
        out.append(f'<text x="{label_w - 6}" y="{y + 5}" text-anchor="end" class="label">{escape(name)}</text>')
        if k is None:
            out.append(f'<text x="{label_w + 4}" y="{y + 5}" class="na">undefined</text>')
            continue
        if lo is not None and hi is not None:
            out.append(f'<line x1="{x(lo):.1f}" y1="{y}" x2="{x(hi):.1f}" y2="{y}" stroke="#333" stroke-width="2"/>')
        out.append(f'<circle cx="{x(k):.1f}" cy="{y}" r="5" fill="{PALETTE[0]}"><title>{escape(name)}: kappa '
                   f'{k:.3f}</title></circle><text x="{x(k) + 8:.1f}" y="{y - 6}" class="value">{k:.2f}</text>')
    out.append("</svg>")
    return "".join(out)


def _frame(title: str, width: int, height: int) -> list[str]:
    return [(f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'),
            f'<text x="0" y="16" class="chart-title">{escape(title)}</text>']


def _unit_axes(x0: float, y0: float, size: float, xlabel: str, ylabel: str, *, x_from: float = 0.0) -> list[str]:
    """A square plot area with [x_from, 1] across and [0, 1] up, gridlines every 0.25 (or 0.1)."""
    out = [f'<rect x="{x0}" y="{y0}" width="{size}" height="{size}" fill="none" stroke="#888"/>']
    step = 0.1 if x_from >= 0.5 else 0.25
    ticks = [round(x_from + i * step, 2) for i in range(round((1 - x_from) / step) + 1)]
    for t in ticks:
        x = x0 + (t - x_from) / (1 - x_from) * size
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + size}" stroke="#eee"/>'
                   f'<text x="{x:.1f}" y="{y0 + size + 14}" text-anchor="middle" class="legend">{t:g}</text>')
    for t in (0, 0.25, 0.5, 0.75, 1):
        y = y0 + size - t * size
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + size}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end" class="legend">{t:g}</text>')
    out.append(f'<text x="{x0 + size / 2}" y="{y0 + size + 30}" text-anchor="middle" class="label">'
               f'{escape(xlabel)}</text>'
               f'<text x="12" y="{y0 + size / 2}" transform="rotate(-90 12 {y0 + size / 2})" text-anchor="middle" '
               f'class="label">{escape(ylabel)}</text>')
    return out


def reliability_diagram(title: str, bins: Sequence[dict[str, Any]], *, ece: float | None = None, size: int = 260) -> str:
    """Agreement against mean confidence per bin (dot area ~ items), beside the diagonal of a
    perfectly calibrated judge. ``bins``: the record's reliability bins (low, high, n,
    confidence, agreement)."""
    x0, y0 = 48, 30
    out = _frame(title + ("" if ece is None else f" (ECE {ece:.3f})"), size + x0 + 20, size + y0 + 40)
    out += _unit_axes(x0, y0, size, "verdict confidence", "agreement with people")
    out.append(f'<line x1="{x0}" y1="{y0 + size}" x2="{x0 + size}" y2="{y0}" stroke="#bbb" stroke-dasharray="4 3"/>')
    top = max((b["n"] for b in bins), default=1) or 1
    for b in bins:
        if not b["n"] or b["confidence"] is None or b["agreement"] is None:
            continue
        x, y = x0 + b["confidence"] * size, y0 + size - b["agreement"] * size
        r = 3 + 7 * (b["n"] / top) ** 0.5
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{PALETTE[0]}" fill-opacity="0.75">'
                   f'<title>confidence {b["low"]:g}–{b["high"]:g}: n={b["n"]}, mean confidence '
                   f'{b["confidence"]:.3f}, agreement {b["agreement"]:.3f}</title></circle>')
    out.append("</svg>")
    return "".join(out)


def coverage_curve(title: str, curve: Sequence[dict[str, Any]], n: int, *, target: float, cutoff: float | None,
                   size: int = 260) -> str:
    """Agreement among kept items (and its lower bound where tested) against coverage, one point
    per cut-off of the grid; the target as a dashed line and the chosen cut-off ringed."""
    x0, y0 = 48, 30
    out = _frame(title, size + x0 + 20, size + y0 + 40)
    out += _unit_axes(x0, y0, size, "coverage (share of items kept)", "agreement among kept items")
    ty = y0 + size - target * size
    out.append(f'<line x1="{x0}" y1="{ty:.1f}" x2="{x0 + size}" y2="{ty:.1f}" stroke="{PALETTE[3]}" '
               f'stroke-dasharray="4 3"/>')
    seen: set[int] = set()
    line, bound = [], []
    for p in sorted(curve, key=lambda p: p["kept"]):
        if not n or not p["kept"] or p["kept"] in seen or p["agreement"] is None:
            continue
        seen.add(p["kept"])
        x = x0 + p["kept"] / n * size
        line.append(f"{x:.1f},{y0 + size - p['agreement'] * size:.1f}")
        if p["bound"] is not None:
            bound.append(f"{x:.1f},{y0 + size - p['bound'] * size:.1f}")
    if line:
        out.append(f'<polyline points="{" ".join(line)}" fill="none" stroke="{PALETTE[0]}" stroke-width="2"/>')
    if bound:
        out.append(f'<polyline points="{" ".join(bound)}" fill="none" stroke="{PALETTE[1]}" stroke-width="1.5" '
                   f'stroke-dasharray="2 2"/>')
    chosen = next((p for p in curve if cutoff is not None and p["cutoff"] == cutoff), None)
    if chosen is not None and n and chosen["agreement"] is not None:
        cx, cy = x0 + chosen["kept"] / n * size, y0 + size - chosen["agreement"] * size
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="none" stroke="{PALETTE[3]}" stroke-width="2">'
                   f'<title>lambda {cutoff:g}: '
                   f'{chosen["kept"]}/{n} kept, agreement {chosen["agreement"]:.3f}</title></circle>')
    which = f"lambda {cutoff:g}" if cutoff is not None else "no lambda"
    out.append(f'<text x="{x0 + 4}" y="{ty - 4:.1f}" class="legend">target {target:g}</text>'
               f'<text x="{x0 + size - 4}" y="{y0 + 12}" text-anchor="end" class="legend">'
               f'{which} · dashed: lower bound</text>')
    out.append("</svg>")
    return "".join(out)


def trend_lines(title: str, runs: Sequence[str], series: dict[str, Sequence[float | None]], *,
                breaks: Sequence[int] = (), drops: Sequence[tuple[int, str]] = (), width: int = 720,
                height: int = 260) -> str:
    """Metric values over runs (x: run labels, oldest first; y: the values' own range).

    ``breaks``: indexes of runs where the series breaks (golden set or rubric changed), drawn
    as dashed lines and never joined across; ``drops``: (index, series name) of real drops,
    ringed in red."""
    left, right, top, bottom = 50, 150, 28, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for vs in series.values() for v in vs if v is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.05, hi + 0.05
    pad = (hi - lo) * 0.1
    lo, hi = lo - pad, hi + pad
    n = len(runs)

    def x(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h * (1 - (v - lo) / (hi - lo))

    out = [(f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'),
           f'<text x="0" y="16" class="chart-title">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ddd"/>']
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + plot_w}" y2="{y(v):.1f}" stroke="#f0f0f0"/>'
                   f'<text x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end" class="legend">{v:.3f}</text>')
    step = max(1, n // 10)
    for i, label in enumerate(runs):
        if i % step == 0 or i == n - 1:
            out.append(f'<text x="{x(i):.1f}" y="{top + plot_h + 14}" text-anchor="middle" class="legend">'
                       f'{escape(label)}</text>')
    for i in breaks:
        bx = (x(i - 1) + x(i)) / 2 if i > 0 else x(i)
        out.append(f'<line x1="{bx:.1f}" y1="{top}" x2="{bx:.1f}" y2="{top + plot_h}" stroke="#888" '
                   f'stroke-dasharray="5 4"><title>series break before {escape(runs[i])}</title></line>'
                   f'<text x="{bx + 3:.1f}" y="{top + 10}" class="na">break</text>')
    ringed = set(drops)
    for s, (name, vs) in enumerate(series.items()):
        color = PALETTE[s % len(PALETTE)]
        segment: list[str] = []
        for i, point in enumerate(vs):
            if i in breaks or point is None:
                if len(segment) > 1:
                    out.append(f'<polyline points="{" ".join(segment)}" fill="none" stroke="{color}" stroke-width="2"/>')
                segment = []
            if point is not None:
                segment.append(f"{x(i):.1f},{y(point):.1f}")
        if len(segment) > 1:
            out.append(f'<polyline points="{" ".join(segment)}" fill="none" stroke="{color}" stroke-width="2"/>')
        for i, point in enumerate(vs):
            if point is None:
                continue
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(point):.1f}" r="3.5" fill="{color}"><title>{escape(name)} '
                       f'{escape(runs[i])}: {point:.4f}</title></circle>')
            if (i, name) in ringed:
                out.append(f'<circle cx="{x(i):.1f}" cy="{y(point):.1f}" r="8" fill="none" stroke="{PALETTE[3]}" '
                           f'stroke-width="2.5"><title>real drop: {escape(name)} at {escape(runs[i])}</title></circle>')
        ly = top + 6 + s * 16
        out.append(f'<rect x="{left + plot_w + 12}" y="{ly}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{left + plot_w + 26}" y="{ly + 9}" class="legend">{escape(name[:22])}</text>')
    if drops:
        ly = top + 6 + len(series) * 16 + 6
        out.append(f'<circle cx="{left + plot_w + 17}" cy="{ly + 5}" r="6" fill="none" stroke="{PALETTE[3]}" '
                   f'stroke-width="2.5"/><text x="{left + plot_w + 26}" y="{ly + 9}" class="legend">real drop</text>')
    out.append("</svg>")
    return "".join(out)
