"""``mend sweep transformers`` over every model class of every modality: the enumeration,
inputs derived from the config for one tiny class per modality (built and run eagerly), the
``--list`` / ``--only`` CLI, and the golden-set comparison's mapping (benchmarks/golden_compare.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmend.cli.app import app
from graphmend.core.tables import SWEEP_BREAKS, SWEEP_CLEAN, SWEEP_FAILED, SWEEP_NOT_BUILT

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def classes():
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import enumerate_classes

    return {u["class"]: u for u in enumerate_classes()}


def test_enumeration_is_every_class_of_every_modality(classes):
    from graphmend.sweep.hf import enumerate_models, modality

    names, skipped = enumerate_models()
    assert len(names) >= 700 and names == list(classes) and not skipped
    mods = {u["modality"] for u in classes.values()}
    assert {"text", "vision", "audio", "multimodal", "video", "time series"} <= mods
    assert (modality("WhisperForConditionalGeneration"), modality("ViTForImageClassification"),
            modality("BertForMaskedLM"), modality("bert")) == ("audio", "vision", "text", "text")


# one tiny class per modality, and the input each must be given (derived from its config)
PER_MODALITY = [
    ("BertForMultipleChoice", "input_ids", 3),  # (batch, choices, seq)
    ("ViTForImageClassification", "pixel_values", 4),
    ("WhisperForConditionalGeneration", "input_features", 3),
    ("Wav2Vec2ForCTC", "input_values", 2),  # raw audio
    ("VivitForVideoClassification", "pixel_values", 5),
    ("PatchTSTForPrediction", "past_values", 3),
    ("Idefics3Model", "pixel_values", 5),  # images per sample, placeholders in the text
]


@pytest.mark.parametrize("name,key,dims", PER_MODALITY)
def test_class_builds_with_inputs_of_its_modality(classes, name, key, dims):
    import torch

    from graphmend.sweep.hf import build_class

    model, inputs = build_class(name)
    assert inputs[key].dim() == dims
    if "input_ids" in inputs:  # every token id inside the tiny vocabulary
        vocab = model.get_input_embeddings().num_embeddings
        assert int(inputs["input_ids"].max()) < vocab
    with torch.no_grad():
        model(**inputs)


def test_special_token_ids_are_moved_inside_the_tiny_vocabulary():
    pytest.importorskip("transformers")
    from transformers import Idefics3Config

    from graphmend.sweep.hf_config import _fit_special_ids, tiny_config_kwargs

    cfg = Idefics3Config(**tiny_config_kwargs(Idefics3Config))
    vocab = cfg.text_config.vocab_size
    assert cfg.image_token_id >= vocab  # the full-size id
    _fit_special_ids(cfg)
    assert cfg.image_token_id < vocab


def test_per_layer_lists_are_cut_with_the_depth():
    """zamba2 derives a 54-entry ``layers_block_type`` from its full depth; it validates that the
    list and ``num_hidden_layers`` agree, so the tiny depth cuts the list too."""
    pytest.importorskip("transformers")
    from transformers import Zamba2Config

    from graphmend.sweep.hf_config import tiny_config_kwargs
    from graphmend.sweep.hf_overrides import LAYERS

    kw = tiny_config_kwargs(Zamba2Config)
    assert len(kw["layers_block_type"]) == kw["num_hidden_layers"] == LAYERS
    assert Zamba2Config(**kw).num_hidden_layers == LAYERS
    # a list of layer indices is the config's to derive: mistral-large-4 shares each layer's cache
    # with an earlier one by index, which a cut would point past the tiny depth
    from transformers import MistralLarge4TextConfig

    kw = tiny_config_kwargs(MistralLarge4TextConfig)
    assert "kv_source_layers" not in kw and len(kw["layer_types"]) == LAYERS
    MistralLarge4TextConfig(**kw)


def test_a_width_one_config_keeps_of_another_is_cut_with_it():
    """a composite's head keeps its audio encoder's width (``audio_hidden_size``), a vision tower
    the text's (``text_hidden_size``): both cut with the hidden size they copy, so the config builds."""
    pytest.importorskip("transformers")
    import transformers as T

    from graphmend.sweep.hf_config import tiny_config_kwargs
    from graphmend.sweep.hf_overrides import HIDDEN

    for name, sub, attr in (("Nemotron3DiarizationConfig", "head_config", "audio_hidden_size"),
                            ("Inkling2Config", "vision_config", "text_hidden_size")):
        cfg_cls = getattr(T, name)
        cfg = cfg_cls(**tiny_config_kwargs(cfg_cls))
        assert getattr(getattr(cfg, sub), attr) == HIDDEN


def test_mrope_sections_fit_the_tiny_rotary_half():
    """qwen2-vl splits each head's rotary half (head_dim / 2) into time/height/width sections; its
    modeling default [16, 24, 24] is a 128-wide head's: the tiny head gets sections of its own."""
    pytest.importorskip("transformers")
    from transformers import Qwen2VLConfig

    from graphmend.sweep.hf_config import _fit_mrope, mrope_sections, tiny_config_kwargs

    assert mrope_sections(8) == [3, 3, 2] and mrope_sections(32, 4) == [8, 8, 8, 8]
    cfg = Qwen2VLConfig(**tiny_config_kwargs(Qwen2VLConfig))
    _fit_mrope(cfg)
    text = cfg.text_config
    assert sum(text.rope_parameters["mrope_section"]) == text.hidden_size // text.num_attention_heads // 2


def test_an_unset_image_placeholder_gets_a_free_id_and_audio_a_placeholder():
    """blip-2 names ``image_token_index`` but leaves it unset (its processor adds the token);
    qwen2-audio needs its audio placeholder in the text and the frames' mask."""
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    model, inputs = build_class("Blip2Model")
    assert model.config.image_token_index is not None
    assert int((inputs["input_ids"] == model.config.image_token_index).sum()) > 0
    model, inputs = build_class("Qwen2AudioForConditionalGeneration")
    assert int((inputs["input_ids"] == model.config.audio_token_index).sum()) == 2
    assert inputs["feature_attention_mask"].shape == (2, inputs["input_features"].shape[-1])


def test_a_composites_full_size_defaults_for_a_sub_config_are_cut():
    """mistral3 hands its pixtral vision config ``head_dim=64`` (a size pixtral's __init__ does not
    name): the tiny head is 16 wide, and paligemma's projection follows the text's width."""
    pytest.importorskip("transformers")
    from transformers import Mistral3Config, PaliGemmaConfig

    from graphmend.sweep.hf_config import tiny_config_kwargs
    from graphmend.sweep.hf_overrides import HIDDEN

    vision = Mistral3Config(**tiny_config_kwargs(Mistral3Config)).vision_config
    assert vision.head_dim == vision.hidden_size // vision.num_attention_heads
    cfg = PaliGemmaConfig(**tiny_config_kwargs(PaliGemmaConfig))
    assert cfg.vision_config.projection_dim == cfg.text_config.hidden_size == HIDDEN


def test_placeholder_counts_read_vectors_or_elements():
    """'tokens: 2, features: 512' counts feature elements in mistral3 (8 vectors of the text's 64)."""
    pytest.importorskip("transformers")
    from transformers import Mistral3Config

    from graphmend.sweep.hf_batch import _placeholder_counts
    from graphmend.sweep.hf_config import tiny_config_kwargs

    cfg = Mistral3Config(**tiny_config_kwargs(Mistral3Config))
    assert _placeholder_counts(512, cfg) == [256, 4]
    assert _placeholder_counts(7, cfg) == []


@pytest.mark.parametrize("name", ["Mistral3ForConditionalGeneration", "PaliGemmaForConditionalGeneration"])
def test_vision_language_models_get_their_image_placeholders(name):
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    model, inputs = build_class(name)
    assert int((inputs["input_ids"] == model.config.image_token_id).sum()) >= 2


# classes the generic inputs once failed, each with the input the rule derives for it
DERIVED = [
    ("RTDetrV2Model", "pixel_values", 4),  # 16 queries: top-k of 84 encoder tokens at 64 px
    ("IdeficsModel", "image_attention_mask", 3),  # (batch, text, images)
    ("Glm4vMoeVisionModel", "grid_thw", 2),  # a vision tower alone: patches and their grid
    ("VideoPrismForVideoClassification", "pixel_values_videos", 5),
    ("Qwen3ASREncoder", "input_features_mask", 2),  # frames in whole windows of 2 x n_window
    ("Gemma4VisionModel", "pixel_position_ids", 3),  # flattened patches and their (x, y), pooled k x k
    ("MuseSparkVisionModel", "pixel_values", 2),  # a vision tower taking its patches as pixel_values
    ("VivitModel", "pixel_values", 5),  # a video model its name does not say: frames tried as a variant
    ("FunAsrNanoEncoder", "input_features", 3),  # low frame rate: mel bins x stacked frames wide
    ("Nemotron3_5TranscribeAudioModel", "input_features", 3),  # the mel bins of the encoder under it
    ("Kimi_K25VisionModel", "pixel_values", 4),  # a vision tower's patches as (3, p, p) images
    ("Kosmos2Model", "image_embeds_position_mask", 2),  # no image token: a mask marks the latents' positions
    ("VideoLlama3VisionModel", "merge_sizes", 1),  # each image's merge, as the processor gives it
    ("Inkling2VisionModel", "pixel_values", 4),  # patches merged m x m a row, as its tower documents
    ("DeepseekVLHybridModel", "high_res_pixel_values", 4),  # the high-res tower's image, of its own size
    ("FuyuModel", "pixel_values", 3),  # no vision tower: rows of flattened patches
    ("MiniCPMV4_7VisionModel", "target_sizes", 2),  # every image's patches in one row, with their grids
    ("ColQwen2ForRetrieval", "pixel_values", 3),  # each image's patches a row, of its model's patch size
    ("InstructBlipVideoForConditionalGeneration", "qformer_input_ids", 2),  # a shape documented without backticks
    ("GraniteDoclingModel", "pixel_attention_mask", 2),  # tiles a sample, each real tile marked
    # an image as the flattened patches its base model documents, one an image placeholder (the head documents pixels)
    ("NeoMMEForMaskedLM", "pixel_values", 2),
    ("Blip2QFormerModel", "query_embeds", 3),  # documented "`torch.Tensor`  of shape": two spaces
    ("Gemma4UnifiedModel", "image_position_ids", 3),  # patches already merged k x k: model_patch_size wide
    ("TimesFmModel", "past_values_padding", 2),  # as long as past_values, whose documented length it shares
    ("TimesFm2_5ModelForPrediction", "past_values", 2),  # a sequence of 1-D series, whole patches of context
    ("GraniteSpeech5Encoder", "input_features", 3),  # frames stacked 4 a row, as its input layer takes them
    ("KyutaiSpeechToTextModel", "input_ids", 3),  # the text's and each codebook's stream a position
    ("DiaModel", "decoder_input_ids", 3),  # (batch, seq, codebooks), the last of its documented shapes
    ("MusicgenMelodyForConditionalGeneration", "input_features", 3),  # a chromagram, 12 bins a frame
    ("Qwen2_5OmniThinkerModel", "input_features", 3),  # its audio encoder's positions cover a window of frames
    ("NemotronH_Omni_Reasoning_V3", "image_grid_hw", 2),  # patches on a 2-D grid; a placeholder its model copied
]


def test_a_strict_config_is_validated_after_the_fits(monkeypatch):
    """transformers' strict configs validate at construction, before a fit could cut what fails
    (cosmos3-edge's mrope sections of a 128-wide head): the fitted config is validated instead,
    and what still fails says why in its validator's words."""
    pytest.importorskip("transformers")
    import transformers as T

    from graphmend.sweep.hf import build_class
    from graphmend.sweep.hf_config import fitted_config, tiny_config_kwargs

    cfg_cls = T.Cosmos3EdgeTextConfig
    with pytest.raises(Exception, match="mrope_section"):
        cfg_cls(**tiny_config_kwargs(cfg_cls))
    cfg = fitted_config(cfg_cls, tiny_config_kwargs(cfg_cls))
    assert sum(cfg.rope_parameters["mrope_section"]) == cfg.head_dim // 2
    # without its override the adaptor's width disagrees with the text's: refused, with the cause
    with pytest.raises(Exception) as info:
        fitted_config(T.FunAsrNanoConfig, tiny_config_kwargs(T.FunAsrNanoConfig))
    assert "adaptor_config.intermediate_size" in str(info.value.__cause__)
    from graphmend.sweep.building import NotBuilt
    from graphmend.sweep.hf_overrides import OVERRIDES

    monkeypatch.delitem(OVERRIDES, "fun_asr_nano")
    with pytest.raises(NotBuilt, match=r"^config: ValueError: `adaptor_config.intermediate_size`"):
        build_class("FunAsrNanoModel")


def test_per_layer_cuts_keep_every_kind_of_layer_and_sizes_a_layer():
    """A hybrid's one full-attention layer in four survives the cut to two layers (configs validate
    that there is one); a per-layer size list (gemma-3n's intermediate_size, muse-spark audio's
    patch sizes) is as long as the tiny depth; a size the full model sets to 0 (NoPE) stays 0."""
    pytest.importorskip("transformers")
    import transformers as T

    from graphmend.sweep.hf_config import _kinds_kept, fitted_config, tiny_config_kwargs
    from graphmend.sweep.hf_overrides import LAYERS

    assert _kinds_kept(["linear", "linear", "linear", "full"], 2) == ["linear", "full"]
    assert _kinds_kept(["a", "b", "c"], 2) == ["a", "b"]  # no repeated kind to give up
    assert _kinds_kept(["a", "a"], 1) == ["a"]
    kw = tiny_config_kwargs(T.OlmoHybridConfig)
    assert "full_attention" in kw["layer_types"] and len(kw["layer_types"]) == LAYERS
    fitted_config(T.OlmoHybridConfig, kw)
    kw = tiny_config_kwargs(T.Gemma3nTextConfig)  # without its override
    assert len(kw["intermediate_size"]) == kw["num_hidden_layers"] == LAYERS
    audio = T.MuseSparkConfig.sub_configs_defaults["audio_config"]
    kw = tiny_config_kwargs(getattr(audio, "config_class", audio))
    assert len(kw["patch_sizes"]) == len(kw["depths"]) == kw["num_hidden_layers"]
    assert tiny_config_kwargs(T.Glm5NextTextConfig)["qk_rope_head_dim"] == 0


def test_audio_placeholders_as_many_as_the_model_counts_features():
    """An audio LM that counts one placeholder a feature ("Audio features and audio tokens do not
    match, tokens: 2, features: 128") gets as many; one that expands its one placeholder keeps one."""
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    model, inputs = build_class("GlmAsrForConditionalGeneration")
    assert int((inputs["input_ids"] == model.config.audio_token_id).sum()) > 2
    model, inputs = build_class("Qwen2AudioForConditionalGeneration")
    assert int((inputs["input_ids"] == model.config.audio_token_id).sum()) == 2
    # voxtral leaves its audio placeholder unset (its processor adds it): a free id fills it
    from transformers import VoxtralConfig

    assert VoxtralConfig().audio_token_id is None
    model, inputs = build_class("VoxtralModel")
    assert int((inputs["input_ids"] == model.config.audio_token_id).sum()) > 2


def test_audio_a_model_takes_in_whole_hops_is_padded_to_the_next():
    """"`input_values` length 4000 is not a multiple of 96" (its feature extractor pads): the next
    try pads the named input with zeros to 4032; a message naming another length is not acted on."""
    import torch

    from graphmend.sweep.hf import _padded_to_multiple

    x = {"input_values": torch.randn(2, 4000), "input_ids": torch.ones(2, 4)}
    said = ValueError("`input_values` length 4000 is not a multiple of 96. Prepare the audio with its extractor")
    out = _padded_to_multiple(said, x)
    assert out["input_values"].shape == (2, 4032) and out["input_ids"] is x["input_ids"]
    assert torch.equal(out["input_values"][:, :4000], x["input_values"]) and not out["input_values"][:, 4000:].any()
    assert _padded_to_multiple(ValueError("`input_values` length 16 is not a multiple of 96"), x) is None
    assert _padded_to_multiple(ValueError("`pixel_values` length 4000 is not a multiple of 96"), x) is None


def test_a_shape_documented_as_a_one_tuple_is_read():
    """timesfm documents ``freq (`torch.LongTensor` of shape `(batch_size,)`)``: one dimension, the
    batch; a trailing comma is a tuple's, not an empty dimension."""
    from graphmend.sweep.hf_inputs import documented_shape

    class Model:
        def forward(self, freq=None, mask=None):
            """
            Args:
                freq (`torch.LongTensor` of shape `(batch_size,)`):
                    Frequency indices.
                mask (`torch.Tensor` of shape `(batch_size, , 4)`):
                    A shape with a dimension left out.
            """

    assert documented_shape(Model(), [], "freq", 2) == (True, (2,))
    assert documented_shape(Model(), [], "mask", 2) is None


def test_a_shape_documented_without_backticks_is_read():
    """instructblip-video documents ``qformer_input_ids (`torch.LongTensor` of shape (batch_size,
    sequence_length))``: the shape is read as if in backticks."""
    from graphmend.sweep.hf_inputs import documented_shape

    class Model:
        def forward(self, qformer_input_ids=None):
            """
            Args:
                qformer_input_ids (`torch.LongTensor` of shape (batch_size, sequence_length)):
                    The Q-Former's prompt.
            """

    assert documented_shape(Model(), [], "qformer_input_ids", 2) == (True, (2, 16))


def test_a_shape_documented_after_two_spaces_is_read():
    """blip-2's Q-Former documents ``query_embeds (`torch.Tensor`  of shape ...)``, two spaces before "of"."""
    from graphmend.sweep.hf_inputs import documented_shape

    class Model:
        def forward(self, query_embeds=None):
            """
            Args:
                query_embeds (`torch.Tensor`  of shape `(batch_size, sequence_length, hidden_size)`):
                    Queries.
            """

    class Config:
        hidden_size = 64

    assert documented_shape(Model(), [Config()], "query_embeds", 2) == (False, (2, 16, 64))


def test_an_argument_the_raising_line_reads_is_named_missing():
    """``pixel_attention_mask.sum()`` on a mask left None: the line that raised names the argument."""
    import inspect

    from graphmend.sweep.hf_inputs import named_missing

    def forward(input_ids, pixel_attention_mask=None, inputs_embeds=None):
        return pixel_attention_mask.sum() + inputs_embeds.sum()

    try:
        forward(1)
    except AttributeError as exc:
        accepted = inspect.signature(forward).parameters
        assert named_missing(exc, accepted, {"input_ids": 1}) == ["pixel_attention_mask"]
        assert named_missing(exc, accepted, {"input_ids": 1, "pixel_attention_mask": 1}) == []


@pytest.mark.parametrize("name,key,dims", DERIVED)
def test_inputs_derived_from_the_config_run(name, key, dims):
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    model, inputs = build_class(name)
    assert inputs[key].dim() == dims


def test_a_d_model_width_is_cut_and_feature_layers_fit_the_tiny_tower():
    """florence-2's projection is its bart text's d_model wide; vipllava takes vision layers -2, -5, -8, -11
    and 6 of 24, which two tiny layers do not have: indices kept in range, as many (its projector counts them)."""
    pytest.importorskip("transformers")
    from transformers import Florence2Config, VipLlavaConfig

    from graphmend.sweep.hf_config import fitted_config, tiny_config_kwargs

    cfg = fitted_config(Florence2Config, tiny_config_kwargs(Florence2Config))
    assert cfg.vision_config.projection_dim == cfg.text_config.d_model
    cfg = fitted_config(VipLlavaConfig, tiny_config_kwargs(VipLlavaConfig))
    depth = cfg.vision_config.num_hidden_layers
    assert len(cfg.vision_feature_layer) == 5 and all(-depth - 1 <= i <= depth for i in cfg.vision_feature_layer)


def test_image_boundaries_video_placeholders_and_per_query_masks():
    """ovis-2.5 counts its image's start and end tokens; instructblip-video names only a video placeholder,
    which its frames fill; owl-vit's text queries are rows of input_ids, each with its mask row."""
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    model, inputs = build_class("Ovis2_5Model")
    for name in ("image_start_token_id", "image_end_token_id"):
        assert int((inputs["input_ids"] == getattr(model.config, name)).sum()) == 2
    model, inputs = build_class("InstructBlipVideoModel")
    assert int((inputs["input_ids"] == model.config.video_token_id).sum()) > 0
    model, inputs = build_class("OwlViTForObjectDetection")
    assert inputs["attention_mask"].shape == inputs["input_ids"].shape != (2, inputs["input_ids"].shape[1])


def test_typed_layers_without_a_window_get_one():
    """step3p7 types its layers and sets no sliding window, yet builds the window's mask."""
    pytest.importorskip("transformers")
    from transformers import Step3p7Config

    from graphmend.sweep.hf_config import _fit_sliding_window, tiny_config_kwargs

    cfg = Step3p7Config(**tiny_config_kwargs(Step3p7Config))
    assert cfg.text_config.sliding_window is None
    _fit_sliding_window(cfg)
    assert cfg.text_config.sliding_window == 8


def test_a_heterogeneous_configs_window_is_read_as_stored():
    """neo-mme's config keeps the window per layer and refuses to read it globally: the fit reads it as
    stored, and the class builds."""
    pytest.importorskip("transformers")
    from transformers import NeoMMEConfig

    from graphmend.sweep.hf_config import fitted_config, tiny_config_kwargs

    cfg = fitted_config(NeoMMEConfig, tiny_config_kwargs(NeoMMEConfig))
    assert cfg.per_layer_config[0].sliding_window is not None or cfg.per_layer_config[1].sliding_window is not None


def test_a_tuple_default_the_model_concatenates_is_a_list():
    """convnextv2's backbone computes ``[hidden_sizes[0]] + hidden_sizes`` on a tuple default."""
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    model, _ = build_class("ConvNextV2Backbone")
    assert isinstance(model.config.hidden_sizes, list)


def test_splinter_gets_a_question_token_a_sample():
    """splinter's pre-training head selects spans at its question tokens and needs one a sample."""
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    model, inputs = build_class("SplinterForPreTraining")
    assert ((inputs["input_ids"] == model.config.question_token_id).sum(1) == 1).all()


def test_an_xvector_head_gets_audio_long_enough_for_its_kernels():
    pytest.importorskip("transformers")
    from graphmend.sweep.hf import build_class

    _, inputs = build_class("Wav2Vec2ConformerForXVector")
    assert inputs["input_values"].shape == (2, 16000)


def test_list_prints_library_class_modality_mode_without_running(classes):
    got = CliRunner().invoke(app, ["sweep", "transformers", "--list", "--modes", "eval,train"])
    assert got.exit_code == 0, got.output
    lines = got.output.splitlines()
    assert len(lines) == len(classes) + 1
    assert any(ln.split() == ["transformers", "WhisperForConditionalGeneration", "audio", "eval,train"] for ln in lines)
    js = CliRunner().invoke(app, ["sweep", "transformers", "--list", "-f", "json", "--only", "ViTModel,bert"])
    assert js.exit_code == 0, js.output
    data = json.loads(js.output)
    assert [(m["model"], m["modality"], m["modes"]) for m in data["models"]] == [("ViTModel", "vision", ["eval"]),
                                                                                ("bert", "text", ["eval"])]


def test_only_unknown_class_is_a_usage_error_with_the_closest_names(classes):
    got = CliRunner().invoke(app, ["sweep", "transformers", "--list", "--only", "WhisperForConditionalGeneraton"])
    assert got.exit_code == 2
    assert "WhisperForConditionalGeneraton" in got.output and "WhisperForConditionalGeneration" in got.output


def test_library_not_installed_names_the_pip_install(monkeypatch):
    from graphmend.sweep import hf, stage

    def missing():
        raise ModuleNotFoundError("No module named 'transformers'", name="transformers")

    monkeypatch.setattr(hf, "version", missing)
    with pytest.raises(stage.SweepError, match=r"transformers is not installed \(pip install transformers\)"):
        stage.plan(stage.SweepOptions(library="transformers"))


def _quick_or_stuck(args):
    """A build-rate worker's job: "stuck" holds its process as a native call would, deaf to the alarm."""
    import signal
    import time

    name, _ = args
    if name == "stuck":
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
        time.sleep(60)
    return {"class": name, "built": True, "why": "", "seconds": 0.0}


def test_build_rate_kills_a_worker_stuck_past_its_timeout_and_goes_on(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import hf_build_rate

    monkeypatch.setattr(hf_build_rate, "GRACE", 1)
    rows = {r["class"]: r for r in hf_build_rate._run_all(["a", "stuck", "b", "c"], 2, 1, work=_quick_or_stuck)}
    assert sorted(rows) == ["a", "b", "c", "stuck"]
    assert rows["stuck"]["why"] == "timed out after 1 s (killed)" and rows["c"]["built"]


def _golden_compare():
    spec = importlib.util.spec_from_file_location("golden_compare", ROOT / "benchmarks" / "golden_compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_golden_comparison_maps_statuses_and_explains_each_disagreement():
    gc = _golden_compare()
    golden = gc.load_golden(json.dumps({"models": [
        {"name": "A", "eval": {"status": "full_graph"}, "train": {"status": "graph_break"}},
        {"name": "B", "eval": {"status": "graph_break"}, "train": {"status": "graph_break"}},
        {"name": "C", "eval": {"status": "eager_error"}, "train": {"status": "eager_error"}},
        {"name": "D", "eval": {"status": "full_graph"}, "train": {"status": "full_graph"}}]}))
    rows = [{"model": "A", "run_mode": "eval", "status": SWEEP_CLEAN},
            {"model": "A", "run_mode": "train", "status": SWEEP_CLEAN},  # golden breaks: a capture bug
            {"model": "B", "run_mode": "eval", "status": SWEEP_BREAKS, "graph_break_count": 1, "where": ["m.py:3"]},
            {"model": "C", "run_mode": "eval", "status": SWEEP_CLEAN},  # golden did not build it
            {"model": "D", "run_mode": "eval", "status": SWEEP_BREAKS, "graph_break_count": 2, "where": ["d.py:9"]},
            {"model": "D", "run_mode": "train", "status": SWEEP_NOT_BUILT, "why": "config: x"}]
    res = gc.compare(golden, rows)
    assert (res["compared"], res["agree"]) == (4, 2)
    assert res["by_mode"] == {"eval": {"agree": 2, "compared": 3}, "train": {"agree": 0, "compared": 1}}
    why = {(d["class"], d["mode"]): d["why"] for d in res["disagreements"]}
    assert "capture bug" in why["A", "train"] and "d.py:9" in why["D", "eval"]
    assert {(d["class"], d["mode"]) for d in res["not_both_built"]} == {("C", "eval"), ("D", "train")}
    assert gc.sample(golden, {"A", "B", "D"}, 2) == ["A", "D"]


def test_golden_comparison_amends_an_earlier_sample_and_refuses_an_overlap():
    gc = _golden_compare()
    golden = gc.load_golden(json.dumps({"models": [
        {"name": n, "eval": {"status": "full_graph"}, "train": {"status": "graph_break"}} for n in "ABC"]}))
    first = gc.compare(golden, [{"model": "A", "run_mode": "eval", "status": SWEEP_CLEAN},
                                {"model": "A", "run_mode": "train", "status": SWEEP_CLEAN}])
    earlier = {"meta": {"sample": "every 2nd", "wall_s": 10}, **first}
    second = gc.compare(golden, [{"model": "B", "run_mode": "eval", "status": SWEEP_CLEAN},
                                 {"model": "C", "run_mode": "train", "status": SWEEP_NOT_BUILT, "why": "x"}])
    res, meta = gc.amend(second, {"sample": "every 2nd from the 1st", "wall_s": 5}, earlier, golden)
    assert (res["compared"], res["agree"], res["share"]) == (3, 2, 0.6667)
    assert res["by_mode"] == {"eval": {"agree": 2, "compared": 2}, "train": {"agree": 0, "compared": 1}}
    assert res["classes"] == ["A", "B", "C"] and len(res["disagreements"]) == 1 and len(res["not_both_built"]) == 1
    assert meta == {"sample": "every 2nd; and every 2nd from the 1st", "wall_s": 15}
    with pytest.raises(ValueError, match="also has A"):
        gc.amend(first, {}, earlier, golden)


def test_a_pair_run_twice_counts_once_and_an_older_comparisons_pairs_are_rebuilt():
    gc = _golden_compare()
    golden = gc.load_golden(json.dumps({"models": [
        {"name": n, "eval": {"status": "full_graph"}, "train": {"status": "graph_break"}} for n in "AB"]}))
    rows = [{"model": "A", "run_mode": "eval", "status": SWEEP_BREAKS},
            {"model": "A", "run_mode": "eval", "status": SWEEP_CLEAN},  # run again: the last row counts
            {"model": "A", "run_mode": "train", "status": SWEEP_BREAKS},
            {"model": "B", "run_mode": "eval", "status": SWEEP_BREAKS, "where": ["b.py:2"]},
            {"model": "B", "run_mode": "train", "status": SWEEP_FAILED, "why": "timed out"}]
    res = gc.compare(golden, rows)
    assert (res["compared"], res["agree"]) == (3, 2) and len(res["pairs"]) == 3
    # a comparison kept without its pairs: the ones it agreed on carry the golden status
    older = {k: v for k, v in res.items() if k != "pairs"}
    assert gc.pairs_of(older, golden) == res["pairs"]


def test_on_fullgraph_terms_a_pair_takes_its_fullgraph_row_or_keeps_one_graph():
    gc = _golden_compare()
    golden = gc.load_golden(json.dumps({"models": [
        {"name": "A", "eval": {"status": "full_graph"}, "train": {"status": "full_graph"}},
        {"name": "B", "eval": {"status": "graph_break"}, "train": {"status": "full_graph"}},
        {"name": "C", "eval": {"status": "full_graph"}}]}))
    res = gc.compare(golden, [{"model": "A", "run_mode": "eval", "status": SWEEP_BREAKS, "where": ["a.py:1"]},
                              {"model": "A", "run_mode": "train", "status": SWEEP_CLEAN},
                              {"model": "B", "run_mode": "eval", "status": SWEEP_BREAKS},
                              {"model": "B", "run_mode": "train", "status": SWEEP_BREAKS}])
    assert (res["compared"], res["agree"]) == (4, 2)
    full = [{"model": "A", "run_mode": "eval", "status": SWEEP_CLEAN},  # fullgraph=True traces what broke
            {"model": "B", "run_mode": "eval", "status": SWEEP_BREAKS, "where": ["b.py:4"]},
            {"model": "B", "run_mode": "train", "status": SWEEP_FAILED, "why": "timed out"}]
    fg = gc.on_fullgraph(res, golden, full)
    assert (fg["compared"], fg["agree"], fg["kept_clean"]) == (3, 3, 1) and not fg["disagreements"]
    assert [(d["class"], d["mode"], d["mend"]) for d in fg["not_both_built"]] == [("B", "train", "failed: timed out")]
    # a pair broken on without a fullgraph row is not compared; one the check sample ran is counted
    fg = gc.on_fullgraph(res, golden, [{"model": "A", "run_mode": "train", "status": SWEEP_BREAKS, "where": ["t.py:2"]}])
    assert fg["check"] == {"run": 1, "one_graph": 0} and fg["compared"] == 1
    assert "t.py:2" in fg["disagreements"][0]["why"]
    # run again on the public sweep's own model and inputs: what mend's capture saw there is kept
    again = gc.with_same_program(fg, [{"model": "A", "mode": "train", "status": SWEEP_CLEAN, "where": []},
                                      {"model": "Z", "mode": "eval", "status": SWEEP_BREAKS}])
    assert again["same_program"] == {"run": 1, "agree": 1, "worker_here_same": 0}
    assert again["disagreements"][0]["same_program"] == "clean" and "own model and inputs" in again["disagreements"][0]["why"]
    # still breaking there, where the corpus's own worker on this machine breaks too
    still = gc.with_same_program(fg, [{"model": "A", "mode": "train", "status": SWEEP_BREAKS, "where": ["/s/site-packages/t.py:2"],
                                       "worker_here": "graph_break"}])
    assert still["same_program"] == {"run": 1, "agree": 0, "worker_here_same": 1}
    assert "breaks at t.py:2; its worker compiling as it does, on this machine: graph_break" in still["disagreements"][0]["why"]
    # a class only the fullgraph sweep ran is compared as it is
    fg = gc.on_fullgraph(res, golden, [{"model": "C", "run_mode": "eval", "status": SWEEP_BREAKS, "where": ["c.py:5"]}])
    assert (fg["compared"], fg["agree"], fg["classes"], fg["more_classes"]) == (2, 1, 3, 1)
    assert [d["class"] for d in fg["disagreements"]] == ["C"] and "c.py:5" in fg["disagreements"][0]["why"]
    # one graph in the default compile where the golden set breaks: kept one graph, and a disagreement
    golden_breaks = gc.load_golden(json.dumps({"models": [{"name": "D", "eval": {"status": "graph_break"}}]}))
    fg = gc.on_fullgraph(gc.compare(golden_breaks, [{"model": "D", "run_mode": "eval", "status": SWEEP_CLEAN}]),
                         golden_breaks, [])
    assert fg["kept_clean"] == 1 and "capture bug" in fg["disagreements"][0]["why"]
    # a pair the default compile could not capture (it timed out) is compared on a fullgraph row
    late = gc.compare(golden, [{"model": "A", "run_mode": "eval", "status": SWEEP_FAILED, "why": "timed out"}])
    fg = gc.on_fullgraph(late, golden, [{"model": "A", "run_mode": "eval", "status": SWEEP_CLEAN}])
    assert (fg["compared"], fg["agree"], fg["more_classes"]) == (1, 1, 0)


def test_a_reviewed_break_site_explains_a_disagreement_wherever_mend_breaks_there():
    gc = _golden_compare()
    golden = gc.load_golden(json.dumps({"models": [{"name": "Vlm", "eval": {"status": "full_graph"}}]}))
    site = next(iter(gc.REVIEWED_SITES))
    res = gc.compare(golden, [{"model": "Vlm", "run_mode": "eval", "status": SWEEP_BREAKS, "where": ["m.py:1", site]}])
    assert res["disagreements"][0]["why"].endswith("reviewed: " + gc.REVIEWED_SITES[site])
    # a row lists its first sites only: the root causes that name its model and mode give the rest
    sweep = {"rows": [{"model": "Vlm", "run_mode": "eval", "status": SWEEP_BREAKS, "where": ["m.py:1"]}],
             "causes": [{"models": ["Vlm"], "modes": ["eval"], "sites": [site]},
                        {"models": ["Vlm"], "modes": ["train"], "sites": ["t.py:9"]}]}
    gc.with_sites(sweep)
    assert sweep["rows"][0]["sites"] == ["m.py:1", site]
    assert "reviewed" in gc.compare(golden, sweep["rows"])["disagreements"][0]["why"]


def test_golden_comparison_retries_only_the_pairs_it_could_not_compare():
    gc = _golden_compare()
    golden = gc.load_golden(json.dumps({"models": [
        {"name": n, "eval": {"status": "full_graph"}, "train": {"status": "graph_break"}} for n in "AB"]}))
    earlier = gc.compare(golden, [{"model": "A", "run_mode": "eval", "status": SWEEP_CLEAN},
                                  {"model": "A", "run_mode": "train", "status": SWEEP_FAILED, "why": "out of memory"},
                                  {"model": "B", "run_mode": "eval", "status": SWEEP_NOT_BUILT, "why": "x"}])
    again = [{"model": "A", "run_mode": "eval", "status": SWEEP_BREAKS},  # compared before: kept as it was
             {"model": "A", "run_mode": "train", "status": SWEEP_BREAKS},
             {"model": "B", "run_mode": "eval", "status": SWEEP_NOT_BUILT, "why": "y"}]
    res, n = gc.retry({"meta": {"sample": "every 2nd"}, **earlier}, golden, again)
    assert n == 2 and "meta" not in res and (res["compared"], res["agree"]) == (2, 2) and not res["disagreements"]
    assert res["by_mode"] == {"eval": {"agree": 1, "compared": 1}, "train": {"agree": 1, "compared": 1}}
    assert [(d["class"], d["mode"], d["mend"]) for d in res["not_both_built"]] == [("B", "eval", "not built: y")]


def test_a_width_the_config_maps_hidden_size_to_is_the_tiny_width():
    """granite-speech's encoder keeps its width as hidden_dim (hidden_size maps to it), which other
    configs use for an FFN: it gets the hidden size, not the FFN's."""
    pytest.importorskip("transformers")
    from transformers import GraniteSpeechEncoderConfig

    from graphmend.sweep.hf_config import config_kwargs
    from graphmend.sweep.hf_overrides import HIDDEN

    assert config_kwargs(GraniteSpeechEncoderConfig, {})["hidden_dim"] == HIDDEN


def test_an_attribute_the_model_reads_and_the_config_lacks_is_fitted():
    """A model reading what only a checkpoint's config carries gets the tiny value: another config's
    of the name (the encoder's key/value heads), a width its width, a token a free id; a name it
    cannot size is left to fail."""
    pytest.importorskip("transformers")
    from transformers import MoonshineStreamingConfig

    from graphmend.sweep.hf_config import fit_lacking, fitted_config, tiny_config_kwargs

    cfg = fitted_config(MoonshineStreamingConfig, {**tiny_config_kwargs(MoonshineStreamingConfig), "vocab_size": 100})

    def lacks(name):
        return AttributeError(f"'MoonshineStreamingConfig' object has no attribute '{name}'")

    assert fit_lacking(lacks("num_key_value_heads"), cfg)
    assert cfg.num_key_value_heads == cfg.encoder_config.num_key_value_heads == 2
    assert fit_lacking(lacks("projection_hidden_size"), cfg) and cfg.projection_hidden_size == 64
    assert fit_lacking(lacks("vision_start_token_id"), cfg) and 0 < cfg.vision_start_token_id < 100
    assert not fit_lacking(lacks("some_mode"), cfg)
    assert not fit_lacking(AttributeError("'OtherConfig' object has no attribute 'head_dim'"), cfg)
