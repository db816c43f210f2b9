"""Read a GGUF file: header, metadata and tensor directory, with the tensor data left memory-mapped.

Layout (little-endian; GGUF versions 2 and 3):

    "GGUF" | u32 version | u64 tensor_count | u64 metadata_count
    metadata_count x (string key | u32 value type | value)
    tensor_count   x (string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset)
    zero padding up to `general.alignment` (default 32) | tensor data, each tensor at data_start + offset

A string is a u64 byte length and UTF-8 bytes; an array is a u32 element type, a u64 count and the
elements. `ne` lists a tensor's dimensions innermost (contiguous) first, the reverse of torch order.

Only the header pages are touched to read the metadata; the ~100k vocabulary strings of a tokenizer
are the bulk of the work, done with one `struct.unpack_from` per string.
"""

from __future__ import annotations

import dataclasses
import math
import mmap
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import torch

from openafm.checkpoint.gguf.dequant import dequantize
from openafm.checkpoint.gguf.types import BLOCK_SIZES, SCALAR_FORMATS, GGMLType, ValueType, type_name
from openafm.errors import CheckpointError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_SCALARS = {vt: struct.Struct(fmt) for vt, (fmt, _) in SCALAR_FORMATS.items()}


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor directory."""

    name: str
    shape: tuple[int, ...]  # GGUF order: shape[0] is the contiguous dimension (a matrix is [in, out])
    type: GGMLType
    offset: int             # absolute byte offset of the data in the file
    n_bytes: int

    @property
    def torch_shape(self) -> tuple[int, ...]:
        """The shape in torch order (a matrix is [out, in])."""
        return tuple(reversed(self.shape))

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)


class GGUFFile:
    """A parsed GGUF file: `metadata` as plain Python values, `tensors` by name, data memory-mapped."""

    def __init__(self, path: Path, version: int, metadata: dict[str, Any], tensors: dict[str, TensorInfo],
                 alignment: int, mapping: mmap.mmap):
        self.path, self.version, self.metadata = path, version, metadata
        self.tensors, self.alignment = tensors, alignment
        self._mapping = mapping  # copy-on-write, so torch views of it are writable without touching the file

    def __repr__(self) -> str:
        return (f"GGUFFile({str(self.path)!r}, version={self.version}, {len(self.metadata)} metadata keys, "
                f"{len(self.tensors)} tensors)")

    def info(self, name: str) -> TensorInfo:
        if name not in self.tensors:
            raise CheckpointError(f"{self.path}: no tensor named {name!r} (the file has {len(self.tensors)} tensors)")
        return self.tensors[name]

    def raw(self, name: str) -> torch.Tensor:
        """The tensor's bytes as stored, [n_bytes] uint8, sharing memory with the mapping (no copy)."""
        info = self.info(name)
        if info.n_bytes == 0:
            return torch.empty(0, dtype=torch.uint8)
        return torch.frombuffer(self._mapping, dtype=torch.uint8, count=info.n_bytes, offset=info.offset)

    def dequantize(self, name: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The tensor as a new float tensor in torch order (`info.torch_shape`), computed in float32."""
        info = self.info(name)
        values = dequantize(self.raw(name), info.type, where=f"{self.path}: tensor {name!r}")  # [n_elements] f32
        values = values.reshape(info.torch_shape)
        return values if dtype == torch.float32 else values.to(dtype)


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Parse the header, metadata and tensor directory of a GGUF file; the data stays mapped, unread."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 4 + 4 + 8 + 8:
                raise CheckpointError(f"{path}: truncated GGUF file: {size} bytes, shorter than the 24-byte header")
            mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such GGUF file") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path}: is a directory, not a GGUF file") from None
    return _Parser(path, mapping).parse()


class _Parser:
    """A cursor over the mapped bytes; every read checks bounds and names what it was reading."""

    def __init__(self, path: Path, buf: mmap.mmap):
        self.path, self.buf, self.size, self.pos = path, buf, len(buf), 0
        self.reading = "the header"

    def parse(self) -> GGUFFile:
        try:
            return self._parse()
        except struct.error:
            raise self._truncated() from None

    def _parse(self) -> GGUFFile:
        magic = bytes(self.buf[:4])
        if magic != MAGIC:
            raise CheckpointError(f"{self.path}: not a GGUF file: it starts with {magic!r}, not {MAGIC!r}")
        self.pos = 4
        version = self._u32()
        if version not in SUPPORTED_VERSIONS:
            if int.from_bytes(version.to_bytes(4, "little"), "big") in SUPPORTED_VERSIONS:
                raise CheckpointError(f"{self.path}: big-endian GGUF files are not supported")
            raise CheckpointError(f"{self.path}: GGUF version {version} is not supported "
                                  f"(supported: {', '.join(map(str, SUPPORTED_VERSIONS))})")
        n_tensors, n_kv = self._u64(), self._u64()
        # Each entry takes at least 12 (metadata) or 24 (tensor info) bytes: bounds garbage counts early.
        self._check_count(n_kv, 12, "metadata entries")
        self._check_count(n_tensors, 24, "tensor infos")

        metadata: dict[str, Any] = {}
        for i in range(n_kv):
            self.reading = f"metadata entry #{i}"
            key = self._string()
            self.reading = f"the value of metadata key {key!r}"
            if key in metadata:
                raise CheckpointError(f"{self.path}: metadata key {key!r} appears twice")
            metadata[key] = self._value(self._u32(), key)

        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise CheckpointError(f"{self.path}: general.alignment={alignment!r} is not a positive power of two")

        entries = [self._tensor_entry(i) for i in range(n_tensors)]
        data_start = -(-self.pos // alignment) * alignment
        tensors: dict[str, TensorInfo] = {}
        for name, shape, code, offset in entries:
            if name in tensors:
                raise CheckpointError(f"{self.path}: tensor {name!r} appears twice in the tensor directory")
            tensors[name] = self._tensor_info(name, shape, code, offset, data_start, alignment)
        return GGUFFile(self.path, version, metadata, tensors, alignment, self.buf)

    # -- tensors ------------------------------------------------------------------------------

    def _tensor_entry(self, i: int) -> tuple[str, tuple[int, ...], int, int]:
        self.reading = f"tensor info #{i}"
        name = self._string()
        self.reading = f"the tensor info of {name!r}"
        n_dims = self._u32()
        if not 1 <= n_dims <= MAX_DIMS:
            raise CheckpointError(f"{self.path}: tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
        shape = tuple(self._u64() for _ in range(n_dims))
        return name, shape, self._u32(), self._u64()

    def _tensor_info(self, name: str, shape: tuple[int, ...], code: int, offset: int, data_start: int,
                     alignment: int) -> TensorInfo:
        try:
            ggml_type = GGMLType(code)
        except ValueError:
            raise CheckpointError(f"{self.path}: tensor {name!r} has ggml type code {code}, which this reader "
                                  f"does not know (known: {', '.join(t.name for t in GGMLType)})") from None
        block, block_bytes = BLOCK_SIZES[ggml_type]
        if shape[0] % block:
            raise CheckpointError(f"{self.path}: tensor {name!r} of type {ggml_type.name} has a row of {shape[0]} "
                                  f"elements, not a multiple of its block size {block}")
        if offset % alignment:
            raise CheckpointError(f"{self.path}: tensor {name!r} starts at data offset {offset}, "
                                  f"not a multiple of the alignment {alignment}")
        n_bytes = shape[0] // block * block_bytes * math.prod(shape[1:])
        start = data_start + offset
        if start + n_bytes > self.size:
            raise CheckpointError(f"{self.path}: tensor {name!r} ({type_name(code)}, shape {list(shape)}) needs bytes "
                                  f"[{start}, {start + n_bytes}) but the file has only {self.size} bytes "
                                  f"(truncated or corrupt)")
        return TensorInfo(name, shape, ggml_type, start, n_bytes)

    # -- values -------------------------------------------------------------------------------

    def _value(self, value_type: int, key: str) -> Any:
        if value_type == ValueType.STRING:
            return self._string()
        if value_type == ValueType.ARRAY:
            return self._array(key)
        scalar = _SCALARS.get(value_type)  # type: ignore[call-overload]
        if scalar is None:
            raise CheckpointError(f"{self.path}: metadata key {key!r} has unknown value type {value_type}")
        (value,) = scalar.unpack_from(self.buf, self.pos)
        self.pos += scalar.size
        return value

    def _array(self, key: str) -> list[Any]:
        element_type, count = self._u32(), self._u64()
        if element_type == ValueType.STRING:
            return self._strings(count)
        if element_type == ValueType.ARRAY:
            self._check_count(count, 12, f"nested arrays in {key!r}")
            return [self._array(key) for _ in range(count)]
        if element_type not in _SCALARS:
            raise CheckpointError(f"{self.path}: metadata key {key!r} is an array of unknown value type {element_type}")
        dtype = np.dtype(SCALAR_FORMATS[ValueType(element_type)][1])
        self._check_count(count, dtype.itemsize, f"elements of {key!r}")
        values = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos) if count else np.empty(0, dtype)
        self.pos += count * dtype.itemsize
        return (values.astype(bool) if element_type == ValueType.BOOL else values).tolist()

    def _strings(self, count: int) -> list[str]:
        self._check_count(count, 8, "strings")
        buf, pos, unpack = self.buf, self.pos, _U64.unpack_from
        chunks = [b""] * count
        for i in range(count):
            (length,) = unpack(buf, pos)  # struct.error past the end -> truncated
            pos += 8
            chunks[i] = buf[pos:pos + length]
            pos += length
        if pos > self.size:
            raise self._truncated()
        self.pos = pos
        try:
            return [chunk.decode("utf-8") for chunk in chunks]
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{self.path}: {self.reading} holds a string that is not valid UTF-8 ({e})") from None

    def _string(self) -> str:
        length = self._u64()
        end = self.pos + length
        if end > self.size:
            raise self._truncated()
        raw = self.buf[self.pos:end]
        self.pos = end
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{self.path}: {self.reading} holds a string that is not valid UTF-8 ({e})") from None

    def _u32(self) -> int:
        (value,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def _u64(self) -> int:
        (value,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return value

    def _check_count(self, count: int, min_bytes_each: int, what: str) -> None:
        if count * min_bytes_each > self.size - self.pos:
            raise CheckpointError(f"{self.path}: {self.reading} claims {count} {what}, more than the "
                                  f"{self.size - self.pos} remaining bytes can hold (truncated or corrupt)")

    def _truncated(self) -> CheckpointError:
        return CheckpointError(f"{self.path}: truncated GGUF file: it ends ({self.size} bytes) while reading "
                               f"{self.reading}")
