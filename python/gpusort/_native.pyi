"""Type stubs of gpusort's native module (the Rust half; see gpusort/__init__.py)."""

from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

class GpuError(RuntimeError): ...

def sort(
    a: npt.NDArray, descending: bool, segment: Optional[int], want_permutation: bool
) -> Tuple[npt.NDArray, Optional[npt.NDArray[np.int64]]]: ...
def argsort(
    a: npt.NDArray, descending: bool, segment: Optional[int]
) -> npt.NDArray[np.int64]: ...
def split_halves(a: npt.NDArray) -> Optional[Tuple[npt.NDArray, int, int]]: ...
def scan(a: npt.NDArray, op: str, inclusive: bool) -> npt.NDArray: ...
def cumsum(a: npt.NDArray, inclusive: bool) -> npt.NDArray: ...
def split(
    a: npt.NDArray,
    kind: str,
    pivot: Optional[npt.NDArray],
    keep_rest: bool,
    want_index: bool,
) -> Tuple[npt.NDArray, Optional[npt.NDArray[np.uint32]], int]: ...
def stencil(
    grid: npt.NDArray,
    radius: int,
    kind: str,
    weights: Optional[npt.NDArray[np.float64]],
    boundary: str,
    cval: float,
    steps: int,
) -> npt.NDArray: ...
def info() -> dict: ...
def release_memory() -> int: ...
def tune(quick: bool = False, verbose: bool = False) -> tuple[str, str, list[float]]: ...
def use_device(
    backend: Optional[str] = None,
    adapter: Optional[str] = None,
    devices: Optional[str] = None,
    spread_always: bool = False,
) -> None: ...
