"""Export the model zoo's architectures to ONNX with random, seeded weights. Runs inside the
zoo's own venv (torch, torchvision, transformers: ``benchmarks/requirements-zoo.txt``), started
by ``benchmarks/zoo.py export``; never imported by the package, its tests or CI.

Each model NAME is written as ``NAME.onnx`` beside ``NAME.json``, its manifest: the inputs
(name, dtype, dims with symbolic names such as "batch" and "sequence", and what to feed: "ids"
below a vocabulary size, "ones", "zeros" or "normal"), the exporter and the versions used.

Run: ``python benchmarks/zoo_export.py OUT_DIR NAME [NAME ...]`` (in the zoo venv).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

OPSET = 17
SEQUENCE = 128            # the sequence length traced (the exported graph keeps it symbolic)


def _ids(vocab: int) -> dict:
    return {"dtype": "int64", "dims": ["batch", "sequence"], "feed": "ids", "high": vocab}


def _mask() -> dict:
    return {"dtype": "int64", "dims": ["batch", "sequence"], "feed": "ones"}


def _image(size: int = 224) -> dict:
    return {"dtype": "float32", "dims": ["batch", 3, size, size], "feed": "normal"}


class _Outputs(torch.nn.Module):
    """A transformers model returning its last hidden state as a plain tensor (the traced
    graph then has one output and no cache outputs)."""

    def __init__(self, model, names, **fixed):
        super().__init__()
        self.model, self.names, self.fixed = model, names, fixed

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)), **self.fixed)[0]


def _bert(layers: int, hidden: int, heads: int, ffn: int):
    from transformers import BertConfig, BertModel
    config = BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                        intermediate_size=ffn, attn_implementation="eager")
    inputs = {"input_ids": _ids(config.vocab_size), "attention_mask": _mask(),
              "token_type_ids": {"dtype": "int64", "dims": ["batch", "sequence"], "feed": "zeros"}}
    return _Outputs(BertModel(config, add_pooling_layer=False), list(inputs), return_dict=False), inputs


def _gpt2(layers: int):
    from transformers import GPT2Config, GPT2Model
    config = GPT2Config(n_layer=layers, attn_implementation="eager")
    inputs = {"input_ids": _ids(config.vocab_size), "attention_mask": _mask()}
    return _Outputs(GPT2Model(config), list(inputs), use_cache=False, return_dict=False), inputs


def _t5_encoder():
    from transformers import T5Config, T5EncoderModel
    config = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64)    # t5-small's shape
    inputs = {"input_ids": _ids(config.vocab_size), "attention_mask": _mask()}
    return _Outputs(T5EncoderModel(config), list(inputs), return_dict=False), inputs


def _whisper_encoder():
    from transformers import WhisperConfig, WhisperModel
    config = WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                           decoder_layers=4, decoder_attention_heads=6, decoder_ffn_dim=1536,
                           num_mel_bins=80, attn_implementation="eager")     # whisper-tiny's shape
    inputs = {"input_features": {"dtype": "float32", "dims": ["batch", 80, 3000], "feed": "normal"}}
    return _Outputs(WhisperModel(config).get_encoder(), list(inputs), return_dict=False), inputs


def _deit_small():
    from transformers import ViTConfig, ViTModel
    config = ViTConfig(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536,
                       attn_implementation="eager")       # DeiT-S/16's shape
    inputs = {"pixel_values": _image()}
    return _Outputs(ViTModel(config, add_pooling_layer=False), list(inputs), return_dict=False), inputs


def _torchvision(name: str):
    import torchvision
    torch.backends.mha.set_fastpath_enabled(False)      # else ViT traces to aten::_native_multi_head_attention
    model = getattr(torchvision.models, name)(weights=None)
    for parameter in model.parameters():     # ViT's classifier starts at zero: its logits would all be 0
        if not parameter.any():
            torch.nn.init.normal_(parameter, std=0.02)
    return _calibrated(model, _image()), {"input": _image()}


def _calibrated(model, image: dict):
    """``model`` with its batch norms' running statistics taken from a few random batches, so
    that activations keep their scale through the layers (with the initial statistics, mean 0
    and variance 1, EfficientNet's logits come out near 1e-14 and no comparison means much)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return model
    for m in norms:
        m.reset_running_stats()
        m.momentum = None            # a plain average over the batches
    generator = torch.Generator().manual_seed(1)
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn([4] + image["dims"][1:], generator=generator))
    return model


MODELS = {
    # transformers
    "bert-base": lambda: _bert(12, 768, 12, 3072),
    "minilm-l6": lambda: _bert(6, 384, 12, 1536),
    "gpt2-6l": lambda: _gpt2(6),
    "t5-small-encoder": _t5_encoder,
    "whisper-tiny-encoder": _whisper_encoder,
    "vit-b16": lambda: _torchvision("vit_b_16"),
    "swin-t": lambda: _torchvision("swin_t"),
    "deit-small": _deit_small,
    # CNNs
    "mobilenetv3-large": lambda: _torchvision("mobilenet_v3_large"),
    "efficientnet-b0": lambda: _torchvision("efficientnet_b0"),
    "regnety-800mf": lambda: _torchvision("regnet_y_800mf"),
    "convnext-tiny": lambda: _torchvision("convnext_tiny"),
    "resnet18": lambda: _torchvision("resnet18"),
    "resnext50": lambda: _torchvision("resnext50_32x4d"),
}
DYNAMO = {"minilm-l6", "resnet18", "deit-small"}    # also exported by torch.onnx.export(dynamo=True)
TRANSFORMERS = ("bert-base", "minilm-l6", "gpt2-6l", "t5-small-encoder", "whisper-tiny-encoder", "vit-b16",
                "swin-t", "deit-small")


def _example(spec: dict, generator) -> torch.Tensor:
    dims = [1 if d == "batch" else SEQUENCE if d == "sequence" else d for d in spec["dims"]]
    if spec["feed"] == "ids":
        return torch.randint(0, spec["high"], dims, generator=generator)
    if spec["feed"] in ("ones", "zeros"):
        return (torch.ones if spec["feed"] == "ones" else torch.zeros)(dims, dtype=torch.int64)
    return torch.randn(dims, generator=generator)


def export(name: str, out: Path) -> dict:
    """Build ``name`` (a key of MODELS, or KEY-dynamo for the dynamo exporter) with weights from
    seed 0 and write ``out/NAME.onnx`` and ``out/NAME.json``; returns the manifest."""
    base, dynamo = (name[:-len("-dynamo")], True) if name.endswith("-dynamo") else (name, False)
    torch.manual_seed(0)
    model, inputs = MODELS[base]()
    with torch.no_grad():       # zero-initialized biases would fold away, which trained ones never do
        for parameter in model.parameters():
            if not parameter.any():
                parameter.normal_(std=0.02)
    model.eval()
    generator = torch.Generator().manual_seed(0)
    args = tuple(_example(spec, generator) for spec in inputs.values())
    path = out / f"{name}.onnx"
    started = time.monotonic()
    with torch.no_grad():
        if dynamo:
            batch = torch.export.Dim("batch", min=1, max=64)
            sequence = torch.export.Dim("sequence", min=2, max=512)
            shapes = tuple({k: batch if d == "batch" else sequence for k, d in enumerate(spec["dims"])
                           if isinstance(d, str)} for spec in inputs.values())
            if isinstance(model, _Outputs):         # its forward takes *args: one entry holding them all
                shapes = (shapes,)
            program = torch.onnx.export(model, args, dynamo=True, dynamic_shapes=shapes, opset_version=18,
                                        input_names=list(inputs), output_names=["output"])
            program.save(str(path))
        else:
            axes = {k: {i: d for i, d in enumerate(spec["dims"]) if isinstance(d, str)} for k, spec in inputs.items()}
            axes["output"] = {0: "batch"}
            torch.onnx.export(model, args, str(path), dynamo=False, opset_version=OPSET, input_names=list(inputs),
                              output_names=["output"], dynamic_axes=axes)
    manifest = {"name": name, "inputs": [{"name": k, **spec} for k, spec in inputs.items()],
                "kind": "transformer" if base in TRANSFORMERS else "cnn",
                "exporter": "dynamo" if dynamo else "torchscript", "torch": torch.__version__,
                "export_seconds": round(time.monotonic() - started, 1)}
    (out / f"{name}.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def names() -> list:
    """Every model the zoo exports, the dynamo variants included."""
    return list(MODELS) + sorted(f"{n}-dynamo" for n in DYNAMO)


def main(argv: list) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in argv[1:] or names():
        try:
            manifest = export(name, out)
            print(f"exported {name} ({manifest['exporter']}, {manifest['export_seconds']} s)", flush=True)
        except Exception as err:       # one failing architecture must not stop the others
            failed += 1
            print(f"FAILED {name}: {type(err).__name__}: {str(err)[:300]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
