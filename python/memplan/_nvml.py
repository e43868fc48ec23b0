"""NVML through ctypes (or pynvml when it is installed): device-wide memory in use on an NVIDIA
GPU, including what lives outside torch's allocator (the CUDA context, cuBLAS and NCCL buffers,
other processes). libnvidia-ml.so.1 ships with the driver; it is loaded only when a CUDA monitor
asks, and its absence is not an error (the monitor falls back to cudaMemGetInfo).

Signatures: nvml.h of the CUDA toolkit (nvmlInit_v2, nvmlDeviceGetHandleByIndex_v2,
nvmlDeviceGetHandleByUUID, nvmlDeviceGetMemoryInfo with nvmlMemory_t {total, free, used}).
"""

import ctypes
import os

__all__ = ["NvmlError", "device_for_cuda_index"]


class NvmlError(Exception):
    pass


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    try:
        lib = ctypes.CDLL(os.environ.get("MEMPLAN_NVML_LIBRARY") or "libnvidia-ml.so.1")
    except OSError as e:
        raise NvmlError(f"cannot load libnvidia-ml.so.1: {e}") from None
    for name in ("nvmlInit_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetMemoryInfo"):
        if not hasattr(lib, name):
            raise NvmlError(f"libnvidia-ml has no {name}")
    rc = lib.nvmlInit_v2()
    if rc != 0:
        raise NvmlError(f"nvmlInit failed (NVML error {rc})")
    _lib = lib
    return lib


class _CtypesDevice:
    def __init__(self, lib, handle):
        self.lib, self.handle = lib, handle

    def memory_used(self):
        m = _Memory()
        rc = self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(m))
        if rc != 0:
            raise NvmlError(f"nvmlDeviceGetMemoryInfo failed (NVML error {rc})")
        return int(m.used)


class _PynvmlDevice:
    def __init__(self, pynvml, handle):
        self.pynvml, self.handle = pynvml, handle

    def memory_used(self):
        return int(self.pynvml.nvmlDeviceGetMemoryInfo(self.handle).used)


def _nvml_target(cuda_index):
    # NVML numbers every GPU; CUDA only the visible ones, in CUDA_VISIBLE_DEVICES order.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or visible.strip() == "":
        return ("index", cuda_index)
    items = [v.strip() for v in visible.split(",") if v.strip()]
    if cuda_index >= len(items):
        raise NvmlError(f"CUDA_VISIBLE_DEVICES={visible} has no entry {cuda_index}")
    item = items[cuda_index]
    if item.isdigit():
        return ("index", int(item))
    return ("uuid", item)


def device_for_cuda_index(cuda_index):
    """An object whose memory_used() reads NVML for CUDA device `cuda_index`; NvmlError when NVML
    is missing or does not know the device."""
    how, key = _nvml_target(cuda_index)
    try:
        import pynvml
    except ImportError:
        pynvml = None
    if pynvml is not None and not os.environ.get("MEMPLAN_NVML_LIBRARY"):
        try:
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(key) if how == "index" else pynvml.nvmlDeviceGetHandleByUUID(key)
            return _PynvmlDevice(pynvml, handle)
        except Exception as e:
            raise NvmlError(f"pynvml: {e}") from None
    lib = _load()
    handle = ctypes.c_void_p()
    if how == "index":
        rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(key), ctypes.byref(handle))
    else:
        rc = lib.nvmlDeviceGetHandleByUUID(key.encode(), ctypes.byref(handle))
    if rc != 0:
        raise NvmlError(f"NVML does not know GPU {key} (NVML error {rc})")
    return _CtypesDevice(lib, handle)
