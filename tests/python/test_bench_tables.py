"""test_bench_tables.py — the make bench table generators' arithmetic and parsing without a
device: the 4-bit weights GEMM table from `bench gemm` rows, the per-channel measurement lines of
test_net, the test-suite cost from make test's budget report, and the small-net, binaries and
fusion and training-step tables from their JSON."""
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)
import accuracy_tables  # noqa: E402
import fusion_table  # noqa: E402
import report  # noqa: E402
import setup_tables  # noqa: E402
import small_net  # noqa: E402
import suite_cost  # noqa: E402
import train_step  # noqa: E402

POCL = {"device": "pthread-skylake-avx512-AMD EPYC", "device_index": 1, "backend": "opencl",
        "platform": "Portable Computing Language"}


def gemm_rows(w4_factor):
    rows = []
    for m, n, k in report.ALEXNET_GEMMS:
        for dtype, ms in (("fp32", 4.0), ("int8", 2.0), ("int8w4", 2.0 / w4_factor)):
            rows.append(dict(POCL, impl="libdnn", dtype=dtype, M=m, N=n, K=k, ms=ms,
                             gflops=2.0 * m * n * k / (ms * 1e6)))
    return rows


def test_gemm_w4_table_divides_int8_time_by_int8w4_time():
    text = report.gemm_w4_section(gemm_rows(2.5))
    assert "| 96 × 3025 × 363 | 4.00 / 2.00 / 0.80 | 2.50 |" in text
    assert "| geometric mean |  | **2.50** |" in text
    # Files written before bench gemm measured int8w4: no table, not an empty one.
    assert report.gemm_w4_section([r for r in gemm_rows(2) if r["dtype"] != "int8w4"]) == ""


def test_per_channel_lines_become_the_table_and_missing_nets_are_an_error():
    line = ("{} int8, {} channels, {}: top-1 {}/4 agree with fp32; |logit diff| / spread: "
            "max {}, mean {}")
    out = "\n".join(line.format(f, c, mode, 3, 0.0123, 0.0101)
                    for f in accuracy_tables.PER_CHANNEL_NETS for c in ("equal-size", "spread")
                    for mode in ("per tensor", "every conv and IP per channel (default)"))
    rows = accuracy_tables.parse_per_channel(out + "\n[ OK ] noise")
    assert len(rows) == 12
    text = accuracy_tables.per_channel_markdown({"name": "pocl (x)", "rows": rows})
    assert "| ResNet-50 (zoo), spread | 3/4; 0.0123, 0.0101 | = per tensor | 3/4; 0.0123, 0.0101 |" \
        in text
    with pytest.raises(RuntimeError, match="resnet50_deploy.prototxt"):
        accuracy_tables.parse_per_channel(out.replace("resnet50_deploy", "other"))


def test_suite_cost_sums_make_test_and_names_the_run():
    report_json = {"date": "2030-01-02 03:04 UTC", "machine": "2-core X (AVX2)",
                   "load_average_at_end": 2.5, "make_seconds": 1800.0, "ctest_seconds": 1000.0,
                   "python_seconds": 100.0,
                   "entries": [{"entry": "libdnn@pocl", "status": "passed", "seconds": 420.0,
                                "compiled": 300, "cache_hits": 10, "compile_seconds": 350.0},
                               {"entry": "proto", "status": "FAILED", "seconds": 5.0,
                                "compiled": 0, "cache_hits": 0, "compile_seconds": 0.0},
                               {"entry": "python", "status": "ran", "seconds": 100.0,
                                "compiled": 4, "cache_hits": 50, "compile_seconds": 2.0}]}
    text = suite_cost.markdown(report_json)
    assert "| whole `make test` | 30.0 min |" in text
    assert "| configure and build | 11.7 min |" in text  # 1800 − 1000 − 100 s
    assert "| longest entry, libdnn@pocl | 7.0 min |" in text
    assert "| proto | FAILED | 5.0 | 0 | 0 | 0.0 |" in text
    assert "Not passed in that run: proto." in text
    assert "| install (scripts/install-deps.sh) | n/a |" in text  # a report without it
    report_json["install_seconds"] = 120.0
    text = suite_cost.markdown(report_json)
    assert "| install (scripts/install-deps.sh) | 2.0 min |" in text
    assert "| configure and build | 9.7 min |" in text  # 1800 − 120 − 1000 − 100 s
    assert suite_cost.header(report_json).endswith("load average 2.50 at its end (loaded)")


def test_small_net_speed_is_fp32_time_over_the_type_time():
    rows = [dict(POCL, dtype=t, forward_ms_median=ms)
            for t, ms in (("fp32", 10.0), ("fp16", 20.0), ("int8", 8.0))]
    text = small_net.markdown({"batch": 10000, "iterations": 10, "rows": rows})
    assert "| PoCL | 10.0 | 20.0 (0.50×) | n/a | 8.0 (1.25×) | n/a |" in text


def test_train_step_table_names_the_batch_and_the_implementation():
    row = {"net": "LeNet", "batch": 64, "device": "pocl (pthread-skylake-avx512)",
           "whole_forward_ms_median": 6.14, "backward_ms_median": 17.56,
           "forward_backward_ms_median": 24.04}
    text = train_step.markdown({"runs": 3, "iterations": 20, "rows": [row]})
    assert "medians over 3 runs of each run's median of 20 iterations" in text
    assert "| LeNet (64) | pocl | 6.1 | 17.6 | 24.0 |" in text


def test_binaries_table_sums_the_first_two_runs():
    text = setup_tables.binaries_markdown({"name": "pocl (x)", "rows": [
        {"mode": "auto", "runs_s": [20.0, 30.0, 1.0, 0.9]},
        {"mode": "always", "runs_s": [50.0, 1.0, 0.9, 0.8]}]})
    assert "| 20.0 s | 30.0 s | 1.00, 0.90 s | 50.0 s |" in text
    assert "| 50.0 s | 1.0 s | 0.90, 0.80 s | 51.0 s |" in text


def test_fusion_table_counts_layers_and_reads_launch_lines():
    m = fusion_table.LAUNCH_LINE.match(
        "1: opencl pthread-x   1 work-item:    2.78 us/launch,   21.44 us with Finish each | "
        "64x64 grid:    5.83 us/launch,  204.42 us with Finish each")
    assert m and [float(x) for x in m.groups()[1:]] == [2.78, 21.44, 5.83, 204.42]
    run = {"net": "mobilenet_v1", "dtype": "fp32", "device": "1", "device_name": "pocl (x)",
           "fused_layers": 81, "fusion_chains": 27, "launched_layers": 31,
           "launches_per_forward": 30, "host_syncs_per_forward": 0,
           "whole_forward_ms_median": 8.0, "depthwise_layers": 13, "depthwise_ms": 1.5}
    text = fusion_table.markdown({"runs": [run], "launches": [
        {"device": "pocl (x)", "one": 2.78, "one_finish": 21.44, "grid": 5.83,
         "grid_finish": 204.42}]})
    assert "| MobileNet v1 | fp32 | 112 | 81 into 27 | 31 | 30 | 0 |" in text
    assert "| MobileNet v1 | fp32 | pocl (x) | 8.00 | 1.50 (13) |" in text
    assert "| pocl (x) | 2.78 | 21.44 | 5.83 | 204.42 |" in text
