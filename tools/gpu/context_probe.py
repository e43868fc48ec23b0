#!/usr/bin/env python3
"""What a CUDA process holds outside PyTorch's caching allocator, step by step.

For memplan's context table (issue 28): cudaMemGetInfo's used memory minus the allocator's
reserved bytes after CUDA init, the first fp32/bf16 matmul (cuBLAS handle), a linear with bias
(cuBLASLt), each SDPA backend's forward+backward (flash, memory-efficient, cuDNN, math), and an
NCCL all_reduce in a one-rank process group. Prints one JSON document.

    python3 tools/gpu/context_probe.py > context.json
"""
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

rows = []


def record(after):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    used = total - free
    res = torch.cuda.memory_reserved()
    rows.append({"after": after, "used": used, "reserved": res, "allocated": torch.cuda.memory_allocated(),
                 "outside_allocator": used - res})


def main():
    torch.cuda.init()
    torch.empty(1, device="cuda")
    record("CUDA init (context)")
    a = torch.randn(1024, 1024, device="cuda")
    _ = a @ a
    record("fp32 matmul (cuBLAS handle)")
    h = a.bfloat16()
    _ = h @ h
    record("bf16 matmul")
    _ = F.linear(h, h, torch.zeros(1024, device="cuda", dtype=torch.bfloat16))
    record("bf16 linear with bias (cuBLASLt)")
    w = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    (h @ w).float().sum().backward()
    record("bf16 matmul backward (autograd thread)")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                     ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)]:
        q = torch.randn(4, 16, 1024, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        try:
            with sdpa_kernel(be):
                F.scaled_dot_product_attention(q, q, q, is_causal=True).float().sum().backward()
            record(f"SDPA {name} bf16 forward+backward")
        except RuntimeError as e:
            rows.append({"after": f"SDPA {name}", "error": str(e).splitlines()[0]})
    try:
        import torch.distributed as dist
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29517", rank=0, world_size=1,
                                device_id=torch.device("cuda:0"))
        t = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(t)
        record("NCCL all_reduce, one rank")
        dist.destroy_process_group()
        record("NCCL process group destroyed")
    except Exception as e:  # noqa: BLE001 (a data point, not a failure)
        rows.append({"after": "NCCL", "error": str(e).splitlines()[0]})
    p = torch.cuda.get_device_properties(0)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        smi = ""
    json.dump({"device": p.name, "capability": f"{p.major}.{p.minor}", "total_memory": p.total_memory,
               "mem_get_info_total": torch.cuda.mem_get_info()[1], "torch": torch.__version__,
               "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "nvidia_smi": smi,
               "lazy_loading": os.environ.get("CUDA_MODULE_LOADING", "(default: LAZY)"), "rows": rows},
              sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
