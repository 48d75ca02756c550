"""``mend sweep``: the aggregation (root causes with fan-out, fixability, baseline changes)
on synthetic results without torch, the renderers on a small report, and one real sweep of
three transformers architectures in eval and train (bert, xlm, which breaks, and vit, which
is no text model and does not build on token ids), whose counts must be those of
``mend analyze`` of the generated targets."""

from __future__ import annotations

import gzip
import json

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app
from graphmend.core.model import Break, Report, TargetResult
from graphmend.core.tables import SWEEP_BREAKS, SWEEP_CLEAN, SWEEP_FAILED, SWEEP_NOT_BUILT, SweepReport
from graphmend.sweep.stage import aggregate, compare, totals

SP = "/env/lib/python3.11/site-packages/transformers/models"


def _brk(file: str, line: int, rule: str = "GM301", src: str = "assert lengths.max().item() <= slen",
         occurrences: int = 1) -> Break:
    return Break(rule=rule, category="host-scalar", reason="Unsupported Tensor.item() call", gb_type="Unsupported Tensor.item() call",
                 file=file, line=line, source_line="        " + src, occurrences=occurrences)


def _synthetic() -> tuple[Report, dict[str, str]]:
    """xlm and flaubert hit one copied line (two files); flaubert also a print; bert is clean;
    one not built, one failed."""
    rep = Report(targets=[
        TargetResult(name="hf_bert.py::mend_target_bert", file="hf_bert.py", function="mend_target_bert",
                     graph_count=1),
        TargetResult(name="hf_xlm.py::mend_target_xlm", file="hf_xlm.py", function="mend_target_xlm",
                     graph_count=2, graph_break_count=1, breaks=[_brk(f"{SP}/xlm/modeling_xlm.py", 793, occurrences=2)]),
        TargetResult(name="hf_xlm.py::mend_target_xlm", file="hf_xlm.py", function="mend_target_xlm", run_mode="train",
                     graph_count=2, graph_break_count=1, breaks=[_brk(f"{SP}/xlm/modeling_xlm.py", 793)]),
        TargetResult(name="hf_flaubert.py::mend_target_flaubert", file="hf_flaubert.py", function="mend_target_flaubert",
                     graph_count=3, graph_break_count=2,
                     breaks=[_brk(f"{SP}/flaubert/modeling_flaubert.py", 640),
                             _brk(f"{SP}/flaubert/modeling_flaubert.py", 700, rule="GM201", src="print(x)")]),
        TargetResult(name="hf_vit.py::mend_target_vit", file="hf_vit.py", function="mend_target_vit",
                     error="hf_vit.py::mend_target_vit: calling mend_target_vit() raised NotBuilt: eager forward: "
                           "TypeError: forward() got an unexpected keyword argument 'input_ids'"),
        TargetResult(name="hf_big.py::mend_target_big", file="hf_big.py", function="mend_target_big",
                     error="hf_big.py::mend_target_big: timed out after 240 s"),
    ])
    from graphmend.correlate import diagnose

    diagnose(rep, read_sources=False)
    model_of = {t.name: t.function[len("mend_target_"):] for t in rep.targets}
    return rep, model_of


def _sweep() -> SweepReport:
    rep, model_of = _synthetic()
    out = SweepReport(library="transformers", library_version="5.x", run_modes=["eval", "train"])
    aggregate(out, rep, model_of, ["bert", "xlm", "flaubert", "vit", "big"])
    return out


def test_root_causes_are_deduplicated_with_their_fan_out():
    out = _sweep()
    top = out.causes[0]
    # one line copied into two files, hit by two models in three runs: one cause, counted once
    assert (top.rule, top.models, sorted(top.modes)) == ("GM301", ["xlm", "flaubert"], ["eval", "train"])
    assert top.sites == ["transformers/models/flaubert/modeling_flaubert.py:640", "transformers/models/xlm/modeling_xlm.py:793"]
    assert (top.breaks, top.fan_out) == (3, 4)
    assert top.fix == "safe"  # GM301 has a fix family
    assert [c.rule for c in out.causes] == ["GM301", "GM201"]
    by = {(r.model, r.run_mode): r for r in out.rows}
    assert [r.model for r in out.rows] == ["bert", "xlm", "xlm", "flaubert", "vit", "big"]
    assert by["bert", "eval"].status == SWEEP_CLEAN
    assert by["xlm", "train"].status == SWEEP_BREAKS and by["xlm", "train"].causes == [0]
    assert by["flaubert", "eval"].causes == [0, 1]
    assert by["vit", "eval"].status == SWEEP_NOT_BUILT and by["vit", "eval"].why.startswith("eager forward: TypeError")
    assert by["big", "eval"].status == SWEEP_FAILED and by["big", "eval"].why == "timed out after 240 s"
    t = out.totals
    assert (t.enumerated, t.built, t.not_built, t.runs, t.causes, t.breaks) == (5, 4, 1, 6, 2, 4)
    assert t.by_mode["eval"] == {SWEEP_CLEAN: 1, SWEEP_BREAKS: 2, SWEEP_FAILED: 1, SWEEP_NOT_BUILT: 1}
    assert t.by_mode["train"][SWEEP_BREAKS] == 1


def test_a_cause_whose_sites_the_planner_refuses_is_advice_with_the_planners_reason():
    rep, model_of = _synthetic()
    for i in rep.issues:  # as plan_issues leaves them: xlm's copy planned, flaubert's refused
        if i.rule == "GM301":
            i.fix, i.fix_why = ("safe", "") if "xlm" in i.file else (None, "`n` reaches Python control flow")
        else:
            i.fix, i.fix_why = None, "the call shares a line with other code"
    out = SweepReport(library="transformers", run_modes=["eval", "train"])
    aggregate(out, rep, model_of, ["bert", "xlm", "flaubert", "vit", "big"])
    by = {c.rule: c for c in out.causes}
    assert (by["GM301"].fix, by["GM301"].fix_why) == ("safe", "")  # the best any of its sites has
    assert (by["GM201"].fix, by["GM201"].fix_why) == ("advice", "the call shares a line with other code")


def test_baseline_regressions_and_improvements():
    before, now = _sweep(), _sweep()
    by = {(r.model, r.run_mode): r for r in before.rows}
    by["xlm", "eval"].status, by["xlm", "eval"].graph_count = SWEEP_CLEAN, 1  # was one graph
    by["bert", "eval"].graph_count = 0  # fewer graphs before: bert now has more
    by["flaubert", "eval"].status, by["flaubert", "eval"].graph_count = SWEEP_CLEAN, 3
    by["big", "eval"].status = SWEEP_CLEAN  # ran before, times out now
    now.rows = [r for r in now.rows if r.model != "vit"]  # a pair only one side has is neither
    compare(now, before, "old.json")
    assert sorted((c.model, c.run_mode, c.kind) for c in now.regressions) == [
        ("bert", "eval", "graphs"), ("big", "eval", "fails"), ("flaubert", "eval", "breaks"), ("xlm", "eval", "breaks")]
    assert now.totals.regressions == 4 and now.improvements == []
    compare(before, now, "new.json")  # the other way round, the same pairs improve
    assert {c.kind for c in before.improvements} == {"fixed", "fewer graphs", "runs"}
    same = _sweep()
    compare(same, _sweep())
    assert same.regressions == [] and same.improvements == []


def test_renderers_show_the_report():
    from reports.sweep import render_sweep

    out = _sweep()
    out.totals = totals(out)
    compare(out, _sweep(), "old.json")
    md, html, text = (render_sweep(out, f) for f in ("md", "html", "text"))
    assert "| 1 | GM301 | 2 | 3 | 4 | mend fix |" in md
    assert "not built: eager forward: TypeError" in text and "2 root causes behind 4 breaks" in text
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "http" not in html.split("<main>")[1]
    assert "&#x27;input_ids&#x27;" in html  # every report string escaped
    assert SweepReport.from_json(render_sweep(out, "json")).causes[0].models == ["xlm", "flaubert"]
    out.cpus, out.jobs, out.executor = 2, 2, "ray"  # where the jobs ran is part of the setting
    assert "2 CPUs, --jobs 2 on ray" in render_sweep(out, "text")
    assert SweepReport.from_json(render_sweep(out, "json")).executor == "ray"
    with pytest.raises(ValueError):
        SweepReport.from_json('{"command": "analyze"}')


# -- one real sweep ---------------------------------------------------------------------

def _baseline_row(model: str, mode: str, **kw) -> dict:
    return {"model": model, "run_mode": mode, "status": SWEEP_CLEAN, "graph_count": 1, **kw}


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    pytest.importorskip("transformers", reason='mend sweep transformers needs transformers: pip install "graphmend[hf]"')
    tmp = tmp_path_factory.mktemp("sweep")
    # a baseline where bert was one graph, as now: no regression (xlm and vit are not in it)
    clean = tmp / "clean.json"
    clean.write_text(json.dumps({"library": "transformers", "schema_version": SweepReport(library="").schema_version,
                                 "rows": [_baseline_row("bert", m) for m in ("eval", "train")]}), encoding="utf-8")
    out = tmp / "sweep.json"
    got = CliRunner().invoke(app, ["sweep", "transformers", "--only", "bert,xlm,vit", "--modes", "eval,train",
                                   "--jobs", "2", "--targets-dir", str(tmp / "targets"), "-f", "json", "-o", str(out),
                                   "--html", str(tmp / "sweep.html"), "-q", "--baseline", str(clean)])
    assert got.exit_code == 0, got.output  # against a clean baseline
    return tmp, SweepReport.from_json(out.read_text(encoding="utf-8"))


def test_real_sweep_runs_builds_and_reports_not_built(real):
    tmp, rep = real
    by = {(r.model, r.run_mode): r for r in rep.rows}
    assert set(by) == {(m, mode) for m in ("bert", "xlm", "vit") for mode in ("eval", "train")}
    assert by["bert", "eval"].status == SWEEP_CLEAN and by["bert", "train"].status == SWEEP_CLEAN
    assert by["xlm", "eval"].status == SWEEP_BREAKS and by["xlm", "train"].status == SWEEP_BREAKS
    assert by["vit", "eval"].status == SWEEP_NOT_BUILT and "eager forward" in by["vit", "eval"].why
    assert rep.causes and "xlm" in rep.causes[0].models and rep.totals.not_built == 1
    assert rep.regressions == [] and rep.totals.regressions == 0
    assert "not built" in (tmp / "sweep.html").read_text(encoding="utf-8")


def test_real_sweep_counts_are_mend_analyze_of_its_targets(real):
    from graphmend.core.config import Config
    from graphmend.pipeline import AnalyzeOptions, analyze

    tmp, rep = real
    assert sorted(p.name for p in (tmp / "targets").glob("*.py")) == ["hf_bert.py", "hf_vit.py", "hf_xlm.py"]
    ana = analyze([tmp / "targets" / "hf_xlm.py"], Config(modes=("eval", "train")), AnalyzeOptions(static=False))
    got = {t.run_mode: (t.graph_count, t.graph_break_count, len(t.breaks), t.frames_skipped) for t in ana.targets}
    want = {r.run_mode: (r.graph_count, r.graph_break_count, r.breaks, r.frames_skipped)
            for r in rep.rows if r.model == "xlm"}
    assert got == want and got["eval"][1] >= 1


def test_baseline_regression_exits_1(real):
    tmp, rep = real
    older = tmp / "older.json.gz"  # as if vit had built and been one graph; kept compressed
    older.write_bytes(gzip.compress(json.dumps({**json.loads(rep.to_json()), "rows": [_baseline_row("vit", "eval")]})
                                    .encode("utf-8")))
    got = CliRunner().invoke(app, ["sweep", "transformers", "--only", "vit", "--modes", "eval", "-q",
                                   "--baseline", str(older)])
    assert got.exit_code == 1, got.output
    assert "vit [eval] fails: 1 graph, 0 counted breaks -> not built: eager forward" in got.output
    bad = CliRunner().invoke(app, ["sweep", "transformers", "--baseline", str(tmp / "sweep.html")])
    assert bad.exit_code == 2 and "--baseline" in bad.output


def test_enumeration_keeps_text_architectures():
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import enumerate_text

    models, skipped = enumerate_text()
    assert {"bert", "gpt2", "t5", "llama", "xlm"} <= set(models)
    assert "vit" in skipped and "whisper" in skipped and "llava" in skipped
    assert not set(models) & set(skipped)


# classes the tiny builder reaches through what it derives from configs and forwards (graphmend.sweep.hf):
# (class, an input it must have derived, how)
NEWLY_BUILT = [
    ("MimiDecoderModel", "latents"),  # a required argument, shaped as the forward documents it
    ("LxmertModel", "visual_pos"),  # arguments the failures name (`visual_feats` cannot be None), documented
    ("MusicgenForCausalLM", "input_ids"),  # a row a codebook: (batch x codebooks, seq) as documented
    ("Siglip2VisionModel", "spatial_shapes"),  # naflex patches with their grid
    ("MllamaVisionModel", "aspect_ratio_ids"),  # tiles, and the sub-config type's override
    ("Pix2StructVisionModel", "flattened_patches"),
    ("TimesFm2_5Model", "past_values"),  # univariate as documented, whole patches
    ("VitPoseBackbone", "pixel_values"),  # no more experts than the full model
    ("LongcatFlashModel", "input_ids"),  # latent attention's rope width is the rotary head_dim
    ("VoxtralRealtimeForConditionalGeneration", "input_features"),  # an audio frame a token
    ("SamModel", "pixel_values"),  # output_channels cut with the width it feeds
    ("LiltForQuestionAnswering", "bbox"),  # an override: six layout embeddings of hidden // 6
    ("LlavaNextModel", "image_sizes"),  # anyres: pinpoints in tiny tiles, (batch, views, c, h, w) with each size
    ("SpeechT5Model", "decoder_input_values"),  # no pre-nets: hidden states in and out
    ("VibeVoiceAcousticTokenizerEncoderModel", "hidden_states"),  # the main input under the forward's name
    ("MuseGlimmerModel", "image_grid_thw"),  # out_hidden_size: the vision width times the 2 x 2 merge
    ("Blip2ForImageTextRetrieval", "pixel_values"),  # a class override: the Q-Former embeds the text
    ("UVDocModel", "pixel_values"),  # an override: the backbone puts out every bridge stage
]


@pytest.mark.parametrize("name,key", NEWLY_BUILT)
def test_tiny_builder_builds_and_runs(name, key):
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    model, inputs = build_class(name)
    assert type(model).__name__ == name and key in inputs
    if name == "MusicgenForCausalLM":  # one row of tokens per codebook of each sample
        assert inputs["input_ids"].shape[0] == 2 * model.config.num_codebooks
    if name == "VoxtralRealtimeForConditionalGeneration":  # frames lengthened until one audio embedding a token
        assert inputs["input_features"].shape[-1] > 64
    if name == "LlavaNextModel":  # pinpoints scaled to the tiny tower's 64 px: a base view and up to 4 tiles
        assert model.config.image_grid_pinpoints[0] == [64, 128] and inputs["pixel_values"].shape[1] == 5
    if name == "SpeechT5Model":  # hidden states of the model's width, not raw audio
        assert inputs["input_values"].shape[-1] == model.config.hidden_size


def test_documented_shapes_are_sized_from_the_config():
    from types import SimpleNamespace

    from graphmend.sweep.hf_inputs import documented_shape, named_missing

    class Model:
        def forward(self, latents, codes=None, ctx=None, other=None):
            r"""
            Args:
                latents (`torch.Tensor` of shape `(batch_size, hidden_size, frames)`):
                    Latents.
                codes (`torch.LongTensor` of shape `(batch_size * num_codebooks, sequence_length)`):
                    Codes.
                ctx (`torch.Tensor` of shape `[batch_size, config.block_size, dim * len(config.layer_ids)]`):
                    Context.
                other (`SomeSession`):
                    Not a tensor.
            """

    cfg = SimpleNamespace(hidden_size=64, num_codebooks=4, block_size=3, layer_ids=[1, 2])
    assert documented_shape(Model(), [cfg], "latents", 2) == (False, (2, 64, 16))
    assert documented_shape(Model(), [cfg], "codes", 2) == (True, (8, 16))
    assert documented_shape(Model(), [cfg], "ctx", 2) == (False, (2, 3, 128))
    assert documented_shape(Model(), [cfg], "other", 2) is None
    import inspect

    accepted = inspect.signature(Model().forward).parameters
    assert named_missing(ValueError("`ctx` cannot be None"), accepted, {"latents": 1}) == []  # no underscore: a word
    assert named_missing(ValueError("You have to specify other_x"), {"other_x": None}, {}) == ["other_x"]


def test_anyres_pinpoints_and_the_main_input_alias():
    import inspect
    from types import SimpleNamespace

    from graphmend.sweep.hf import _main_alias, _renamed
    from graphmend.sweep.hf_config import _fit_pinpoints

    cfg = SimpleNamespace(image_grid_pinpoints=[[336, 672], [672, 672]], vision_config=SimpleNamespace(image_size=64))
    _fit_pinpoints(cfg)  # each 336 px tile of the full-size tower is one 64 px tile of the tiny one
    assert cfg.image_grid_pinpoints == [[64, 128], [128, 128]]

    class Encoder:
        main_input_name = "input_values"

        def forward(self, hidden_states, padding_cache=None):
            pass

    accepted = inspect.signature(Encoder().forward).parameters
    alias = _main_alias(Encoder(), accepted)
    assert alias == ("hidden_states", "input_values")
    assert set(_renamed({"input_values": 1}, alias)) == {"hidden_states"}


@pytest.mark.parametrize("model_type", ["llava", "qwen2_vl", "mllama"])
def test_sub_config_specs_read_off_the_default_match_transformers_own(model_type):
    """Releases before ``sub_configs_defaults`` (5.5) name only ``sub_configs``: the specs read off
    the composite's default instance give each sub-config the class and the full-size values the
    release's own specs give (where it has them), so the tiny fit shrinks them the same way."""
    pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from graphmend.sweep.hf_config import _defaults, _sub_config_class, specs_read_off

    cls = CONFIG_MAPPING[model_type]
    real = cls.sub_configs_defaults
    read = specs_read_off(cls, list(real))
    assert set(read) == {k for k, spec in real.items() if not getattr(spec, "optional", False)}
    for key, spec in real.items():
        sub_cls = _sub_config_class(spec)
        assert _sub_config_class(read[key]) is sub_cls, key
        own = _defaults(sub_cls)
        # a value the composite passes that equals the class default needs no reading off
        assert {k: v for k, v in spec.init_kwargs.items() if own.get(k) != v and k != "vocab_size"} == \
            {k: v for k, v in read[key].init_kwargs.items() if k in spec.init_kwargs and own.get(k) != v
             and k != "vocab_size"}, key
    assert read and any(spec.init_kwargs for spec in read.values()) == any(s.init_kwargs for s in real.values())
