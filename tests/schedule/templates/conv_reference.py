"""numpy references shared by the template tests."""
import numpy as np


def grouped_reference(x, w, b, groups, stride, pads, epilogue):
    """numpy's grouped convolution (pads before, pads reversed after) with bias and epilogue."""
    icg, ocg = w.shape[1], w.shape[0] // groups
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[1]), (pads[1], pads[0])))
    oh, ow = (p.shape[2] - 3) // stride + 1, (p.shape[3] - 3) // stride + 1
    out = np.zeros((1, w.shape[0], oh, ow))
    for g in range(groups):
        for dy in range(3):
            for dx in range(3):
                taps = p[:, g * icg:(g + 1) * icg, dy:dy + stride * (oh - 1) + 1:stride,
                         dx:dx + stride * (ow - 1) + 1:stride]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,fc->nfhw", taps, w[g * ocg:(g + 1) * ocg, :, dy, dx])
    out += b[:, None, None]
    if epilogue == "relu":
        return np.maximum(out, 0)
    if epilogue == "silu":
        return out / (1 + np.exp(-out))
    return out
