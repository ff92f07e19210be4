"""The geometry of the SVG charts (leaderboard.charts): positions, colours and labels computed here
by hand from the numbers given, never read back from the function under test."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from leaderboard import charts


def luminance(colour: str) -> float:
    """WCAG relative luminance, written out again for the test."""
    channels = []
    for start in (1, 3, 5):
        c = int(colour[start:start + 2], 16) / 255
        channels.append(c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4)
    return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_diverging_scale_runs_from_orange_through_white_to_purple() -> None:
    assert charts.diverging_colour(-1.0, -1.0, 1.0) == "#b35806"
    assert charts.diverging_colour(0.0, -1.0, 1.0) == "#f7f7f7"
    assert charts.diverging_colour(1.0, -1.0, 1.0) == "#542788"
    # Half-way between the classes #f7f7f7 (0) and #d8daeb (0.25): each channel the mean, rounded.
    red, green, blue = round((0xf7 + 0xd8) / 2), round((0xf7 + 0xda) / 2), round((0xf7 + 0xeb) / 2)
    assert charts.diverging_colour(0.125, -1.0, 1.0) == f"#{red:02x}{green:02x}{blue:02x}"
    assert charts.diverging_colour(7.0, -1.0, 1.0) == "#542788"  # outside the scale: its end
    with pytest.raises(ValueError, match="low < high"):
        charts.diverging_colour(0.0, 1.0, 1.0)


def test_every_cell_text_has_enough_contrast_on_its_colour() -> None:
    """WCAG asks 4.5:1 for small text; the heat map writes its values on every shade of the scale."""
    for value in np.linspace(-1, 1, 201):
        fill = charts.diverging_colour(float(value), -1.0, 1.0)
        assert contrast(fill, charts.ink_for(fill)) >= 4.5, (value, fill)


def test_series_never_differ_by_hue_alone_and_the_palette_is_okabe_ito() -> None:
    assert charts.SERIES_COLOURS[:3] == ("#0072B2", "#E69F00", "#009E73")
    styles = [charts.series_style(i) for i in range(28)]
    assert len({(style["colour"], style["dash"]) for style in styles}) == 28
    # Within one chart (at most seven curves) every curve has its own colour.
    assert len({style["colour"] for style in styles[:7]}) == 7


def test_heat_map_places_each_value_in_its_cell_with_its_colour_and_words() -> None:
    labels = ["A RSNOD", "A NMD", "JSD"]
    values = [[1.0, 0.5, -0.25], [0.5, 1.0, None], [-0.25, None, 1.0]]
    chart = charts.heat_map(labels, labels, values, row_titles=["one", "two", "three"], what="Kendall's tau",
                            notes=[["", "interval [0.1, 0.9]", ""], ["", "", ""], ["", "", ""]], cell=30)
    assert len(chart["cells"]) == 9
    left, top = chart["left"], chart["top"]
    for cell in chart["cells"]:
        i, j = cell["row"], cell["column"]
        assert (cell["x"], cell["y"]) == (left + 30 * j, top + 30 * i)
        value = values[i][j]
        assert cell["value"] == value
        if value is None:
            assert cell["fill"] == charts.MISSING_FILL and cell["text"] == "n/a"
        else:
            assert cell["fill"] == charts.diverging_colour(value, -1, 1)
            assert cell["text"] == f"{value:.2f}".replace("-", "−")
    first_row_second = next(c for c in chart["cells"] if (c["row"], c["column"]) == (0, 1))
    assert first_row_second["title"] == "one and A NMD: Kendall's tau = 0.500; interval [0.1, 0.9]"
    missing = next(c for c in chart["cells"] if (c["row"], c["column"]) == (1, 2))
    assert missing["title"] == "two and JSD: Kendall's tau undefined"
    # The longest row label decides the label column: 7 characters of 0.6 em at 11 px, plus 10.
    assert left == round(7 * 0.6 * 11 + 10)
    assert [tick["label"] for tick in chart["legend_ticks"]] == ["−1", "−0.5", "0", "0.5", "1"]
    assert [row["label"] for row in chart["table"]] == labels
    with pytest.raises(ValueError, match="3 x 3"):
        charts.heat_map(labels, labels, values[:2])


def test_wide_characters_count_one_em() -> None:
    assert charts.text_width("清华", 10) == 20
    assert charts.text_width("ab", 10) == 12


def test_thinned_keeps_exact_points_of_a_long_curve_with_both_ends() -> None:
    assert charts.thinned(5, 400).tolist() == [0, 1, 2, 3, 4]
    kept = charts.thinned(100_000, 400)
    assert len(kept) == 400 and kept[0] == 0 and kept[-1] == 99_999
    assert np.all(np.diff(kept) > 0)


def test_asl_chart_draws_each_sorted_p_value_at_its_pair() -> None:
    curve = [1 / 201, 1 / 201, 0.02, 0.3, 0.99]
    chart = charts.asl_chart([("A RSNOD", curve), ("JSD", [0.5, 0.6, 0.7, 0.8, 0.9])], levels=(0.05, 0.01))
    left, right, top, bottom = chart["left"], chart["right"], chart["top"], chart["bottom"]
    points = [tuple(map(float, point.split(","))) for point in chart["curves"][0]["points"].split()]
    assert len(points) == 5
    for k, ((x, y), p) in enumerate(zip(points, curve, strict=True)):
        assert x == pytest.approx(left + k / 4 * (right - left), abs=0.01)
        assert y == pytest.approx(bottom - p * (bottom - top), abs=0.01)
    assert [line["label"] for line in chart["references"]] == ["p = 0.05", "p = 0.01"]
    assert chart["references"][0]["y"] == pytest.approx(bottom - 0.05 * (bottom - top), abs=0.01)
    assert chart["x_label"] == "run pairs sorted by p-value (5 pairs)"
    assert [curve["colour"] for curve in chart["curves"]] == ["#0072B2", "#E69F00"]


def test_bar_chart_bars_are_as_long_as_their_share() -> None:
    chart = charts.bar_chart(["A", "B"], [("p < 0.05", [0.5, None]), ("p < 0.01", [1.0, 0.25])])
    left, right = chart["left"], chart["right"]
    bars = [bar for group in chart["groups"] for bar in group["bars"]]
    # Label by label, one bar per series.
    assert [bar["width"] for bar in bars] == [round((right - left) * share, 2) for share in (0.5, 1.0, 0, 0.25)]
    assert [bar["text"] for bar in bars] == ["50.0%", "100.0%", "n/a", "25.0%"]
    with pytest.raises(ValueError, match="one value per label"):
        charts.bar_chart(["A"], [("x", [0.1, 0.2])])


def test_scatter_puts_equal_values_on_the_diagonal_and_shapes_by_category() -> None:
    chart = charts.scatter([0.1, 0.2, 0.3], [0.1, 0.3, 0.2], labels=["d1", "d2", "d3"], categories=[2, 1, 0],
                           category_names=["first", "second", "equal"], x_label="a", y_label="b",
                           value_range=(0.0, 0.4))
    low, high = 0.0 - 0.012, 0.4 + 0.012  # 3% of the range added on each side
    inner = chart["inner"]
    for point, (x, y) in zip(chart["points"], [(0.1, 0.1), (0.2, 0.3), (0.3, 0.2)], strict=True):
        assert point["x"] == pytest.approx(chart["left"] + (x - low) / (high - low) * inner, abs=0.01)
        assert point["y"] == pytest.approx(chart["top"] + inner - (y - low) / (high - low) * inner, abs=0.01)
    diagonal = chart["points"][0]
    assert diagonal["x"] - chart["left"] == pytest.approx(chart["top"] + inner - diagonal["y"], abs=0.02)
    assert [point["shape"] for point in chart["points"]] == ["triangle", "square", "circle"]
    assert [(entry["name"], entry["count"]) for entry in chart["legend"]] == [("first", 1), ("second", 1), ("equal", 1)]


def test_ticks_are_round_numbers_inside_the_range() -> None:
    for low, high in itertools.product((0.0, 0.013, -1.0), (0.2, 0.415, 1.0)):
        ticks = charts._ticks(low, high)
        assert all(low - 1e-12 <= tick <= high + 1e-12 for tick in ticks)
        steps = {round(b - a, 12) for a, b in itertools.pairwise(ticks)}
        assert len(steps) == 1
        step = steps.pop()
        assert any(math.isclose(step, factor * 10 ** math.floor(math.log10(step)), rel_tol=1e-9)
                   for factor in (1, 2, 2.5, 5))
