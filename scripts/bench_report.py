#!/usr/bin/env python3
"""Collects benchmark JSON lines into one results file (with the machine's
description) and writes bench/report.md: every figure beside the target the
issues set for it, met or not."""
import argparse
import datetime
import json
import os
import platform
import subprocess


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    blas = "unknown"
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libopenblas0-openmp"],
                             capture_output=True, text=True, check=False)
        blas = "OpenBLAS " + out.stdout.strip() if out.stdout.strip() else blas
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "system": platform.platform(),
            "blas": blas, "date": datetime.datetime.now().isoformat(timespec="seconds")}


def verdict(value, target, higher_is_better=True):
    ok = value >= target if higher_is_better else value <= target
    return "met" if ok else "**not met**"


def report(figures, info):
    out = ["# jag benchmark report", "",
           f"Machine: {info['cpu']}, {info['cores']} cores; {info['blas']}; {info['date']}.", "",
           "Every figure is a ratio of two things measured in the same run, interleaved (medians "
           "of 5 rounds; min and max in the JSON), because the machine is shared and noisy.", ""]
    pw = [f for f in figures if f["name"] == "pointwise_vs_memcpy"]
    if pw:
        out += ["## Pointwise ops vs memcpy (float32, bytes moved / s)", "",
                "Target: >= 0.85 of a memcpy of the same bytes for memory-bound ops "
                "(clone, relu, mul_scalar, add, mul). exp and sigmoid are compute-bound on this "
                "machine and shown for reference.", "",
                "| op | n | op GB/s | memcpy GB/s | ratio | target |", "|---|---|---|---|---|---|"]
        for f in pw:
            p, v = f["params"], f["values"]
            bound = p["op"] in ("clone", "relu", "mul_scalar", "add", "mul")
            tgt = verdict(v["ratio_vs_memcpy"], 0.85) if bound else "(compute-bound)"
            out.append(f"| {p['op']} | {p['n']} | {v['op_gbs']:.2f} | {v['memcpy_gbs']:.2f} | "
                       f"{v['ratio_vs_memcpy']:.2f} | {tgt} |")
        out.append("")
    mm = [f for f in figures if f["name"] == "mm_vs_blas"]
    if mm:
        out += ["## jag_mm vs a direct cblas_sgemm", "",
                "Target: >= 0.95 of the direct BLAS call for sizes >= 256.", "",
                "| n | jag GFLOP/s | BLAS GFLOP/s | ratio | target |", "|---|---|---|---|---|"]
        for f in mm:
            p, v = f["params"], f["values"]
            tgt = verdict(v["ratio_vs_blas"], 0.95) if p["n"] >= 256 else "(no target below 256)"
            out.append(f"| {p['n']} | {v['jag_gflops']:.1f} | {v['blas_gflops']:.1f} | "
                       f"{v['ratio_vs_blas']:.2f} | {tgt} |")
        out.append("")
    other = [f for f in figures if f["name"] not in ("pointwise_vs_memcpy", "mm_vs_blas")]
    if other:
        out += ["## Other figures", ""]
        for f in other:
            out.append(f"- `{f['bench']}/{f['name']}` {json.dumps(f['params'])}: {json.dumps(f['values'])}")
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--report", required=True)
    a = ap.parse_args()
    figures = []
    with open(a.lines) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                figures.append(json.loads(line))
    info = machine()
    with open(a.out, "w") as f:
        json.dump({"machine": info, "figures": figures}, f, indent=1)
    with open(a.report, "w") as f:
        f.write(report(figures, info) + "\n")


if __name__ == "__main__":
    main()
