"""Agreement with oneDNN's fusion: each pattern graph in pattern/f32 is one partition for
oneDNN (unless its harness line expects none); count how many we also make one supported
partition and list why any other splits (none do today: the test holds that)."""
import collections
import re
import warnings
from pathlib import Path

import pytest

from tilefuse.graph_api import load_json

ROOT = Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance" / "onednn_graph" / "pattern"
HARNESS = ROOT / "harness_f32_all"
pytestmark = pytest.mark.skipif(not HARNESS.is_file(), reason="shared conformance graphs are not beside the checkout")


def fused_patterns() -> list[str]:
    """The pattern files oneDNN fuses into one partition, per the harness."""
    names = []
    for line in HARNESS.read_text().splitlines():
        case = re.search(r"--case=(pattern/f32/\S+\.json)", line)
        if case and "--expected-n-partitions=0" not in line and case.group(1) not in names:
            names.append(case.group(1))
    return names


def why_split(path: Path) -> str | None:
    """None when the graph becomes one supported partition, else the reason."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parts = load_json(path).get_partitions()
    if len(parts) == 1 and parts[0].is_supported():
        return None
    unsupported = [op.kind.value for p in parts if not p.is_supported() for op in p.get_ops()]
    if unsupported:
        return f"not compiled: {', '.join(sorted(set(unsupported)))}"
    return f"{len(parts)} partitions: " + " | ".join(
        "+".join(op.kind.value for op in p.get_ops()) for p in parts)


def test_patterns_fuse_like_onednn():
    names = [n for n in fused_patterns() if (ROOT.parent / n).is_file()]
    reasons = collections.OrderedDict((n, why_split(ROOT.parent / n)) for n in names)
    split = {n: r for n, r in reasons.items() if r is not None}
    print(f"\n{len(names) - len(split)} of {len(names)} oneDNN patterns are one supported partition here")
    for name, reason in split.items():
        print(f"  {name}: {reason}")
    assert names and not split, split
