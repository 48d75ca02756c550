"""torchaudio: the model builders of torchaudio.models, tiny where the builder takes a config.

Enumeration (parent side): ``BUILDERS`` in order, one entry per architecture: the
configurable builder (``wav2vec2_model``, ``hubert_pretrain_model``, ``wavlm_model``,
``emformer_rnnt_model``, ``squim_objective_model``...) or the model class where there is no
builder (``Conformer``, ``ConvTasNet``, ``Tacotron2``...), each given a tiny config. Every
other public builder or model class of torchaudio.models is a skipped row: a fixed-size
variant (``wav2vec2_base``, ``hubert_large``, ``hdemucs_high``) of an architecture that runs
tiny, or a class a builder above returns.

Building (worker side): the tiny model in eval, its inputs (a batch of 2, a second of audio
or less), one eager forward. Tacotron2 runs through ``Speaker``: ``infer`` (the
autoregressive decoder loop with its stopping gate) in eval, the teacher-forced ``forward``
in train, as it is trained and used.
"""

from __future__ import annotations

from typing import Any, Callable

from graphmend.core.worker import describe
from graphmend.sweep.building import NotBuilt, forward_checked

SELECTION = "every torchaudio.models architecture, built tiny from its builder's or class's config, random weights"
B = 2
_CONV = [(32, 10, 5), (32, 3, 2), (32, 2, 2)]  # a three-layer feature extractor (stride 20)
_W2V = dict(extractor_mode="group_norm", extractor_conv_layer_config=_CONV, extractor_conv_bias=False,
            encoder_embed_dim=32, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=16,
            encoder_pos_conv_groups=4, encoder_num_layers=2, encoder_num_heads=4, encoder_attention_dropout=0.0,
            encoder_ff_interm_features=64, encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
            encoder_layer_norm_first=False, encoder_layer_drop=0.0)


def _wave(n: int = 1600):
    import torch

    return torch.randn(B, n)


def _lengths(n: int):
    import torch

    return torch.tensor([n, n - n // 4])


def _wav2vec2():
    import torchaudio.models as A

    return A.wav2vec2_model(**_W2V, aux_num_out=10), (_wave(),), {"lengths": _lengths(1600)}


def _wavlm():
    import torchaudio.models as A

    # no lengths: WavLM's attention asserts it gets no padding mask
    return A.wavlm_model(**_W2V, encoder_num_buckets=32, encoder_max_distance=64, aux_num_out=10), (_wave(),), {}


def _hubert_pretrain():
    import torch
    import torchaudio.models as A

    model = A.hubert_pretrain_model(
        **_W2V, mask_prob=0.5, mask_selection="static", mask_other=0.0, mask_length=2, no_mask_overlap=False,
        mask_min_space=1, mask_channel_prob=0.0, mask_channel_selection="static", mask_channel_other=0.0,
        mask_channel_length=2, no_mask_channel_overlap=False, mask_channel_min_space=1, skip_masked=False,
        skip_nomask=False, num_classes=10, final_dim=16, feature_grad_mult=None)
    frames = 1600 // 20 - 1
    return model, (_wave(), torch.randint(0, 10, (B, frames))), {"audio_lengths": _lengths(1600)}


def _conformer():
    import torch
    import torchaudio.models as A

    model = A.Conformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=2, depthwise_conv_kernel_size=7)
    return model, (torch.randn(B, 20, 32), _lengths(20)), {}


def _conv_tasnet():
    import torch
    import torchaudio.models as A

    model = A.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=32, msk_num_feats=16,
                         msk_num_hidden_feats=32, msk_num_layers=2, msk_num_stacks=1)
    return model, (torch.randn(B, 1, 800),), {}


def _deepspeech():
    import torch
    import torchaudio.models as A

    return A.DeepSpeech(n_feature=16, n_hidden=32, n_class=10), (torch.randn(B, 1, 20, 16),), {}


def _emformer():
    import torch
    import torchaudio.models as A

    model = A.Emformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=2, segment_length=4,
                       right_context_length=1)
    return model, (torch.randn(B, 17, 32), _lengths(16)), {}


def _emformer_rnnt():
    import torch
    import torchaudio.models as A

    model = A.emformer_rnnt_model(
        input_dim=16, encoding_dim=32, num_symbols=10, segment_length=4, right_context_length=2,
        time_reduction_input_dim=32, time_reduction_stride=2, transformer_num_heads=4, transformer_ffn_dim=64,
        transformer_num_layers=2, transformer_dropout=0.0, transformer_activation="gelu",
        transformer_left_context_length=8, transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=True, symbol_embedding_dim=16,
        num_lstm_layers=1, lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-3, lstm_dropout=0.0)
    sources, targets = torch.randn(B, 20, 16), torch.randint(0, 10, (B, 5))
    return model, (sources, _lengths(20), targets, torch.tensor([5, 4])), {}


def _hdemucs():
    import torch
    import torchaudio.models as A

    model = A.HDemucs(sources=["speech", "noise"], audio_channels=1, channels=8, nfft=256, depth=3)
    return model, (torch.randn(B, 1, 2048),), {}


def _squim_objective():
    import torchaudio.models as A

    model = A.squim_objective_model(feat_dim=32, win_len=64, d_model=32, nhead=4, hidden_dim=32, num_blocks=1,
                                    rnn_type="LSTM", chunk_size=16)
    return model, (_wave(),), {}


def _squim_subjective():
    import torchaudio.models as A

    model = A.squim_subjective_model(ssl_type="wavlm_base", feat_dim=768, proj_dim=16, att_dim=8)
    return model, (_wave(), _wave()), {}


def _speaker_class():
    import torch

    class Speaker(torch.nn.Module):
        """Tacotron2 as it runs: ``infer`` in eval, teacher-forced ``forward`` in train."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, tokens, token_lengths, mel, mel_lengths):
            if self.training:
                return self.model(tokens, token_lengths, mel, mel_lengths)
            return self.model.infer(tokens, token_lengths)

    return Speaker


def _tacotron2():
    import torch
    import torchaudio.models as A

    model = A.Tacotron2(n_mels=16, n_symbol=20, symbol_embedding_dim=32, encoder_embedding_dim=32,
                        encoder_n_convolution=1, decoder_rnn_dim=32, decoder_max_step=12, attention_rnn_dim=32,
                        attention_hidden_dim=16, attention_location_n_filter=4, attention_location_kernel_size=3,
                        prenet_dim=16, postnet_n_convolution=1, postnet_embedding_dim=16)
    tokens = torch.randint(1, 20, (B, 8))
    return (_speaker_class()(model), (tokens, torch.tensor([8, 6]), torch.randn(B, 16, 10), torch.tensor([10, 8])),
            {})


def _wavernn():
    import torch
    import torchaudio.models as A

    model = A.WaveRNN(upsample_scales=[2, 2], n_classes=16, hop_length=4, n_res_block=1, n_rnn=32, n_fc=32,
                      n_freq=16, n_hidden=16, n_output=16)
    return model, (torch.randn(B, 1, (10 - 5 + 1) * 4), torch.randn(B, 1, 16, 10)), {}


def _wav2letter():
    import torch
    import torchaudio.models as A

    return A.Wav2Letter(num_classes=10), (torch.randn(B, 1, 1600),), {}


# name -> the tiny build: (model, args, kwargs)
BUILDERS: dict[str, Callable[[], tuple]] = {
    "wav2vec2_model": _wav2vec2, "hubert_pretrain_model": _hubert_pretrain, "wavlm_model": _wavlm,
    "Conformer": _conformer, "emformer_rnnt_model": _emformer_rnnt, "Emformer": _emformer,
    "DeepSpeech": _deepspeech, "Wav2Letter": _wav2letter, "ConvTasNet": _conv_tasnet, "HDemucs": _hdemucs,
    "Tacotron2": _tacotron2, "WaveRNN": _wavernn, "squim_objective_model": _squim_objective,
    "squim_subjective_model": _squim_subjective,
}
# a public builder or class not in BUILDERS -> the entry that runs its architecture
COVERED = {"Wav2Vec2Model": "wav2vec2_model", "HuBERTPretrainModel": "hubert_pretrain_model", "RNNT": "emformer_rnnt_model",
           "SquimObjective": "squim_objective_model", "SquimSubjective": "squim_subjective_model",
           "conv_tasnet_base": "ConvTasNet", "emformer_rnnt_base": "emformer_rnnt_model"}
NO_MODEL = {"RNNTBeamSearch": "a beam-search decoder over an RNNT model, no model of its own"}
_FAMILIES = (("wav2vec2_", "wav2vec2_model"), ("hubert_pretrain_", "hubert_pretrain_model"),
             ("hubert_", "wav2vec2_model"), ("wavlm_", "wavlm_model"), ("hdemucs_", "HDemucs"),
             ("squim_objective_", "squim_objective_model"), ("squim_subjective_", "squim_subjective_model"))


def version() -> str:
    import torchaudio

    return torchaudio.__version__


def enumerate_models() -> tuple[list[str], dict[str, str]]:
    import torch
    import torchaudio.models as A

    skipped: dict[str, str] = {}
    for name in sorted(getattr(A, "__all__", dir(A))):
        obj = getattr(A, name, None)
        model_class = isinstance(obj, type) and issubclass(obj, torch.nn.Module)
        builder = callable(obj) and not isinstance(obj, type) and name[:1].islower()
        if name in BUILDERS or name.startswith("_") or not (model_class or builder):
            continue  # Hypothesis, RNNTBeamSearch: no model
        runs = COVERED.get(name) or next((r for p, r in _FAMILIES if name.startswith(p)), None)
        skipped[name] = (NO_MODEL.get(name) or (f"a fixed-size variant of an architecture that runs tiny as {runs}"
                                                if runs else "no tiny build for it"))
    return [n for n in BUILDERS if hasattr(A, n)], skipped


def modality(name: str) -> str:
    return "text-to-speech" if name == "Tacotron2" else "audio"


def target(name: str) -> tuple[Any, tuple, dict]:
    """What a generated ``mend_target_*`` returns; ``NotBuilt`` with why not."""
    try:
        import torch
        import torchaudio  # noqa: F401
    except Exception as exc:
        raise NotBuilt(f"torchaudio does not import: {describe(exc)}") from None
    if name not in BUILDERS:
        raise NotBuilt(f"no tiny build for torchaudio {name!r}")
    torch.manual_seed(0)
    try:
        model, args, kwargs = BUILDERS[name]()
        model.eval()
    except Exception as exc:
        raise NotBuilt(f"model: {describe(exc)}") from None
    return forward_checked(model, args, kwargs)
