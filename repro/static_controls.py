"""Controls that work in a static HTML page with no kernel and no network: sliders over precomputed figures."""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
import uuid
from collections.abc import Callable, Mapping, Sequence

from fedlib._validate import ParameterError

__all__ = ["figure_to_png", "precompute_frames", "frame_slider_html", "FrameSlider"]


def figure_to_png(fig, *, dpi: int = 80) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def precompute_frames(draw: Callable[..., object], controls: Mapping[str, Sequence], *, dpi: int = 80) -> dict:
    """Call ``draw(**values)`` (which returns a matplotlib figure) for every combination of control values.

    Returns ``{tuple(values): png_bytes}`` in the order of ``itertools.product`` over ``controls``.
    """
    names = list(controls)
    allowed = "a mapping of at least one control name to at least one value each"
    if not names:
        raise ParameterError(None, "controls", controls, allowed)
    for name, values in controls.items():
        if len(values) == 0:
            raise ParameterError(None, "controls", controls, allowed, got=f"no value for control {name!r}")
    return {
        combo: figure_to_png(draw(**dict(zip(names, combo))), dpi=dpi)
        for combo in itertools.product(*(list(controls[n]) for n in names))
    }


def frame_slider_html(frames: Mapping[tuple, bytes], controls: Mapping[str, Sequence], *, caption: str = "") -> str:
    """Self-contained HTML: one range slider per control and an <img> swapped by inline JavaScript.

    Every frame is embedded as a base64 PNG, so the page needs neither a kernel nor a network.
    """
    names = list(controls)
    values = {n: [str(v) for v in controls[n]] for n in names}
    keys = {"|".join(str(v) for v in combo): base64.b64encode(png).decode("ascii") for combo, png in frames.items()}
    missing = [k for k in map("|".join, itertools.product(*values.values())) if k not in keys]
    if missing:
        allowed = "a frame for every combination of control values"
        raise ParameterError(None, "frames", frames, allowed, got=f"no frame for {', '.join(missing[:3])}")
    uid = "fs" + uuid.uuid4().hex[:8]
    rows = "".join(
        f'<div style="margin:2px 0"><label style="display:inline-block;min-width:9em">{html.escape(n)}</label>'
        f'<input type="range" min="0" max="{len(values[n]) - 1}" value="0" step="1" data-name="{html.escape(n)}" '
        f'class="{uid}-in" style="vertical-align:middle;width:16em"> '
        f'<span class="{uid}-out" data-name="{html.escape(n)}">{html.escape(values[n][0])}</span></div>'
        for n in names
    )
    first = "|".join(values[n][0] for n in names)
    script = f"""
<script>
(function() {{
  var frames = {json.dumps(keys)};
  var values = {json.dumps(values)};
  var names = {json.dumps(names)};
  var root = document.getElementById("{uid}");
  function redraw() {{
    var key = names.map(function(n) {{
      var el = root.querySelector('input[data-name="' + n + '"]');
      var v = values[n][parseInt(el.value)];
      root.querySelector('span[data-name="' + n + '"]').textContent = v;
      return v;
    }}).join("|");
    root.querySelector("img").src = "data:image/png;base64," + frames[key];
    root.setAttribute("data-key", key);
  }}
  root.querySelectorAll("input").forEach(function(el) {{ el.addEventListener("input", redraw); }});
}})();
</script>"""
    cap = f"<p><em>{html.escape(caption)}</em></p>" if caption else ""
    return (
        f'<div id="{uid}" class="fedlib-frame-slider" data-key="{html.escape(first)}">{rows}'
        f'<img alt="figure" style="max-width:100%" src="data:image/png;base64,{keys[first]}">{cap}</div>{script}'
    )


class FrameSlider:
    """Displays as the static slider in a notebook or book page (``_repr_html_``)."""

    def __init__(
        self, draw: Callable[..., object], controls: Mapping[str, Sequence], *, caption: str = "", dpi: int = 80
    ):
        self.controls = {k: list(v) for k, v in controls.items()}
        self.frames = precompute_frames(draw, self.controls, dpi=dpi)
        self.caption = caption

    def _repr_html_(self) -> str:
        return frame_slider_html(self.frames, self.controls, caption=self.caption)
