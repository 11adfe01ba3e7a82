"""Line charts as inline SVG text: the figures of `relreason report`'s page, which must show with no
network and no JavaScript (matplotlib stays optional: relreason.runs.plot).

    svg = line_chart([Series("mpnn seed 0", [(0, 0.1), (1600, 0.5), (3200, 0.8)])],
                     title="bellman_ford", xlabel="training examples", ylabel="validation score (%)", scale=100)

Every chart is one `<svg>` element (role="img", its title as `<title>`), a polyline per series with a
dot per point, axes with ticks, and a legend under the plot; the same input gives the same text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

# matplotlib's tab10: distinct for the handful of lines a chart holds, readable on white
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
WIDTH, PLOT_HEIGHT = 560, 260  # px; the legend adds a line per two series below the plot
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 16, 28, 44  # room for tick labels and axis titles
LEGEND_LINE = 16


@dataclass(frozen=True)
class Series:
    """One line: its legend label and its (x, y) points, in the order drawn."""

    label: str
    points: list[tuple[float, float]]


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round values spanning [lo, hi] (steps of 1, 2 or 5 x 10^k)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _number(v: float) -> str:
    """A tick label: 320000 -> 320k, 1.5e6 -> 1.5M, 0.25 -> 0.25."""
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def line_chart(series: list[Series], *, title: str, xlabel: str, ylabel: str, scale: float = 1.0,
               log2x: bool = False) -> str:
    """An SVG line chart of `series` (y multiplied by `scale`, e.g. 100 for percent); `log2x`: a log2 x axis
    ticked at every x of the data (graph sizes). Series without points are left out of the plot (kept in
    the legend, marked "no points")."""
    drawn = [s for s in series if s.points]
    xs = [x for s in drawn for x, _ in s.points] or [0.0, 1.0]
    ys = [y * scale for s in drawn for _, y in s.points] or [0.0, 1.0]
    fx = (lambda x: math.log2(x)) if log2x else (lambda x: x)
    x_lo, x_hi = fx(min(xs)), fx(max(xs))
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = min(ys), max(ys)
    pad = (y_hi - y_lo) * 0.05 or 1.0
    y_lo, y_hi = y_lo - pad, y_hi + pad
    left, top = MARGIN_LEFT, MARGIN_TOP
    plot_w, plot_h = WIDTH - MARGIN_LEFT - MARGIN_RIGHT, PLOT_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def px(x: float) -> float:
        return left + (fx(x) - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y * scale - y_lo) / (y_hi - y_lo)) * plot_h

    legend_rows = (len(series) + 1) // 2
    height = PLOT_HEIGHT + legend_rows * LEGEND_LINE + 4
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" data-series="{len(drawn)}">',
           f"<title>{escape(title)}</title>",
           f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="{WIDTH / 2:.1f}" y="16" text-anchor="middle" class="chart-title">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    x_ticks = sorted(set(xs)) if log2x else _ticks(min(xs), max(xs))
    for t in x_ticks:
        x = px(t)
        if left - 0.5 <= x <= left + plot_w + 0.5:
            out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#eee"/>')
            out.append(f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{_number(t)}</text>')
    for t in _ticks(y_lo, y_hi):
        y = top + (1 - (t - y_lo) / (y_hi - y_lo)) * plot_h
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{_number(round(t, 6))}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 32}" text-anchor="middle">'
               f'{escape(xlabel)}</text>')
    out.append(f'<text transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f'{escape(ylabel)}</text>')
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        if s.points:
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}">'
                       f"<title>{escape(s.label)}</title></polyline>")
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2" fill="{colour}"/>' for x, y in s.points]
        lx = left + (i % 2) * (plot_w / 2)
        ly = PLOT_HEIGHT + (i // 2) * LEGEND_LINE + 8
        out.append(f'<rect x="{lx:.1f}" y="{ly - 8}" width="12" height="3" fill="{colour}"/>')
        out.append(f'<text x="{lx + 16:.1f}" y="{ly - 3}">{escape(s.label)}{"" if s.points else " (no points)"}'
                   "</text>")
    out.append("</svg>")
    return "\n".join(out)


__all__ = ["Series", "line_chart", "PALETTE"]
