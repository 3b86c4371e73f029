"""Paint a laid-out ``picture`` as SVG (and PNG through rsvg-convert when installed).

The SVG structure is part of the contract the tests check: the root ``<svg>``
has ``width``/``height``/``viewBox``; every box is a ``<g class="box KIND">``
holding its ``<rect>``, its label ``<text>`` and its children; every CPU is
exactly one ``<g class="pu" data-cpu="N">`` and every device exactly one
``<g class="device" data-device="ID">``, each with a ``<title>`` tooltip. The
legend is ``<g class="legend">``.

Colours: lstopo's neutral boxes for the hardware; on top, CPUs filled by pool
(reserve, share, reclaim, named pools) or, for dedicated allocations, in the
allocation colour with the pod's name; a heat bar across the top of each
pool's CPUs from green (idle) through yellow to red (pressure ratio >= 1);
devices filled by resource, with a red border when unhealthy.
"""

from __future__ import annotations

import shutil
import subprocess
from xml.sax.saxutils import escape, quoteattr

from agent.topology.overlay import Overlay
from agent.topology.picture import Box, Scale, layout

__all__ = ["PngUnavailable", "render_png", "render_svg"]

HW_FILL = {
    "machine": ("#ffffff", "#505050"),
    "dgroup": ("#fbfbfb", "#9a9a9a"),
    "package": ("#f2ecd8", "#8a7a4a"),
    "die": ("#ebe4f2", "#7a6a8a"),
    "numa": ("#e3eedb", "#5f7f4f"),
    "llc": ("#ffffff", "#a0a0a0"),
    "cluster": ("#f3f3f3", "#8f8f8f"),
    "compute_unit": ("#f3f3f3", "#8f8f8f"),
    "core": ("#d6d6d6", "#7a7a7a"),
    "pu": ("#ffffff", "#606060"),
    "io": ("#eef2f7", "#7f8fa0"),
    "device": ("#ffffff", "#607080"),
}
POOL_FILL = {"reserve": "#c7b6dc", "share": "#9fc8ea", "reclaim": "#a9d8a3"}
NAMED_POOL_FILLS = ("#f6d08a", "#f0a8c8", "#9ed9d0", "#d9c39a", "#b9c7f0", "#e3b2e8")
DEDICATED_FILL = "#f3915f"
RESOURCE_FILLS = ("#ffd27f", "#a6d8ff", "#c6f0b0", "#f5b6d9", "#d2c4ff", "#ffe0b0", "#b8ece4", "#e8d0a8")
UNHEALTHY = "#d62728"


def heat(pressure: float) -> str:
    """Green (0) -> yellow (0.5) -> red (>= 1)."""
    p = max(0.0, min(1.0, pressure))
    if p < 0.5:
        r, g = int(80 + 350 * p), 190
    else:
        r, g = 255, int(190 - 300 * (p - 0.5))
    return f"#{min(r, 255):02x}{max(g, 0):02x}40"


class _Palette:
    def __init__(self, overlay: Overlay) -> None:
        named = sorted({p.name for p in overlay.pools if p.kind == "named"})
        self.pool = dict(POOL_FILL)
        self.pool.update({n: NAMED_POOL_FILLS[i % len(NAMED_POOL_FILLS)] for i, n in enumerate(named)})
        resources = sorted({d.resource for d in overlay.devices})
        self.resource = {r: RESOURCE_FILLS[i % len(RESOURCE_FILLS)] for i, r in enumerate(resources)}

    def pool_fill(self, name: str, kind: str) -> str:
        return self.pool.get(name) or self.pool.get(kind, "#ffffff")


def _text(x: float, y: float, s: str, size: float, *, weight: str = "normal", anchor: str = "start",
          fill: str = "#202020", cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    w = f' font-weight="{weight}"' if weight != "normal" else ""
    a = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:.1f}"{w}{a} fill="{fill}"{c}>{escape(s)}</text>'


def _fit(s: str, width: float, size: float) -> str:
    """Cut ``s`` with an ellipsis to what fits ``width`` px at font ``size``."""
    room = max(1, int(width / (size * 0.6)))
    return s if len(s) <= room else s[: max(1, room - 1)] + "…"


def _paint(box: Box, s: Scale, pal: _Palette, out: list[str]) -> None:
    if box.kind == "pu":
        _paint_pu(box, s, pal, out)
        return
    if box.kind == "device":
        _paint_device(box, s, pal, out)
        return
    fill, stroke = HW_FILL.get(box.kind, ("#ffffff", "#808080"))
    attrs = f' data-numa="{box.numa}"' if box.kind == "numa" and box.numa is not None else ""
    out.append(f'<g class="box {box.kind}"{attrs}>')
    if box.kind == "numa" and box.tooltip:
        out.append(f"<title>{escape(box.tooltip)}</title>")
    dash = ' stroke-dasharray="4 3"' if box.kind in ("dgroup", "cluster", "compute_unit") else ""
    out.append(
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="3" '
        f'fill="{fill}" stroke="{stroke}"{dash}/>'
    )
    size = s.font if box.kind != "core" else s.font - 1.5
    head = box.label + (f"  {box.detail}" if box.detail and box.kind != "core" else "")
    weight = "bold" if box.kind in ("machine", "package", "numa") else "normal"
    out.append(_text(box.x + s.pad, box.y + size + 2, _fit(head, box.w - 2 * s.pad, size), size, weight=weight))
    for c in box.children:
        _paint(c, s, pal, out)
    out.append("</g>")


def _paint_pu(box: Box, s: Scale, pal: _Palette, out: list[str]) -> None:
    fill, stroke = HW_FILL["pu"]
    data = [f'data-cpu="{box.cpu}"']
    label2 = ""
    pools = box.pools or ((box.pool,) if box.pool is not None else ())
    if box.allocation is not None:
        fill = DEDICATED_FILL
        data.append(f"data-pod={quoteattr(box.allocation.pod)}")
        label2 = box.allocation.pod.rsplit("/", 1)[-1]
    elif pools:
        fill = pal.pool_fill(pools[0].name, pools[0].kind)
        label2 = "+".join(p.name for p in pools)
    if pools:
        # space-separated, as an HTML class list: a CPU two pools share names both
        data.append(f"data-pool={quoteattr(' '.join(p.name for p in pools))}")
    out.append(f'<g class="pu" id="pu-{box.cpu}" {" ".join(data)}>')
    out.append(f"<title>{escape(box.tooltip)}</title>")
    out.append(
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="2" '
        f'fill="{fill}" stroke="{stroke}"/>'
    )
    if box.allocation is None and len(pools) > 1:
        # the other pools' colours as stripes across the box: the CPU is drawn in every pool that holds it
        w = (box.w - 2) / len(pools)
        for i, p in enumerate(pools[1:], start=1):
            out.append(f'<rect class="shared-pool" x="{box.x + 1 + i * w:.1f}" y="{box.y + 1:.1f}" '
                       f'width="{w:.1f}" height="{box.h - 2:.1f}" fill="{pal.pool_fill(p.name, p.kind)}"/>')
    if box.pool is not None and box.pool.pressure is not None:
        out.append(
            f'<rect class="heat" x="{box.x + 1:.1f}" y="{box.y + 1:.1f}" width="{box.w - 2:.1f}" height="4" '
            f'fill="{heat(box.pool.pressure)}"/>'
        )
    cx = box.x + box.w / 2
    out.append(_text(cx, box.y + s.font + 5, box.label, s.font + 0.5, weight="bold", anchor="middle"))
    if label2:
        out.append(_text(cx, box.y + box.h - 4, _fit(label2, box.w - 2, s.font - 2.5), s.font - 2.5, anchor="middle",
                         fill="#303030"))
    out.append("</g>")


def _paint_device(box: Box, s: Scale, pal: _Palette, out: list[str]) -> None:
    d = box.device
    assert d is not None
    fill, stroke, width = HW_FILL["device"][0], HW_FILL["device"][1], 1.0
    mark = d.mark
    lines = [box.label, box.detail, ""]
    if mark is not None:
        fill = pal.resource.get(mark.resource, fill)
        if not mark.healthy:
            stroke, width = UNHEALTHY, 2.5
        state = ("✗ unhealthy " if not mark.healthy else "") + (f"→ {mark.pod}" if mark.pod else "")
        lines[2] = f"{mark.resource}  {state}".strip()
    safe = "".join(ch if ch.isalnum() else "-" for ch in d.id)
    out.append(f'<g class="device" id="dev-{safe}" data-device={quoteattr(d.id)}>')
    out.append(f"<title>{escape(box.tooltip)}</title>")
    out.append(
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="4" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>'
    )
    size = s.font - 0.5
    for i, line in enumerate(lines):
        if line:
            out.append(_text(box.x + 4, box.y + 3 + size * (i + 1) + 2 * i, _fit(line, box.w - 8, size), size,
                             weight="bold" if i == 0 else "normal",
                             fill=UNHEALTHY if i == 2 and mark is not None and not mark.healthy else "#202020"))
    out.append("</g>")


def _legend(overlay: Overlay, pal: _Palette, s: Scale, width: float) -> tuple[list[str], float]:
    """Swatches for what is coloured: pools (with pressure), dedicated, resources."""
    entries: list[tuple[str, str, str | None]] = []  # (fill, text, heat)
    for p in overlay.pools:
        pressure = "" if p.pressure is None else f", pressure {p.pressure:.2f}"
        entries.append((pal.pool_fill(p.name, p.kind), f"pool {p.name} ({p.kind}): {len(p.cpus)} CPUs{pressure}",
                        None if p.pressure is None else heat(p.pressure)))
    if overlay.allocations:
        pods = len({a.pod for a in overlay.allocations})
        cpus = sum(len(a.cpus) for a in overlay.allocations)
        entries.append((DEDICATED_FILL, f"dedicated: {cpus} CPUs to {pods} pod{'s' if pods != 1 else ''}", None))
    for r, fill in pal.resource.items():
        ds = [d for d in overlay.devices if d.resource == r]
        bad = sum(1 for d in ds if not d.healthy)
        used = sum(1 for d in ds if d.pod)
        entries.append((fill, f"{r}: {len(ds)} devices, {used} allocated" + (f", {bad} unhealthy" if bad else ""), None))
    if not entries:
        return [], 0.0
    out = ['<g class="legend">']
    x, y, row = s.pad, s.pad, s.font + 8
    for fill, text, hot in entries:
        w = 22 + len(text) * s.font * 0.6 + 16
        if x > s.pad and x + w > width:
            x, y = s.pad, y + row
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="16" height="{s.font + 3:.1f}" fill="{fill}" stroke="#606060"/>')
        if hot:
            out.append(f'<rect class="heat" x="{x + 1:.1f}" y="{y + 1:.1f}" width="14" height="4" fill="{hot}"/>')
        out.append(_text(x + 22, y + s.font + 1, text, s.font))
        x += w
    out.append("</g>")
    return out, y + row + s.pad


def render_svg(root: Box, overlay: Overlay | None = None, scale: Scale | None = None, note: str = "") -> str:
    overlay = overlay or Overlay()
    s = scale or Scale()
    width, height = layout(root, s)
    pal = _Palette(overlay)
    legend, legend_h = _legend(overlay, pal, s, width)
    top = legend_h + (s.font + 8 if note else 0)
    body: list[str] = []
    _paint(root, s, pal, body)
    total_w, total_h = width + 2 * s.pad, height + top + 2 * s.pad
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
        f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f"<title>{escape(root.label + ' — ' + root.detail)}</title>",
        f'<rect x="0" y="0" width="{total_w:.0f}" height="{total_h:.0f}" fill="#ffffff"/>',
        *legend,
    ]
    if note:
        out.append(_text(s.pad, legend_h + s.font + 2, note, s.font, fill="#505050", cls="note"))
    out.append(f'<g class="machine-picture" transform="translate({s.pad:.0f},{top + s.pad:.0f})">')
    out.extend(body)
    out.append("</g></svg>")
    return "\n".join(out) + "\n"


class PngUnavailable(RuntimeError):
    """No SVG rasteriser installed."""


def render_png(svg: str) -> bytes:
    """PNG through ``rsvg-convert`` (Debian librsvg2-bin), the one renderer this relies on."""
    tool = shutil.which("rsvg-convert")
    if tool is None:
        raise PngUnavailable("PNG needs rsvg-convert (apt-get install librsvg2-bin); --format svg works without it")
    done = subprocess.run([tool, "--format", "png"], input=svg.encode(), capture_output=True, timeout=120)
    if done.returncode != 0:
        raise PngUnavailable(f"rsvg-convert failed: {done.stderr.decode(errors='replace').strip()[:200]}")
    return done.stdout
