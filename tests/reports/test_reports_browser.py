"""The HTML report in a real browser: headless Chromium loads the file, dumps the DOM, screenshots it.

Without Chromium the test fails when CI is set (``.ci/run`` installs it) and skips elsewhere.
``MEND_UPDATE_GOLDEN=1`` also refreshes docs/screenshots/report.png.
"""

from __future__ import annotations

import dataclasses
import html as html_lib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from graphmend.core.model import Report
from reports import render

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "fixtures" / "reports" / "sample_report.json"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    message = "headless Chromium not found: install it (apt-get install -y --no-install-recommends chromium)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    browser = _chromium()
    tmp = tmp_path_factory.mktemp("browser")
    report = Report.from_json(SAMPLE.read_text(encoding="utf-8"))
    html = tmp / "report.html"
    html.write_text(render(report, "html"), encoding="utf-8")
    base = [browser, *FLAGS, f"--user-data-dir={tmp / 'profile'}"]
    dom = subprocess.run([*base, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = tmp / "report.png"
    proc = subprocess.run([*base, f"--screenshot={shot}", "--window-size=1280,2000", html.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    return report, dom.stdout, shot


def test_rendered_dom_has_targets_breaks_and_charts(page):
    report, dom, _ = page
    assert "<svg" in dom and "</main>" in dom
    for t in report.targets:
        assert f'data-target="{t.name}"' in dom  # one graph bar per target, parsed as SVG
        assert t.name in dom
    for loc in ("models/gate.py:18:12", "models/gate.py:21:9", "models/loop.py:9:17"):
        assert loc in dom
    assert len(re.findall(r'<svg class="graph-bar"', dom)) == len(report.targets)
    assert len(re.findall(r'<g class="break-marker"', dom)) == 2  # gate: 3 graphs, 2 counted breaks
    timed = [b for b in report.bench if b.median_ms is not None]
    assert len(re.findall(r'<svg class="bench-chart"', dom)) == 2
    assert len(re.findall(r'<rect class="bench-bar"', dom)) == len(timed)
    assert "&lt;not traceable&gt;" in dom  # escaped text stays text in the browser


def test_screenshot(page):
    _, _, shot = page
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    if os.environ.get("MEND_UPDATE_GOLDEN") == "1":
        target = ROOT / "docs" / "screenshots" / "report.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target)


# what the page reports back: every break label's box as the browser laid it out
_BOXES = """<script>
window.addEventListener("load", () => {
  const boxes = [...document.querySelectorAll("svg.graph-bar")].map(svg =>
    [...svg.querySelectorAll("text.break-label")].map(t => {
      const r = t.getBoundingClientRect();
      return [r.left, r.top, r.right, r.bottom];
    }));
  const svgs = [...document.querySelectorAll("svg.graph-bar")].map(s => {
    const r = s.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  });
  document.body.setAttribute("data-boxes", JSON.stringify({labels: boxes, svgs: svgs}));
});
</script>"""


def _crowded_report() -> Report:
    """A Longformer / Switch Transformers shape: one big graph, then many small ones, so a dozen
    break markers fall within a narrow strip of the bar."""
    report = Report.from_json(SAMPLE.read_text(encoding="utf-8"))
    t = report.targets[0]
    template = next(b for b in t.breaks if b.counted)
    n = 14
    t.graph_count, t.graph_break_count = n, n - 1
    t.ops_per_graph = [400] + [1] * (n - 1)
    t.breaks = [dataclasses.replace(template, line=100 + 7 * i, rule=("GM101", "GM301", "GM502")[i % 3])
                for i in range(n - 1)]
    report.targets = [t]
    return report


def test_break_labels_of_a_crowded_bar_do_not_overlap(tmp_path):
    browser = _chromium()
    html = tmp_path / "crowded.html"
    html.write_text(render(_crowded_report(), "html").replace("</body>", _BOXES + "</body>"), encoding="utf-8")
    dom = subprocess.run([browser, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000",
                          "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-boxes="([^"]*)"', dom.stdout)
    assert found, dom.stdout[-2000:]
    data = json.loads(html_lib.unescape(found.group(1)))
    (labels,), (svg,) = data["labels"], data["svgs"]
    assert len(labels) == 13
    for i, a in enumerate(labels):
        assert svg[0] - 0.5 <= a[0] and a[2] <= svg[2] + 0.5 and a[3] <= svg[3] + 0.5, (a, svg)  # inside the chart
        for b in labels[i + 1:]:
            overlap = a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
            assert not overlap, (a, b)
