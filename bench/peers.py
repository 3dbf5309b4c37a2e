#!/usr/bin/env python3
"""bench/peers.py — mpcaffe against its peers, measured back to back in one run on one machine:
the same net exported to ONNX (mpcaffe.onnx.export) and run on the CPU by ONNX Runtime and
OpenVINO in fp32 and in int8 (ONNX Runtime's static QDQ quantization, calibrated on the same
synthetic input mpcaffe calibrates on; OpenVINO runs that same QDQ net), and by OpenCV's DNN
module in fp32 on the Caffe files, each right after `mpcaffe bench net` of the same net, data
type and batch on every chosen device; and the net's GEMMs through LibDNN against CLBlast on
each device (`mpcaffe bench gemm --model`). Every engine runs at one CPU level (`--level`:
native, or avx2 on an AVX-512 machine; bench/peer_engines.py says how each is held there).

    bench/peers.py --model net.prototxt [--batch 1,16] [--iterations 10] [--rounds 1]
                   [--json peers.json]
                   [--mpcaffe build/bin/mpcaffe] [--device i|i,j|all] [--no-clblast]
                   [--peers onnxruntime,openvino,opencv] [--level native|avx2]

The JSON ({"kind": "peers", "model", "level", "cpu", "results": [...]}) is read by
bench/report.py next to the `bench net` files and by bench/peers_table.py: one row per peer,
batch, data type and mpcaffe device, each carrying the device's identity keys (as `bench net`
writes them) and the CPU level the peer (`cpu_level`) and mpcaffe (`ours_cpu_level`) ran at. A
ratio mpcaffe / peer below 1 means mpcaffe is faster. A peer that is not installed is left out
with a message (ONNX Runtime is required: it quantizes the int8 net).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np
from google.protobuf import text_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_engines as pe  # noqa: E402  (bench/peer_engines.py, beside this file)

LOSS_TYPES = {"SoftmaxWithLoss", "EuclideanLoss", "Accuracy", "SigmoidCrossEntropyLoss",
              "HingeLoss", "InfogainLoss", "ContrastiveLoss", "MultinomialLogisticLoss"}


def synthetic_chw(layer):
    """The (C, H, W) mpcaffe's --synthetic gives a Data layer without its mean file."""
    crop = layer.transform_param.crop_size
    if crop:
        return [3, crop, crop]
    source = layer.data_param.source.lower()
    if "mnist" in source:
        return [1, 28, 28]
    if "cifar" in source:
        return [3, 32, 32]
    raise SystemExit(f"peers: cannot tell the input shape of Data layer '{layer.name}'")


def inference_param(mpcaffe, model, batch):
    """The TEST-phase inference net: Data layers as Input layers of `batch` giving only the data
    top, every Input's batch set, loss and accuracy layers removed (so the last layer's top is
    the output the ONNX model returns) — what `mpcaffe bench net` runs on its synthetic inputs,
    in a form the ONNX exporter takes."""
    param = mpcaffe.NetParameter()
    with open(model) as f:
        text_format.Parse(f.read(), param)
    out = mpcaffe.NetParameter()
    out.CopyFrom(param)
    del out.layer[:]
    for layer in param.layer:
        if any(r.HasField("phase") and r.phase == mpcaffe.caffe_pb2.TRAIN for r in layer.include):
            continue
        if layer.type in LOSS_TYPES:
            continue
        new = out.layer.add()
        new.CopyFrom(layer)
        if layer.type == "Data":
            new.ClearField("data_param")
            new.ClearField("transform_param")
            new.ClearField("include")
            new.type = "Input"
            del new.top[1:]  # the label: only the removed loss layers read it
            shape = new.input_param.shape.add()
            shape.dim.extend([batch] + synthetic_chw(layer))
        elif layer.type == "Input":
            for shape in new.input_param.shape:
                if shape.dim:
                    shape.dim[0] = batch
    # The legacy net-level inputs (input_dim / input_shape, as the model zoo's deploy files
    # declare them): their batch too.
    if len(out.input_dim) >= 4:
        for i in range(0, len(out.input_dim), 4):
            out.input_dim[i] = batch
    for shape in out.input_shape:
        if shape.dim:
            shape.dim[0] = batch
    return out


def time_ms(run, iterations):
    run()  # warm-up
    ms = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        run()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), min(ms), max(ms)


DEVICE_KEYS = ("device", "device_index", "backend", "platform", "platform_version",
               "driver_version", "fp16")


def identity(row):
    """The device keys of a `bench net` / `bench gemm` result."""
    return {k: row[k] for k in DEVICE_KEYS if k in row}


def ours(args, dtypes, batch, env=None, weights=None):
    """`mpcaffe bench net` for `dtypes` at `batch` on every chosen device (with the fp32
    `weights` caffemodel when given): [row]. A list of device indices runs one process per
    device: in one process the other runtime's idle worker threads cost the device being timed
    up to 1.5x (AlexNet int8w4 batch 1 on Intel's runtime: 14.5-18 ms beside PoCL, 12.1 ms
    alone)."""
    devices = [None] if args.device is None else (
        [str(args.device)] if str(args.device) == "all" else str(args.device).split(","))
    rows = []
    for device in devices:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ours.json")
            cmd = [args.mpcaffe, "bench", "net", "--model", args.model, "--dtypes",
                   ",".join(dtypes), "--batch", str(batch), "--iterations", str(args.iterations),
                   "--reduced-memory", "on", "--no-setup", "--no-progress", "--json", out]
            if device is not None:
                cmd += ["--devices", device]
            if weights:
                cmd += ["--weights", weights]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, **(env or {})))
            with open(out) as f:
                rows += json.load(f)["results"]
    for r in rows:
        pe.check_device_level(args.level, r.get("device", ""))
    return rows


def realistic_weights(net, rng):
    """Gives a deploy net without trained weights values a trained net could have, so both
    engines run (and calibrate int8 on) the same sane numbers: weights left at zero by a missing
    filler get He-normal values, BatchNorm statistics mean ≈ 0, variance ≈ 1 (the unset zeros
    would scale by 1/√eps), Scale ≈ identity. Layers the fillers already filled stay as they are."""
    for name, layer in zip(net._layer_names, net.layers):
        blobs = net.params.get(name)
        if not blobs:
            continue
        if layer.type in ("Convolution", "InnerProduct", "Deconvolution"):
            w = blobs[0].data
            if not np.any(w):
                fan_in = int(np.prod(w.shape[1:])) or 1
                w[...] = rng.normal(0, np.sqrt(2.0 / fan_in), size=w.shape)
        elif layer.type == "BatchNorm":
            blobs[0].data[...] = rng.normal(0, 0.1, size=blobs[0].data.shape)
            blobs[1].data[...] = rng.uniform(0.5, 1.5, size=blobs[1].data.shape)
            blobs[2].data[...] = 1.0
        elif layer.type == "Scale" and not np.any(blobs[0].data != 1):
            blobs[0].data[...] = rng.uniform(0.8, 1.2, size=blobs[0].data.shape)
            if len(blobs) > 1:
                blobs[1].data[...] = rng.normal(0, 0.1, size=blobs[1].data.shape)


def export(args, mpcaffe, batch, tmp):
    """The inference net at `batch` with realistic weights, saved for mpcaffe (prototxt and
    caffemodel, also what OpenCV DNN reads) and exported to ONNX: (prototxt, weights, fp32.onnx);
    raises mpcaffe.onnx.ExportError when the net has no ONNX form."""
    prototxt = os.path.join(tmp, "net.prototxt")
    with open(prototxt, "w") as f:
        f.write(text_format.MessageToString(inference_param(mpcaffe, args.model, batch)))
    net = mpcaffe.Net(prototxt, mpcaffe.TEST)
    realistic_weights(net, np.random.default_rng(7))
    weights = os.path.join(tmp, "weights.caffemodel")
    net.save(weights)  # mpcaffe's runs load the same weights
    fp32_path = os.path.join(tmp, "fp32.onnx")
    mpcaffe.onnx.export(net, fp32_path)
    return prototxt, weights, fp32_path


def quantize_qdq(ort, q, fp32_path, feeds, tmp):
    """ONNX Runtime's static quantization of the export (QDQ: uint8 activations, int8 weights per
    tensor, MinMax over the one synthetic batch mpcaffe's OBSERVE pass calibrates on too): the
    int8 net both ONNX Runtime and OpenVINO run."""

    class Calibration(q.CalibrationDataReader):
        def __init__(self):
            self.items = iter([feeds])

        def get_next(self):
            return next(self.items, None)

    # ONNX Runtime's recommended pre-processing (shape inference, graph optimization).
    pre_path, int8_path = os.path.join(tmp, "fp32_pre.onnx"), os.path.join(tmp, "int8.onnx")
    try:
        q.quant_pre_process(fp32_path, pre_path)
    except Exception as e:  # the model quantizes without it, only less well
        print(f"note: quant_pre_process failed ({e}); quantizing the plain export")
        pre_path = fp32_path
    q.quantize_static(pre_path, int8_path, Calibration(), quant_format=q.QuantFormat.QDQ,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8,
                      per_channel=False, calibrate_method=q.CalibrationMethod.MinMax)
    return int8_path


def peer_runners(args, engines, prototxt, weights, fp32_path, tmp):
    """{engine: {dtype: a callable running one forward pass}} for every peer engine on the same
    net, weights and input; dtypes an engine cannot run are absent."""
    import onnxruntime as ort
    from onnxruntime import quantization as q
    options = ort.SessionOptions()
    if args.threads:
        options.intra_op_num_threads = args.threads
    session = ort.InferenceSession(fp32_path, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1701)
    feeds = {i.name: rng.uniform(-1, 1, size=i.shape).astype(np.float32)
             for i in session.get_inputs()}
    int8_path = quantize_qdq(ort, q, fp32_path, feeds, tmp)
    runners = {}
    if "onnxruntime" in engines:
        int8 = ort.InferenceSession(int8_path, options, providers=["CPUExecutionProvider"])
        runners["onnxruntime"] = {"fp32": lambda: session.run(None, feeds),
                                  "int8": lambda: int8.run(None, feeds)}
    if "openvino" in engines:
        ov = {}
        for d, path in (("fp32", fp32_path), ("int8", int8_path)):
            failure = pe.openvino_compile_failure(path, args.threads)
            if failure:
                print(f"OpenVINO cannot compile {args.model}'s {d} export ({failure}); no "
                      f"openvino {d} rows", flush=True)
            else:
                ov[d] = pe.openvino_runner(path, feeds, args.threads)
        if ov:
            runners["openvino"] = ov
    if "opencv" in engines:
        try:
            runners["opencv"] = {"fp32": pe.opencv_runner(prototxt, weights, feeds)}
        except Exception as e:  # cv2.error: a layer its Caffe reader does not know
            print(f"OpenCV DNN cannot read {args.model} ({e}); no opencv rows", flush=True)
    return runners


def peer_rows(args, mpcaffe, engines, batch, tmp):
    """Every peer engine's fp32 and int8 on the exported net at `batch`, each right after
    mpcaffe's run of the same dtype: [row]."""
    prototxt, weights, fp32_path = export(args, mpcaffe, batch, tmp)
    runners = peer_runners(args, engines, prototxt, weights, fp32_path, tmp)
    rows = []
    for dtype in args.dtypes.split(","):
        # Back to back: mpcaffe on each device, then every peer, for the same dtype and batch;
        # one row per peer and device (a peer's figures shared). int8w4 (4-bit weights, 8-bit
        # activations) has no peer counterpart: it is compared with the peers' int8.
        if dtype not in ("fp32", "int8", "int8w4"):
            raise SystemExit(f"peers.py: --dtypes: {dtype!r} is not fp32, int8 or int8w4")
        # --rounds R: R alternating rounds of the same (mpcaffe, then every peer), each engine's
        # figure the median of its rounds' medians: a host whose speed drifts between minutes
        # then moves every engine's figure alike instead of one engine's sample alone.
        peer_dtype = "int8" if dtype == "int8w4" else dtype
        mine_rounds, peer_rounds, failed = [], defaultdict(list), set()
        for _ in range(args.rounds):
            mine_rounds.append(ours(args, [dtype], batch, weights=weights))
            for engine, by_dtype in runners.items():
                if peer_dtype not in by_dtype or engine in failed:
                    continue
                try:
                    peer_rounds[engine].append(time_ms(by_dtype[peer_dtype], args.iterations))
                except Exception as e:  # e.g. cv2.error: a layer it reads but cannot run
                    print(f"batch {batch} {dtype}: {engine} failed ({e}); no {engine} row",
                          flush=True)
                    failed.add(engine)
        mine = [dict(r, forward_ms_median=statistics.median(
                         m[i]["forward_ms_median"] for m in mine_rounds),
                     forward_ms_min=min((m[i].get("forward_ms_min") for m in mine_rounds
                                         if m[i].get("forward_ms_min") is not None),
                                        default=None))
                for i, r in enumerate(mine_rounds[0])]
        for engine, figures in peer_rounds.items():
            if engine in failed:
                continue
            med = statistics.median(f[0] for f in figures)
            lo, hi = min(f[1] for f in figures), max(f[2] for f in figures)
            for r in mine:
                rows.append({"engine": engine, "version": pe.version(engine),
                             "dtype": dtype, "peer_dtype": peer_dtype, "batch": batch,
                             "forward_ms_median": med, "forward_ms_min": lo,
                             "forward_ms_max": hi, "ours_ms_median": r["forward_ms_median"],
                             "ours_ms_min": r.get("forward_ms_min"),
                             "cpu_level": pe.engine_level(engine, args.level),
                             "ours_cpu_level": pe.engine_level("mpcaffe", args.level),
                             **identity(r)})
                print(f"batch {batch} {dtype}: mpcaffe on {r['device']} "
                      f"{r['forward_ms_median']:.1f} ms, {engine} {med:.1f} ms ({lo:.1f}-{hi:.1f}):"
                      f" ratio {r['forward_ms_median'] / med:.2f}", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the fp32 net (.prototxt)")
    ap.add_argument("--batch", default="1", help="comma-separated batch sizes")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternating rounds of every engine (each its --iterations); an "
                    "engine's figure is the median of its rounds' medians")
    ap.add_argument("--dtypes", default="fp32,int8",
                    help="mpcaffe data types, comma-separated: fp32, int8, int8w4 (int8w4 "
                    "against the peers' int8)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--mpcaffe", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin", "mpcaffe"))
    ap.add_argument("--device", help="mpcaffe device index, indices i,j or all (default: the "
                    "default device)")
    ap.add_argument("--threads", type=int, default=0,
                    help="the peers' intra-op threads (0: their default, every core)")
    ap.add_argument("--peers", default=",".join(pe.ENGINES),
                    help="peer engines, comma-separated (default: every one installed of "
                    f"{', '.join(pe.ENGINES)})")
    ap.add_argument("--level", default="native", choices=sorted(pe.LEVEL_ENV),
                    help="CPU instruction-set level: native (the CPU's), or avx2: every engine "
                    "with a cap held to AVX2 (bench/peer_engines.py)")
    ap.add_argument("--no-clblast", action="store_true", help="skip LibDNN vs CLBlast")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.iterations < 1:
        ap.error("--rounds and --iterations must be at least 1")
    pe.apply_level(args.level)  # before any engine (and mpcaffe's OpenCL runtimes) loads

    import mpcaffe
    import mpcaffe.onnx

    if "onnxruntime" not in pe.available(["onnxruntime"])[0]:
        raise SystemExit("peers.py: ONNX Runtime is not installed (pip install onnxruntime): it "
                         "quantizes the int8 net every peer runs")
    engines, notes = pe.available([e for e in args.peers.split(",") if e])
    for note in notes:
        print(f"peers.py: {note}", flush=True)
    if args.device is not None and args.device.isdigit():
        mpcaffe.set_device(int(args.device))  # the ONNX export builds the net there
    results, skipped = [], []
    for batch in [int(b) for b in args.batch.split(",") if b]:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                results += peer_rows(args, mpcaffe, engines, batch, tmp)
            except (mpcaffe.onnx.ExportError, mpcaffe.Error) as e:
                # A layer ONNX cannot express (e.g. MOE), or one this Python build of mpcaffe
                # does not know: no peer rows for this net.
                print(f"batch {batch}: no ONNX export ({e}); peers skipped", flush=True)
                skipped.append({"batch": batch, "reason": str(e)})
        if not args.no_clblast:
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "gemm.json")
                cmd = [args.mpcaffe, "bench", "gemm", "--model", args.model, "--batch", str(batch),
                       "--json", out]
                if args.device is not None:
                    cmd += ["--device", str(args.device)]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                with open(out) as f:
                    doc = json.load(f)
            for g in doc.get("devices", [doc]):  # one object per device
                results.append({"engine": "clblast (net GEMMs)", "dtype": "fp32", "batch": batch,
                                "forward_ms_median": g["total_ms"]["clblast"],
                                "forward_ms_min": g["total_ms"]["clblast"],
                                "forward_ms_max": g["total_ms"]["clblast"],
                                "ours_ms_median": g["total_ms"]["libdnn"],
                                "note": "sum over the net's convolution and inner-product GEMMs; "
                                        "CLBlast gets the convolutions as plain GEMMs (im2col "
                                        "not counted)",
                                "cpu_level": pe.engine_level("clblast", args.level),
                                "ours_cpu_level": pe.engine_level("mpcaffe", args.level),
                                **identity(g)})
                print(f"batch {batch} net GEMMs on {g['device']}: libdnn "
                      f"{g['total_ms']['libdnn']:.1f} ms, clblast {g['total_ms']['clblast']:.1f} "
                      f"ms", flush=True)
    doc = {"kind": "peers", "model": args.model, "iterations": args.iterations,
           "rounds": args.rounds,
           "level": args.level, "cpu": pe.cpu_isa(), "cpu_caps": pe.LEVEL_ENV[args.level],
           "load_average": os.getloadavg()[0], "results": results, "skipped": skipped}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
