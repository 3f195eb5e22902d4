"""The bench's key sets in NumPy (bench/keysets.py, for CuPy's side of the comparison) are the
very arrays `gpusort bench --keys` sorts: both match the digests pinned in
bench/keysets_golden.json (the Rust side checks them in crates/gpusort-bench/src/keysets.rs)."""
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import keysets  # noqa: E402


def digest(a):
    if a.dtype.itemsize == 4:
        bits = a.view(np.uint32).astype(np.uint64)
    else:
        bits = a.view(np.uint64)
    with np.errstate(over="ignore"):
        s = int(np.sum(bits, dtype=np.uint64))
        x = int(np.bitwise_xor.reduce(bits * np.arange(1, len(a) + 1, dtype=np.uint64)))
    return [str(s), str(x)]


def test_key_sets_match_the_rust_generator():
    golden = json.loads((ROOT / "bench" / "keysets_golden.json").read_text())
    seen = 0
    for dtype in keysets.DTYPES:
        for name in keysets.KEY_SETS:
            if not keysets.applies(dtype, name):
                continue
            a = keysets.generate(dtype, name, 1000, 7)
            assert a.dtype == keysets.NUMPY[dtype] and len(a) == 1000
            assert digest(a) == golden[f"{dtype} {name}"], f"{dtype} {name}"
            seen += 1
    assert seen == len(golden)
