"""The README's Python examples run as written (from the repository root)."""
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {section}")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end if end > 0 else None], re.S)


def test_the_from_onnxruntime_example_runs(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    (block,) = _python_blocks("From onnxruntime")
    monkeypatch.chdir(ROOT)
    code = block.replace("/tmp/resnet_block.tfm", str(tmp_path / "resnet_block.tfm")).replace(
        'db="tuning.db"', f'db="{tmp_path / "tuning.db"}"').replace('"/tmp/resnet_block"', f'"{tmp_path / "p"}"')
    scope = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # the new database has no records: defaults, with a warning
        exec(compile(code, "README.md", "exec"), scope)
    y, again, tuned = scope["y"], scope["again"], scope["tuned"]
    import json
    events = json.loads(Path(scope["trace"]).read_text())
    assert scope["trace"].startswith(str(tmp_path / "p_")) and [e["cat"] for e in events].count("Node") > 1
    x = scope["x"]
    feed = {x.name: scope["np"].ones(x.shape, "float32")}
    for a, b in zip(again.run(None, feed), tuned.run(None, feed)):
        assert a.shape == b.shape and abs(a - b).max() < 1e-4
    assert y.shape == tuple(scope["sess"].get_outputs()[0].shape)
    assert scope["dynamic"].compiled_shapes == [((1, 16, 32, 32),), ((4, 16, 32, 32),)]
    assert scope["logits"].shape == (4, 10)
