"""test_bench_peers.py — the bench scripts' arithmetic without a device: the CPU level of a
cpuinfo, what each engine is said to run at, issue 44's table built from peers files (medians,
ratios to the best of ONNX Runtime and OpenVINO, geometric means), layer_gap.py's matching of
OpenVINO's node names to Caffe layers and its convolution op counts, and pocl_trace.py's reading
of PoCL's event trace."""
import json
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)
import layer_gap  # noqa: E402
import peer_engines  # noqa: E402
import peers_table  # noqa: E402
import pocl_trace  # noqa: E402


@pytest.mark.parametrize("flags, level", [
    ("fpu avx2 avx512f avx512bw avx512_vnni", "AVX-512 VNNI"),
    ("fpu avx2 avx512f avx512bw", "AVX-512"),
    ("fpu sse2 avx avx2 fma", "AVX2"),
    ("fpu sse2", "no AVX2"),
])
def test_cpu_isa_reads_the_flags_line(tmp_path, flags, level):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: X\nflags\t\t: {flags}\n\n")
    assert peer_engines.cpu_isa(str(cpuinfo)) == level


def test_engine_level_names_the_cap_or_its_absence():
    assert peer_engines.engine_level("openvino", "native", "AVX-512 VNNI") == "AVX-512 VNNI"
    assert peer_engines.engine_level("openvino", "avx2", "AVX-512 VNNI") == "AVX2 (capped)"
    assert peer_engines.engine_level("onnxruntime", "avx2", "AVX-512") == \
        "AVX-512 (ONNX Runtime's MLAS has no ISA cap)"
    # On an AVX2 machine nothing needs a cap.
    assert peer_engines.engine_level("onnxruntime", "avx2", "AVX2") == "AVX2"
    with pytest.raises(SystemExit, match="--level 'avx3'"):
        peer_engines.apply_level("avx3")


def peers_file(path, model, level, rows, levels=None):
    results = []
    for dtype, ours, peer_ms in rows:
        for engine, ms in peer_ms.items():
            for index, platform, mine in ((0, "Intel(R) OpenCL", ours[0]),
                                          (1, "Portable Computing Language", ours[1])):
                results.append({"engine": engine, "dtype": dtype, "batch": 1,
                                "forward_ms_median": ms, "ours_ms_median": mine,
                                "forward_ms_min": ms / 2, "ours_ms_min": mine / 4,
                                "device_index": index, "device": "AMD EPYC",
                                "platform": platform, "backend": "opencl",
                                "cpu_level": (levels or {}).get(engine, "AVX2 (capped)"),
                                "ours_cpu_level": "AVX2 (capped)"})
    path.write_text(json.dumps({"kind": "peers", "model": model, "level": level,
                                "cpu": "AVX-512 VNNI", "cpu_caps": {"X": "1"},
                                "load_average": 2.0, "results": results}))
    return str(path)


def test_peers_table_ratios_against_the_best_of_ort_and_openvino(tmp_path):
    # OpenCV is faster still but is not one of the engines the ratio is held to.
    a = peers_file(tmp_path / "a.json", "/m/zoo/resnet50_deploy.prototxt", "avx2", [
        ("fp32", (60.0, 80.0), {"onnxruntime": 50.0, "openvino": 40.0, "opencv": 30.0}),
        ("int8", (30.0, 45.0), {"onnxruntime": 15.0, "openvino": 20.0})])
    b = peers_file(tmp_path / "b.json", "/m/zoo/mobilenet_v1_deploy.prototxt", "avx2", [
        ("fp32", (10.0, 10.0), {"onnxruntime": 10.0, "openvino": 12.5, "opencv": 9.0}),
        ("int8", (6.0, 9.0), {"onnxruntime": 6.0, "openvino": 3.0})])
    # A repeated run of MobileNet: the medians of the two runs are taken.
    c = peers_file(tmp_path / "c.json", "/m/zoo/mobilenet_v1_deploy.prototxt", "avx2", [
        ("fp32", (14.0, 10.0), {"onnxruntime": 10.0, "openvino": 12.5, "opencv": 9.0}),
        ("int8", (6.0, 9.0), {"onnxruntime": 6.0, "openvino": 3.0})])
    levels = peers_table.load([a, b, c])
    text = peers_table.level_table("avx2", levels["avx2"])
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in text.splitlines()
            if line.startswith("| ResNet") or line.startswith("| MobileNet")}
    assert rows["ResNet-50"][2:7] == ["60.0 / 80.0", "50.0", "**40.0**", "30.0", "1.50 / 2.00"]
    assert rows["ResNet-50"][7:11] == ["30.0 / 45.0", "**15.0**", "20.0", "2.00 / 3.00 |"]
    assert rows["MobileNet v1"][2] == "12.0 / 10.0"
    assert rows["MobileNet v1"][6] == "1.20 / 1.00"
    # Geometric means over the two nets: fp32 Intel √(1.5·1.2), int8 PoCL √(3·3).
    assert "fp32, batch 1, Intel OpenCL: mpcaffe / best of ORT and OpenVINO, geometric mean " \
        "over 2 nets **1.34** (worst 1.50)" in text
    assert "int8, batch 1, PoCL: mpcaffe / best of ORT and OpenVINO, geometric mean over 2 " \
        "nets **3.00** (worst 3.00)" in text
    assert "`X=1`" in text and "AVX2 (capped)" in text


def test_peers_table_best_of_the_iterations(tmp_path):
    a = peers_file(tmp_path / "a.json", "/m/bvlc_alexnet/deploy.prototxt", "native", [
        ("fp32", (60.0, 80.0), {"onnxruntime": 50.0, "openvino": 40.0})])
    text = peers_table.level_table("native", peers_table.load([a], "min")["native"], "min")
    assert "| AlexNet | 1 | 15.0 / 20.0 | 25.0 | **20.0** | 0.75 / 1.00 |" in text
    assert "the best of each engine's iterations" in text


def test_peers_table_leaves_an_uncapped_engine_out_of_the_ratio(tmp_path):
    # At the avx2 level ONNX Runtime ran at AVX-512: shown, marked, not the ratio's peer.
    a = peers_file(tmp_path / "a.json", "/m/bvlc_alexnet/deploy.prototxt", "avx2", [
        ("int8", (30.0, 45.0), {"onnxruntime": 10.0, "openvino": 20.0})],
        levels={"onnxruntime": "AVX-512 VNNI (ONNX Runtime's MLAS has no ISA cap)"})
    text = peers_table.level_table("avx2", peers_table.load([a])["avx2"])
    assert "ORT (AVX-512 VNNI, no cap) int8" in text
    assert "| n/a / n/a | 30.0 / 45.0 | 10.0 | **20.0** | 1.50 / 2.25 |" in text


def test_layer_gap_matches_openvino_names_to_layers():
    names = {"conv1": 0, "conv1/bn": 0, "conv1/scale": 0, "relu1": 0, "conv2_1/dw": 1,
             "conv2_1/sep": 2, "res2a": 3, "res2a_branch2a": 4}
    assert layer_gap.match("node_conv1_1", names) == "conv1"
    assert layer_gap.match("node_conv1/scale_mul", names) == "conv1/scale"
    assert layer_gap.match("conv2_1/dw__v_QuantizeLinear", names) == "conv2_1/dw"
    assert layer_gap.match("node_res2a_branch2a", names) == "res2a_branch2a"
    assert layer_gap.match("Multiply_7502", names) is None
    assert layer_gap.match("node_conv10", names) is None  # conv1 followed by a digit


def test_layer_gap_conv_ops():
    # ResNet-50's conv1: 64 × 112 × 112 outputs of 3 × 7 × 7 products.
    key = "fp32 n1 c3 h224 w224 o64 k7x7 s2x2 p3x3 d1x1 g1 bias"
    assert layer_gap.conv_ops(key) == 2.0 * 64 * 112 * 112 * 3 * 49
    # A depthwise 3×3: one input channel per output.
    key = "int8 n1 c32 h112 w112 o32 k3x3 s1x1 p1x1 d1x1 g32"
    assert layer_gap.conv_ops(key) == 2.0 * 32 * 112 * 112 * 9
    assert layer_gap.conv_ops("fp32 m4096 n1 k9216") is None


def test_layer_gap_summary_by_kind_leaves_out_impossible_profiles():
    key3 = "fp32 n1 c64 h56 w56 o64 k3x3 s1x1 p1x1 d1x1 g1 bias relu"  # 231 MFLOP
    groups = [{"name": n, "type": "Convolution", "ms": ms, "ov_ms": ov,
               "kernels": [{"family": "conv", "for": key3}]} for n, ms, ov in
              (("a", 2.0, 1.0), ("b", 3.0, 1.0), ("c", 2.0, 0.5))]
    for g in groups:
        g["ops"] = layer_gap.conv_ops(key3)
        g["gops"] = g["ops"] / g["ms"] / 1e6
    # c: 231 MFLOP in 0.5 ms is 462 GFLOP/s, over a 240 GFLOP/s peak.
    lines = layer_gap.by_kind(groups, "fp32", 240)
    assert lines[0].startswith("  conv k3 s1: 2 layers, mpcaffe 5.00 ms, OpenVINO 2.00 ms; "
                               "per layer mpcaffe / OpenVINO median 2.5 (2.0-3.0)")
    assert "1 layers left out" in lines[1]
    assert len(layer_gap.by_kind(groups, "fp32", 0)) == 1


def _bench_row(platform, dtype, ms):
    return {"platform": platform, "dtype": dtype, "batch": 1, "forward_ms_median": ms}


def test_rusticl_table_pairs_each_rusticl_row_with_pocl_of_the_same_run(tmp_path):
    import rusticl_table
    path = tmp_path / "alexnet.json"
    path.write_text(json.dumps({
        "model": "/m/bvlc_alexnet/deploy.prototxt", "iterations": 2,
        "results": [_bench_row("Portable Computing Language", "fp32", 20.0),
                    _bench_row("rusticl", "fp32", 3000.0),
                    _bench_row("rusticl", "int8", 4000.0)]}))
    out = tmp_path / "t.md"
    sys.argv = ["rusticl_table.py", str(path), "--markdown", str(out)]
    rusticl_table.main()
    text = out.read_text()
    assert "| bvlc_alexnet | fp32 | 1 | 20.0 | 3,000 | 150× |" in text
    assert "| bvlc_alexnet | int8 | 1 | – | 4,000 | – |" in text
    # A file without rusticl rows is an error naming it.
    path.write_text(json.dumps({"model": "/m/x.prototxt",
                                "results": [_bench_row("Portable Computing Language", "fp32", 1)]}))
    with pytest.raises(SystemExit, match="no rusticl rows"):
        rusticl_table.main()


def test_child_compile_failure_names_a_crash_and_passes_a_clean_exit(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"")
    assert peer_engines.child_compile_failure("import sys; open(sys.argv[1])", str(model)) is None
    crash = peer_engines.child_compile_failure("import os, signal; os.kill(os.getpid(), "
                                               "signal.SIGSEGV)", str(model))
    assert crash.startswith("killed by signal 11")
    failed = peer_engines.child_compile_failure("raise SystemExit('no such layer')", str(model))
    assert failed == "exit status 1: no such layer"


def test_pocl_trace_reads_kernels_and_finds_the_pass(tmp_path):
    # PoCL's text trace: one line per state of each command, a DEP line between some; only
    # kernel commands with a running and a complete time are kept, in event order.
    lines, t = [], 1000
    names = ["warm"] + ["a", "b", "c"] * 4
    for eid, name in enumerate(names, start=1):
        for state in ("queued", "submitted", "running", "complete"):
            t += 10
            lines.append(f"{t} | EV ID {eid} | DEV 1 | CQ 4 | ndrange_kernel | {state} | "
                         f"KERNEL ID {eid} | name={name}")
        lines.append(f"DEP | EV ID {eid} -> EV ID {eid + 1}")
    lines.append(f"{t + 5} | EV ID 99 | DEV 1 | CQ 4 | map_buffer | running | MEM ID 3 | size=4")
    trace = tmp_path / "pocl_trace_events.log"
    trace.write_text("\n".join(lines) + "\n")
    kernels = pocl_trace.read_trace(str(trace))
    assert [k[0] for k in kernels] == names
    assert all(k[2] - k[1] == 10 and k[1] - k[3] == 20 and k[1] - k[4] == 10 for k in kernels)
    assert pocl_trace.pass_length([k[0] for k in kernels]) == 3
    with pytest.raises(SystemExit, match="no repeating pass"):
        pocl_trace.pass_length(["a", "b", "c", "d"])
