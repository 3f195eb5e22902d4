"""Type stubs of the gpusort package (docstrings: help(gpusort.sort) and friends)."""

from typing import Any, Literal, Optional, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

from ._native import GpuError as GpuError

__version__: str

_Op = Literal["add", "max", "min", "and", "or", "xor"]
_Kind = Optional[Literal["quicksort", "mergesort", "heapsort", "stable"]]
_Boundary = Literal["reflect", "constant", "nearest", "mirror", "wrap"]

@overload
def sort(
    a: npt.ArrayLike,
    axis: Optional[int] = ...,
    kind: _Kind = ...,
    order: None = ...,
    *,
    descending: bool = ...,
    values: None = ...,
    out: Optional[npt.NDArray] = ...,
) -> npt.NDArray: ...
@overload
def sort(
    a: npt.ArrayLike,
    axis: Optional[int] = ...,
    kind: _Kind = ...,
    order: None = ...,
    *,
    descending: bool = ...,
    values: npt.ArrayLike,
) -> Tuple[npt.NDArray, npt.NDArray]: ...
def argsort(
    a: npt.ArrayLike,
    axis: Optional[int] = ...,
    kind: _Kind = ...,
    order: None = ...,
    *,
    descending: bool = ...,
    out: Optional[npt.NDArray] = ...,
) -> npt.NDArray[np.int64]: ...
def scan(
    a: npt.ArrayLike, op: _Op = ..., *, exclusive: bool = ..., out: Optional[npt.NDArray] = ...
) -> npt.NDArray: ...
def cumsum(
    a: npt.ArrayLike,
    axis: Optional[int] = ...,
    dtype: Optional[npt.DTypeLike] = ...,
    out: Optional[npt.NDArray] = ...,
    *,
    exclusive: bool = ...,
) -> npt.NDArray: ...
def partition_by(
    a: npt.ArrayLike, pivot: Union[int, float], *, values: Optional[npt.ArrayLike] = ...
) -> Union[Tuple[npt.NDArray, int], Tuple[npt.NDArray, npt.NDArray, int]]: ...
def partition(
    a: npt.ArrayLike, pivot: Union[int, float], *, values: Optional[npt.ArrayLike] = ...
) -> Union[Tuple[npt.NDArray, int], Tuple[npt.NDArray, npt.NDArray, int]]: ...
def compact(
    a: npt.ArrayLike,
    *,
    below: Optional[Union[int, float]] = ...,
    at_least: Optional[Union[int, float]] = ...,
    nonzero: bool = ...,
    values: Optional[npt.ArrayLike] = ...,
) -> Union[npt.NDArray, Tuple[npt.NDArray, npt.NDArray]]: ...
def stencil(
    grid: npt.ArrayLike,
    *,
    radius: Optional[int] = ...,
    stencil: Literal["star", "box"] = ...,
    weights: Optional[npt.ArrayLike] = ...,
    boundary: _Boundary = ...,
    cval: float = ...,
    steps: int = ...,
    out: Optional[npt.NDArray] = ...,
) -> npt.NDArray: ...
def info() -> dict[str, Any]: ...
def release_memory() -> int: ...
def tune(quick: bool = ..., verbose: bool = ...) -> dict[str, Any]: ...
def use(
    backend: Optional[str] = ...,
    adapter: Optional[Union[str, int]] = ...,
    devices: Optional[Union[str, int]] = ...,
) -> None: ...
