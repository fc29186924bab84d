#!/usr/bin/env python3
"""Issue 38's targets from one check.sh run's logs (scripts/gpu/check.sh calls it at its end):
each ratio beside its target, from the medians and peaks the same call measured, so that a lease's
figures are read the same way every time. Usage: targets.py OUT (check.sh's folder).

The CPU references for the whole runs are the committed figures of one core of this project's
AMD EPYC on the same data (results/quickstart-cpu-20k-2026-11-28.csv: prepare.sh's folder of
20,000 training images; results/trees-cpu-2026-11-28.csv), overridable with
HTM_CPU_QUICKSTART_IPS and HTM_CPU_TREES_IPS.
"""
import os
import re
import sys


def sections(path):
    """{step name: its lines} from a log of `=== NAME: command` headers."""
    out, name = {}, None
    if not os.path.exists(path):
        return out
    for line in open(path, errors="replace"):
        m = re.match(r"=== (.*?): ", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name is not None:
            out[name].append(line.rstrip("\n"))
    return out


def number(lines, pattern):
    for line in lines:
        m = re.search(pattern, line)
        if m:
            return float(m.group(1))
    return None


def step_ms(s, name):  # the host's median of the timed steps (htm bench's summary line)
    return number(s.get(name, []), r"^summary .*?\s(\d+(?:\.\d+)?) ms")


def gpu_ms(s, name):  # the GPU's own median (events), where printed
    return number(s.get(name, []), r"^gputime .*median (\d+(?:\.\d+)?) ms")


def allocated(s, name):
    return number(s.get(name, []), r"GPU: peak (\d+(?:\.\d+)?) MiB allocated")


def reserved(s, name):
    return number(s.get(name, []), r"MiB allocated, (\d+(?:\.\d+)?) MiB reserved")


def requested(s, name):
    return number(s.get(name, []), r"GPU: peak (\d+(?:\.\d+)?) MiB requested")


def official(s, B, key):
    return number(s.get(f"official code B={B}", []), rf"^official .*\b{key}=(\d+(?:\.\d+)?)")


def fmt(x, unit=""):
    return "n/a" if x is None else f"{x:.1f}{unit}"


def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu-check"
    s = sections(os.path.join(out, "bench.log"))
    lines = []
    for B, target in ((64, ">= 3x, stretch 5x"), (8, ">= 2x")):
        graph, eager, off = step_ms(s, f"htm bench cuda fp32 graph B={B}"), step_ms(s, f"htm bench cuda fp32 B={B}"), \
            official(s, B, "median_ms")
        lines.append(f"target fp32 B={B}: official {fmt(off, ' ms')} / htm graph {fmt(graph, ' ms')} = "
                     f"{ratio(off, graph)} (eager {fmt(eager, ' ms')}: {ratio(off, eager)}); issue: {target}")
    f32, b16 = step_ms(s, "htm bench cuda fp32 graph B=64"), step_ms(s, "htm bench cuda bf16 graph B=64")
    lines.append(f"target bf16 B=64: fp32 graph {fmt(f32, ' ms')} / bf16 graph {fmt(b16, ' ms')} = {ratio(f32, b16)}; "
                 "issue: >= 1.5x")
    for B in (64, 8):
        off_a, off_r = official(s, B, "peak_alloc_mib"), official(s, B, "peak_requested_mib")
        eager = f"htm bench cuda fp32 B={B}"
        parts = [f"eager {fmt(allocated(s, eager), ' MiB')} allocated ({ratio(allocated(s, eager), off_a)}), "
                 f"{fmt(requested(s, eager), ' MiB')} requested ({ratio(requested(s, eager), off_r)})"]
        if B == 8:
            name = "htm bench cuda fp32 sdpa-no-math B=8"
            parts.append(f"eager without the math attention {fmt(allocated(s, name), ' MiB')} allocated "
                         f"({ratio(allocated(s, name), off_a)})")
        for label, name in (("expandable segments", f"htm bench cuda fp32 expandable B={B}"),
                            ("graph", f"htm bench cuda fp32 graph B={B}"),
                            ("graph + recompute mlp", f"htm bench cuda fp32 graph recompute-mlp B={B}")):
            parts.append(f"{label} {fmt(allocated(s, name), ' MiB')} allocated ({ratio(allocated(s, name), off_a)}), "
                         f"{fmt(reserved(s, name), ' MiB')} reserved")
        lines.append(f"target memory B={B}: official {fmt(off_a, ' MiB')} allocated, {fmt(off_r, ' MiB')} requested; "
                     + "; ".join(parts) + "; issue: <= 0.5x allocated")
    for label, with_kernels, with_ops in (
            ("paper B=64 graph", "htm bench cuda fp32 graph B=64", "htm bench cuda fp32 graph torch-ops B=64"),
            ("Trees graph", "htm bench cuda trees graph", "htm bench cuda trees graph torch-ops")):
        kernels, ops = step_ms(s, with_kernels), step_ms(s, with_ops)
        lines.append(f"htm's CUDA kernels, {label}: {fmt(kernels, ' ms')} (GPU {fmt(gpu_ms(s, with_kernels), ' ms')}) "
                     f"against their torch ops {fmt(ops, ' ms')} (GPU {fmt(gpu_ms(s, with_ops), ' ms')}): "
                     f"{ratio(ops, kernels)}")
    # One core's medians: results/quickstart-cpu-20k-2026-11-28.csv (427.3-442.5, the folder
    # prepare.sh makes) and results/trees-cpu-2026-11-28.csv.
    cpu = {"quickstart": float(os.environ.get("HTM_CPU_QUICKSTART_IPS", "437.0")),
           "trees": float(os.environ.get("HTM_CPU_TREES_IPS", "818.0"))}
    for name, body in sections(os.path.join(out, "runs.log")).items():
        kind = "quickstart" if "quickstart" in name else "trees" if "trees" in name else None
        for line in body if kind else []:
            m = re.search(r"finished: .*\((\d+(?:\.\d+)?) img/s\)", line)
            if m:
                ips = float(m.group(1))
                want = ">= 10x" if kind == "quickstart" else ">= 5x"
                lines.append(f"target run ({name}): {ips:.1f} img/s against one CPU core's {cpu[kind]:.1f}: "
                             f"{ips / cpu[kind]:.2f}x; issue: {want}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
