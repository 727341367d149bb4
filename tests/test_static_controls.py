"""Tests of repro.static_controls: sliders over precomputed figures for kernel-free HTML."""

import base64
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from repro.static_controls import FrameSlider, frame_slider_html, precompute_frames  # noqa: E402


def _draw(a, b):
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, a * b])
    return fig


@pytest.mark.slow
def test_one_frame_per_combination_and_all_embedded():
    controls = {"a": [1, 2, 3], "b": [1, 2]}
    frames = precompute_frames(_draw, controls)
    assert list(frames) == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]
    page = frame_slider_html(frames, controls)
    embedded = set(re.findall(r'"([0-9]\|[0-9])": "([A-Za-z0-9+/=]+)"', page))
    assert {k for k, _ in embedded} == {"1|1", "1|2", "2|1", "2|2", "3|1", "3|2"}
    # Each embedded frame decodes to the PNG of its combination.
    for key, data in embedded:
        a, b = map(int, key.split("|"))
        assert base64.b64decode(data) == frames[(a, b)]
    assert page.count('type="range"') == 2
    assert "http://" not in page and "https://" not in page  # nothing to fetch from a network


def test_slider_starts_on_first_values():
    controls = {"a": [5, 6], "b": [1]}
    page = FrameSlider(_draw, controls, caption="cap")._repr_html_()
    assert 'data-key="5|1"' in page and "<em>cap</em>" in page


def test_missing_frames_and_empty_controls_raise():
    allowed = r"allowed: a mapping of at least one control name to at least one value each\.$"
    with pytest.raises(ValueError, match=r"^parameter 'controls': got \{\}; " + allowed):
        precompute_frames(_draw, {})
    with pytest.raises(ValueError, match=r"^parameter 'controls': got no value for control 'a'; " + allowed):
        precompute_frames(_draw, {"a": []})
    with pytest.raises(
        ValueError,
        match=r"^parameter 'frames': got no frame for 2; allowed: a frame for every combination of control values\.$",
    ):
        frame_slider_html({(1,): b"png"}, {"a": [1, 2]})
