"""The safetensors writer of the NumPy references in tests/cli (hf_reference.py,
hf_models_reference.py, train_reference.py): the header as JSON padded with spaces to 8 bytes,
then each tensor's little-endian data, in the order given."""
import json
import struct

import numpy as np


def to_bf16_bits(a):
    """float32 -> bfloat16 bit patterns, rounding to nearest even (no NaNs here)."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def write_safetensors(path, tensors, dtype="F32"):
    """Writes the dict name -> array `tensors` to `path`, every tensor as `dtype` (F32, F64, BF16)."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in tensors.items():
        if dtype == "BF16":
            b = to_bf16_bits(a).tobytes()
        else:
            b = np.ascontiguousarray(a, dtype={"F32": "<f4", "F64": "<f8"}[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
