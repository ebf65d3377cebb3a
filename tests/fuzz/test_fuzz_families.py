"""The CI slice of the case classes added for issue 43, one test per class and seed:

* ``windows``: random ConvTranspose and pool attributes (auto_pad, ceil_mode, output_shape,
  output_padding, dilations, asymmetric pads, count_include_pad, MaxPool's Indices with
  storage_order) equal onnxruntime or are refused at import, never at run (``fuzz_windows``);
* ``patterns``: attention with masks, GELU, LayerNorm, squeeze-excite and grouped convolutions
  equal onnxruntime (``fuzz_patterns``);
* ``saved-files``: a live session whose file is saved over, replaced, truncated, overwritten,
  removed, appended to or touched runs right or refuses cleanly, never SIGBUS or garbage
  (``fuzz_saved``);
* ``threads``: threads running one session over many shapes get onnxruntime's results and do
  not hang (``fuzz_threads``);
* ``strided-feeds``: odd feed layouts run like contiguous copies and stay unmodified
  (``fuzz_strided``)."""
import pytest

from fuzz_cases import SLICE_SEEDS, make_case

FAMILIES = ("windows", "patterns", "saved-files", "threads", "strided-feeds")


@pytest.mark.parametrize("cls, seed", [(cls, seed) for cls in FAMILIES for seed in SLICE_SEEDS[cls]],
                         ids=lambda value: str(value))
def test_case_ends_in_an_allowed_outcome(cls, seed):
    case = make_case(cls, seed)
    outcome = case.run()
    assert outcome.allowed, case.report(outcome)
