"""``mend sweep timm|torchvision|torchaudio|diffusers``: each library's enumeration (names
unique, a modality each, skipped rows with reasons), one tiny model per library built, one
captured end to end through the CLI, and the one-line error when the library is missing."""

from __future__ import annotations

import importlib
import sys

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app
from graphmend.core.tables import SWEEP_BREAKS, SWEEP_CLEAN, SweepReport

LIBS = {"timm": "graphmend.sweep.timm_models", "torchvision": "graphmend.sweep.torchvision_models",
        "torchaudio": "graphmend.sweep.torchaudio_models", "diffusers": "graphmend.sweep.diffusers_models"}
# the cheapest model of each library, and one its enumeration must hold
CHEAP = {"timm": "test_resnet", "torchvision": "squeezenet1_1", "torchaudio": "DeepSpeech",
         "diffusers": "AutoencoderTiny"}
EXPECT = {"timm": ("convnext_atto", "resnet50"), "torchvision": ("fasterrcnn_resnet50_fpn", "quantized_resnet18"),
          "torchaudio": ("Tacotron2", "wav2vec2_base"), "diffusers": ("scheduler:DDIMScheduler", "AutoencoderKLWan")}


@pytest.mark.parametrize("library", sorted(LIBS))
def test_enumeration_names_models_with_a_modality(library):
    pytest.importorskip(library)
    lib = importlib.import_module(LIBS[library])
    models, skipped = lib.enumerate_models()
    assert models and len(models) == len(set(models)) and not set(models) & set(skipped)
    assert all(skipped.values()) and lib.SELECTION
    kept, left_out = EXPECT[library]
    assert kept in models and left_out in skipped
    assert CHEAP[library] in models
    assert {lib.modality(m) for m in models} <= {"image", "video", "audio", "text-to-speech"}
    if library == "torchvision":
        assert lib.modality("r3d_18") == "video" and lib.modality("raft_small") == "video"


def test_timm_runs_the_smallest_variant_of_each_family():
    pytest.importorskip("timm")
    from graphmend.sweep.timm_models import enumerate_models

    models, skipped = enumerate_models()
    assert "convnext_atto" in models and "convnext_large" in skipped and "resnet18" in skipped
    assert "(convnext_atto runs)" in skipped["convnext_base"]


@pytest.mark.parametrize("library", ["timm", "torchvision", "diffusers"])
def test_cheapest_model_builds_with_inputs_its_forward_takes(library):
    pytest.importorskip(library)
    import torch

    model, args, kwargs = importlib.import_module(LIBS[library]).target(CHEAP[library])
    assert isinstance(model, torch.nn.Module) and not model.training
    with torch.no_grad():
        out = model(*args, **kwargs)
    assert out is not None


def test_sweep_captures_a_torchaudio_model_end_to_end(tmp_path):
    pytest.importorskip("torchaudio")
    out = tmp_path / "sweep.json"
    got = CliRunner().invoke(app, ["sweep", "torchaudio", "--only", "DeepSpeech", "--modes", "eval", "-q",
                                   "--timeout", "240", "-f", "json", "-o", str(out)])
    assert got.exit_code == 0, got.output
    rep = SweepReport.from_json(out.read_text(encoding="utf-8"))
    assert rep.library == "torchaudio" and [(r.model, r.run_mode) for r in rep.rows] == [("DeepSpeech", "eval")]
    assert all(r.status in (SWEEP_CLEAN, SWEEP_BREAKS) and r.graph_count >= 1 for r in rep.rows), rep.rows


@pytest.mark.parametrize("library", sorted(LIBS))
def test_library_not_installed_is_one_line_naming_the_pip_install(library, monkeypatch):
    monkeypatch.setitem(sys.modules, library, None)  # import raises ImportError
    got = CliRunner().invoke(app, ["sweep", library, "-q"])
    assert got.exit_code == 2, got.output
    lines = [ln for ln in got.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"pip install {library}" in lines[0], got.output
