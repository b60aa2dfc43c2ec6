#!/usr/bin/env python3
"""Markdown summary of a bench_policy JSON file (--benchmark_out_format=json).

Prints the machine context Google Benchmark recorded and one row per benchmark:
median real and CPU ns over the repetitions, the median CPU time net of
BM_baseline_walk's, the ratio to it, and the coefficient of variation of CPU time.
CPU time is the one quoted against the baseline: on a shared machine real time
also counts the time the thread spent descheduled.
Usage: summarize.py bench_policy.json
"""
import json
import sys

BASELINE = "BM_baseline_walk"

INPUTS = {
    "BM_baseline_walk": "walk over 64 varied states, DoNotOptimize(state.host_avail_bytes != 0)",
    "BM_derive_level": "64 varied states (host unsampled or 16 GiB..1 TiB, avail 0..100 %, PSI avg10 and rate, 0..8 dies)",
    "BM_explain_level": "same 64 varied states; full level_report",
    "BM_host_level": "host total/avail of the varied states",
    "BM_psi_level": "PSI some/full avg10 of the varied states (the psi_level call itself)",
    "BM_die_level": "die (i mod 4) free/budget of the varied states",
    "BM_ladder_plan_for": "levels of the varied states x configs (1..64 slots, window 0 or 512..32768, kv_q4 0/1)",
    "BM_admit_request_gpu": "GPU-resident, 1..131072 tokens, window 0 or 4096..65536, varied states",
    "BM_admit_request_host_admit": "host path, 1..4096 tokens q4/fp32, 256 GiB..1 TiB host 60..95 % avail; all ADMIT",
    "BM_admit_request_host_cap": "host path, 32768..131072 tokens q4/fp32, 2..16 GiB above reserve "
                                 "(1/4 die-bound at 1..2 GiB); all CAP",
    "BM_admit_model_load": "4..80 GiB weights + 1..16 GiB KV, no_die (roomiest of 0..8 dies), varied states",
    "BM_admit_load_spike": "2.4 GiB spike vs the varied states",
    "BM_activation_peak_bytes": "0..1048576 tokens, even over the 5 anchor segments and past the last",
    "BM_host_cost_bytes": "same token counts, q4/fp32 alternating",
    "BM_admit_request_host_admit_model/llama3_8b": "the host-ADMIT corpus on a Llama-3-8B shape (f16 / q4_0 KV); all ADMIT",
    "BM_admit_request_host_admit_model/gemma2_9b": "the host-ADMIT corpus on a Gemma-2-9B shape (21 sliding layers); all ADMIT",
    "BM_admit_request_host_cap_model/llama3_8b": "the host-CAP corpus on a Llama-3-8B shape; all CAP",
    "BM_admit_request_host_cap_model/gemma2_9b": "the host-CAP corpus on a Gemma-2-9B shape (window breakpoint); all CAP",
    "BM_admit_request_host_cap_model/llama3_coefficients": "the host-CAP corpus, Llama-3-8B KV, activation as "
                                                           "coefficients (N^2 piece: binary search); all CAP",
    "BM_host_cost_bytes_model/llama3_8b": "the token counts, f16 / q4_0 alternating",
    "BM_host_cost_bytes_model/gemma2_9b": "the token counts, bf16 / q4_0 alternating (sliding window)",
    "BM_admit_host_bytes": "188 MiB vs the varied states",
    "BM_parse_bytes": "16 valid sizes (\"1.5 GiB\", \"512KiB\", \"17179869184\", ...)",
    "BM_constexpr_table": "walk over a compile-time table of derive_level / admit_request (CAP) / ladder results",
    "BM_constexpr_admit_request": "one constexpr admit_request (65536 fp32 tokens, 2 GiB slack), no walk",
}


def main(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    ctx = data["context"]
    print("context:")
    for key in ("date", "host_name", "executable", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled",
                "load_avg", "library_build_type"):
        if key in ctx:
            print(f"  {key}: {ctx[key]}")
    for c in ctx.get("caches", []):
        copies = ctx["num_cpus"] // c["num_sharing"] if c["num_sharing"] else 1
        print(f"  cache: L{c['level']} {c['type']} {c['size'] // 1024} KiB (x{copies})")
    for key in sorted(k for k in ctx if k.startswith("pnmem_")):
        print(f"  {key}: {ctx[key]}")

    med, cv, counters = {}, {}, {}
    order = []
    for b in data["benchmarks"]:
        name = b["run_name"]
        if b.get("aggregate_name") == "median":
            if b["time_unit"] != "ns":
                sys.exit(f"{name}: unexpected time unit {b['time_unit']}")
            med[name] = (b["real_time"], b["cpu_time"])
            order.append(name)
            extra = {k: v for k, v in b.items() if k == "cost_evals"}
            if extra:
                counters[name] = extra
        elif b.get("aggregate_name") == "cv":
            cv[name] = b["cpu_time"]
    base = med[BASELINE][1]
    print()
    print("| benchmark | median real ns | median CPU ns | CPU net of baseline ns | CPU ratio to baseline | CPU CV | inputs |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in order:
        real, cpu = med[name]
        note = INPUTS.get(name, "")
        if name in counters:
            note += f" ({counters[name]['cost_evals']:.1f} host_cost evaluations per call)"
        print(f"| {name} | {real:.2f} | {cpu:.2f} | {cpu - base:+.2f} | {cpu / base:.1f}x | "
              f"{cv.get(name, 0) * 100:.1f} % | {note} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench_policy.json")
