"""test_classify.py — caffe.Classifier and caffe.Detector against the same preprocessing done by
hand through caffe.io.Transformer and net.forward (ten crops, centre crop, channel swap, raw
scale, mean, input scale, context padding), a calibrated int8 Classifier, `python -m mpcaffe
classify` on a folder of PNGs, BVLC's 00-classification notebook idiom (a reshaped input batch)
and the scores of a BVLC deploy net against OpenCV's Caffe reader."""

import os
import subprocess
import sys

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import _classify_command

BATCH = 10  # the deploy net's batch: one image's ten crops
TINY = """name: "tiny"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 10 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3
    weight_filler { type: "gaussian" std: 0.05 } bias_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "fc" type: "InnerProduct" bottom: "conv1" top: "fc"
  inner_product_param { num_output: 5
    weight_filler { type: "gaussian" std: 0.05 } bias_filler { type: "gaussian" std: 0.1 } } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""
MEAN = np.array([104.0, 117.0, 123.0], np.float32)  # BGR, as the ImageNet models' mean
PREPROCESS = dict(mean=MEAN, raw_scale=255.0, channel_swap=(2, 1, 0), input_scale=0.02)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(deploy prototxt, caffemodel of its filler weights)."""
    tmp = tmp_path_factory.mktemp("classify")
    model = tmp / "deploy.prototxt"
    model.write_text(TINY)
    weights = tmp / "weights.caffemodel"
    caffe.Net(str(model), caffe.TEST).save(str(weights))
    return str(model), str(weights)


def _images(n, height=11, width=13, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0, 1, (height, width, 3)).astype(np.float32) for _ in range(n)]


def _transformer(net, mean=None, raw_scale=None, channel_swap=None, input_scale=None):
    transformer = caffe.io.Transformer({"data": net.blobs["data"].data.shape})
    transformer.set_transpose("data", (2, 0, 1))
    if mean is not None:
        transformer.set_mean("data", mean)
    if raw_scale is not None:
        transformer.set_raw_scale("data", raw_scale)
    if channel_swap is not None:
        transformer.set_channel_swap("data", channel_swap)
    if input_scale is not None:
        transformer.set_input_scale("data", input_scale)
    return transformer


def _forward(net, inputs):
    """The net's 'prob' of N inputs, BATCH at a time through net.forward (the last padded)."""
    rows = []
    for start in range(0, len(inputs), BATCH):
        chunk = inputs[start:start + BATCH]
        padded = np.zeros((BATCH,) + chunk.shape[1:], np.float32)
        padded[:len(chunk)] = chunk
        rows.append(np.array(net.forward(data=padded)["prob"][:len(chunk)]))
    return np.concatenate(rows)


def _reference(tiny, images, image_dims, oversample, preprocess):
    """What pycaffe's Classifier.predict computes, written out: resize, the crops by slicing,
    Transformer.preprocess, net.forward, the mean over each image's ten crops."""
    net = caffe.Net(tiny[0], caffe.TEST, weights=tiny[1])
    transformer = _transformer(net, **preprocess)
    height, width = image_dims
    h, w = net.blobs["data"].data.shape[2:]
    crops = []
    for image in images:
        big = caffe.io.resize_image(image, image_dims)
        cy, cx = (height - h) // 2, (width - w) // 2
        if oversample:
            corners = [(0, 0), (0, width - w), (height - h, 0), (height - h, width - w), (cy, cx)]
            five = [big[y:y + h, x:x + w] for y, x in corners]
            crops += five + [c[:, ::-1] for c in five]
        else:
            crops.append(big[cy:cy + h, cx:cx + w])
    scores = _forward(net, np.stack([transformer.preprocess("data", c) for c in crops]))
    return scores.reshape(len(images), 10, -1).mean(1) if oversample else scores


def test_transformer_applies_swap_scale_mean_in_bvlc_order(tiny):
    net = caffe.Net(tiny[0], caffe.TEST)
    image = _images(1, 8, 8)[0]
    x = _transformer(net, **PREPROCESS).preprocess("data", image)
    by_hand = (image.transpose(2, 0, 1)[[2, 1, 0]] * 255.0 - MEAN[:, None, None]) * 0.02
    np.testing.assert_allclose(x, by_hand, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("oversample", [True, False], ids=["ten_crops", "center_only"])
def test_classifier_predicts_as_the_transformer_and_forward(tiny, oversample):
    classifier = caffe.Classifier(tiny[0], tiny[1], image_dims=(10, 12), **PREPROCESS)
    assert isinstance(classifier, caffe.Net) and classifier.inputs == ["data"]
    images = _images(3)
    got = classifier.predict(images, oversample=oversample)
    assert got.shape == (3, 5)
    np.testing.assert_allclose(got, _reference(tiny, images, (10, 12), oversample, PREPROCESS),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.sum(1), 1.0, rtol=1e-5)


def test_oversample_differs_from_center_only_and_defaults_follow_bvlc(tiny):
    classifier = caffe.Classifier(tiny[0], tiny[1], image_dims=(12, 12), **PREPROCESS)
    images = _images(2, 12, 12, seed=1)
    ten, centre = classifier.predict(images), classifier.predict(images, oversample=False)
    assert np.abs(ten - centre).max() > 1e-4
    # Without image_dims images go to the input's own size: the centre crop is the whole image.
    plain = caffe.Classifier(tiny[0], tiny[1])
    assert tuple(plain.image_dims) == tuple(plain.crop_dims) == (8, 8)
    net = caffe.Net(tiny[0], caffe.TEST, weights=tiny[1])
    transformer = _transformer(net)
    inputs = np.stack([transformer.preprocess("data", caffe.io.resize_image(im, (8, 8)))
                       for im in images])
    np.testing.assert_allclose(plain.predict(images, oversample=False), _forward(net, inputs),
                               rtol=1e-5, atol=1e-6)
    # A K×H×W mean is subtracted element by element.
    mean = np.random.default_rng(2).uniform(0, 50, (3, 8, 8)).astype(np.float32)
    full = caffe.Classifier(tiny[0], tiny[1], mean=mean, raw_scale=255.0)
    transformer = _transformer(net, mean=mean, raw_scale=255.0)
    inputs = np.stack([transformer.preprocess("data", caffe.io.resize_image(im, (8, 8)))
                       for im in images])
    np.testing.assert_allclose(full.predict(images, oversample=False), _forward(net, inputs),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="larger than image_dims"):
        caffe.Classifier(tiny[0], tiny[1], image_dims=(6, 6)).predict(images)


def test_calibrated_int8_classifier_classifies_as_fp32(tiny, tmp_path):
    fp32 = caffe.Classifier(tiny[0], tiny[1], image_dims=(10, 12), **PREPROCESS)
    images = _images(6, seed=3)
    samples = np.stack([fp32.transformer.preprocess("data", caffe.io.resize_image(im, (8, 8)))
                        for im in images])
    calibrated, typed = tmp_path / "int8.caffemodel", tmp_path / "int8.prototxt"
    caffe.calibrate(tiny[0], tiny[1], str(calibrated), dtype="int8", output_model=str(typed),
                    input=samples)
    by_dtype = caffe.Classifier(tiny[0], str(calibrated), image_dims=(10, 12), dtype="int8",
                                **PREPROCESS)
    assert any(b.data_type == caffe.data_type.CAFFE_INT8_QUANTIZED
               for b in by_dtype.blobs.values())
    by_typed_file = caffe.Classifier(str(typed), str(calibrated), image_dims=(10, 12), **PREPROCESS)
    ours = by_dtype.predict(images)
    np.testing.assert_array_equal(ours, by_typed_file.predict(images))
    np.testing.assert_allclose(ours, fp32.predict(images), atol=0.02)


def test_typed_classifier_runs_at_the_tools_optimizer_level(tiny):
    # dtype= builds at level 2, where a converted net's BatchNorm and Scale fold into its
    # convolutions; optimize= chooses; a Net keeps level 1 (unless MPCAFFE_OPTIMIZE says).
    half = caffe.Classifier(tiny[0], tiny[1], dtype="fp16", **PREPROCESS)
    kept = caffe.Classifier(tiny[0], tiny[1], dtype="fp16", optimize=1, **PREPROCESS)
    assert (half.optimize_level, kept.optimize_level) == (2, 1)
    images = _images(2, seed=5)
    np.testing.assert_allclose(half.predict(images), kept.predict(images), atol=2e-3)
    expected = int(os.environ.get("MPCAFFE_OPTIMIZE") or 1)
    assert caffe.Net(tiny[0], caffe.TEST).optimize_level == expected
    assert caffe.Net(tiny[0], caffe.TEST, optimize=2).optimize_level == 2
    with pytest.raises(caffe.Error, match="optimize"):
        caffe.Net(tiny[0], caffe.TEST, optimize=3)


def test_calibrate_on_image_files_writes_the_report(tiny, tmp_path):
    # mpcaffe.calibrate(images=...): PNG files preprocessed by the command line as the Classifier
    # preprocesses arrays (resize, centre crop, mean per channel, raw_scale, scale, RGB order).
    from PIL import Image
    folder = tmp_path / "photos"
    folder.mkdir()
    images = _images(6, height=10, width=12, seed=4)
    for i, im in enumerate(images):
        Image.fromarray((im * 255).round().astype(np.uint8)).save(folder / f"p{i}.png")
    calibrated, report = tmp_path / "int8.caffemodel", tmp_path / "report.json"
    text = caffe.calibrate(tiny[0], tiny[1], calibrated, dtype="int8", images=folder,
                           resize=(10, 12), mean_values=MEAN, raw_scale=255.0, scale=0.02,
                           channel_swap=(2, 1, 0), report=report)
    assert "top-1" in text, text
    import json
    summary = json.loads(report.read_text())
    assert summary["count"] == 6 and len(summary["per_image"]) == 6, summary
    assert 0.0 <= summary["top1_agreement"] <= 1.0
    fp32 = caffe.Classifier(tiny[0], tiny[1], image_dims=(10, 12), **PREPROCESS)
    int8 = caffe.Classifier(tiny[0], str(calibrated), image_dims=(10, 12), dtype="int8",
                            **PREPROCESS)
    reread = [caffe.io.load_image(str(folder / f"p{i}.png")) for i in range(6)]
    np.testing.assert_allclose(int8.predict(reread, oversample=False),
                               fp32.predict(reread, oversample=False), atol=0.02)
    with pytest.raises(caffe.Error, match="missing"):
        caffe.calibrate(tiny[0], tiny[1], calibrated, dtype="int8", images=tmp_path / "missing")


def test_fp16_classifier_from_a_netparameter(tiny):
    device = next(d for d in caffe.devices() if d["index"] == caffe.device_index())
    if not device["fp16"]:
        pytest.skip(f"device {device['description']} has no fp16")
    from google.protobuf import text_format
    param = text_format.Parse(TINY, caffe.NetParameter())
    fp16 = caffe.Classifier(param, tiny[1], dtype="fp16", **PREPROCESS)
    assert caffe.data_type.CAFFE_HALF in {b.data_type for b in fp16.blobs.values()}
    fp32 = caffe.Classifier(param, tiny[1], **PREPROCESS)
    images = _images(2)
    np.testing.assert_allclose(fp16.predict(images), fp32.predict(images), atol=2e-3)


def test_classifier_without_a_device_takes_the_classify_commands(tiny):
    # No device chosen: the one `mpcaffe classify` takes for the net (the per-net rule); a
    # set_device choice wins; neither call leaves a device chosen that was not.
    pinned = caffe._mpcaffe._pinned_device()
    try:
        caffe._mpcaffe._set_pinned_device(-1)
        before = caffe.device_index()
        expected = caffe._mpcaffe._device_for_net(tiny[0], True)[0]
        assert caffe.Classifier(tiny[0], tiny[1], **PREPROCESS).device_index == expected
        assert caffe._mpcaffe._pinned_device() == -1 and caffe.device_index() == before
        other = next((d["index"] for d in caffe.devices() if d["index"] != expected), expected)
        caffe.set_device(other)
        assert caffe.Classifier(tiny[0], tiny[1], **PREPROCESS).device_index == other
        assert caffe._mpcaffe._pinned_device() == other
    finally:
        caffe._mpcaffe._set_pinned_device(pinned)


def test_device_keyword_builds_there_and_leaves_the_default(tiny):
    devices = caffe.devices()
    before = caffe.device_index()
    other = devices[-1]["index"]
    classifier = caffe.Classifier(tiny[0], tiny[1], device=other)
    assert classifier.device_index == other
    assert caffe.device_index() == before
    with pytest.raises(caffe.DeviceError):
        caffe.Classifier(tiny[0], tiny[1], device=len(devices) + 5)
    assert caffe.device_index() == before


def _write_png(path, image):
    from PIL import Image
    Image.fromarray((np.clip(image, 0, 1) * 255).round().astype(np.uint8)).save(path)


def test_detector_windows_as_crops_through_the_transformer(tiny, tmp_path):
    png = tmp_path / "scene.png"
    _write_png(png, _images(1, 20, 24, seed=4)[0])
    windows = [np.array([0, 0, 8, 8]), np.array([4, 6, 16, 20]), np.array([10, 12, 20, 24])]
    detector = caffe.Detector(tiny[0], tiny[1], **PREPROCESS)
    detections = detector.detect_windows([(str(png), windows)])
    assert [d["filename"] for d in detections] == [str(png)] * 3
    assert all(d["window"] is w for d, w in zip(detections, windows))
    net = caffe.Net(tiny[0], caffe.TEST, weights=tiny[1])
    transformer = _transformer(net, **PREPROCESS)
    image = caffe.io.load_image(str(png))
    inputs = np.stack([transformer.preprocess("data", image[y0:y1, x0:x1])
                       for y0, x0, y1, x1 in windows])
    np.testing.assert_allclose(np.stack([d["prediction"] for d in detections]),
                               _forward(net, inputs), rtol=1e-5, atol=1e-6)


def test_detector_context_pad_fills_beyond_the_image_with_the_mean(tiny):
    detector = caffe.Detector(tiny[0], tiny[1], context_pad=1, **PREPROCESS)
    assert tuple(detector.crop_dims) == (8, 8, 3)
    # The mean back in image space: RGB order, divided by raw_scale.
    np.testing.assert_allclose(detector.crop_mean.reshape(3), MEAN[::-1] / 255.0, rtol=1e-6)
    image = np.full((16, 16, 3), 0.9, np.float32)
    crop = detector.crop(image, np.array([0, 0, 6, 6]))  # the context above and left is outside
    assert crop.shape == (8, 8, 3)
    np.testing.assert_allclose(crop[0, 0], MEAN[::-1] / 255.0, rtol=1e-6)
    np.testing.assert_allclose(crop[-1, -1], 0.9, rtol=1e-6)
    inside = detector.crop(image, np.array([4, 4, 10, 10]))
    np.testing.assert_allclose(inside, 0.9, rtol=1e-6)
    with pytest.raises(ImportError, match="selective_search_ijcv_with_python"):
        detector.detect_selective_search(["scene.png"])


@pytest.fixture()
def photo_folder(tmp_path):
    """A folder of three tiny PNGs (and a .txt the default extension filter leaves out)."""
    folder = tmp_path / "photos"
    folder.mkdir()
    for i, image in enumerate(_images(3, 14, 15, seed=5)):
        _write_png(folder / f"photo{i}.png", image)
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_python_m_mpcaffe_classify_folder_prints_top_k(tiny, photo_folder, tmp_path):
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"class {c}\n" for c in "ABCDE"))
    mean = tmp_path / "mean.npy"
    np.save(mean, np.broadcast_to(MEAN[:, None, None], (3, 12, 12)))
    out = tmp_path / "scores.npy"
    run = subprocess.run(
        [sys.executable, "-m", "mpcaffe", "classify", str(photo_folder), str(out),
         "--model_def", tiny[0], "--pretrained_model", tiny[1], "--images_dim", "10,12",
         "--mean_file", str(mean), "--input_scale", "0.02", "--ext", "png",
         "--labels", str(labels), "--top", "2"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    scores = np.load(out)
    names = sorted(str(p) for p in photo_folder.glob("*.png"))
    classifier = caffe.Classifier(tiny[0], tiny[1], image_dims=(10, 12), **PREPROCESS)
    expected = classifier.predict([caffe.io.load_image(n) for n in names])
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)
    lines = run.stdout.splitlines()
    assert len(lines) == 3 * 3 and lines[0::3] == names
    for i in range(3):
        best = np.argsort(-expected[i])[:2]
        for line, c in zip(lines[3 * i + 1:3 * i + 3], best):
            assert line == f'{expected[i][c]:.4f} - "class {"ABCDE"[c]}"'
    assert "Classifying 3 inputs" in run.stderr


def test_classify_command_npy_binaryproto_mean_center_only_device(tiny, tmp_path, capsys):
    images = np.stack(_images(2, 12, 12, seed=6))
    npy = tmp_path / "images.npy"
    np.save(npy, images)
    mean = tmp_path / "mean.binaryproto"
    blob = caffe.io.array_to_blobproto(np.broadcast_to(MEAN[:, None, None], (1, 3, 12, 12)))
    mean.write_bytes(blob.SerializeToString())
    out = tmp_path / "scores.npy"
    status = _classify_command.main(
        [str(npy), str(out), "--model_def", tiny[0], "--pretrained_model", tiny[1],
         "--images_dim", "12,12", "--mean_file", str(mean), "--input_scale", "0.02",
         "--center_only", "--print_results", "--device", str(caffe.devices()[-1]["index"])])
    assert status == 0
    classifier = caffe.Classifier(tiny[0], tiny[1], image_dims=(12, 12), **PREPROCESS)
    np.testing.assert_allclose(np.load(out), classifier.predict(list(images), oversample=False),
                               rtol=1e-5, atol=1e-6)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"{npy}[0]" and len(printed) == 2 * 6  # five classes: all of them


def test_classify_command_usage_errors(tiny, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        _classify_command.main(["in.png", "out.npy", "--model_def", tiny[0], "--bogus"])
    assert exit_.value.code == 2
    assert "usage: mpcaffe classify" in capsys.readouterr().err
    status = _classify_command.main([str(tmp_path), str(tmp_path / "o.npy"), "--model_def",
                                     tiny[0], "--images_dim", "8,8"])
    assert status == 1
    assert "no *.jpg files" in capsys.readouterr().err


def _follows_reshaped_input():
    """Whether net.forward() reshapes every layer after the input blob is reshaped (BVLC's
    Net::Forward does)."""
    net = caffe.Net(_tiny_param(2), caffe.TEST)
    net.blobs["data"].reshape(3, 3, 8, 8)
    net.forward()
    return net.blobs["prob"].data.shape[0] == 3


def _tiny_param(batch):
    from google.protobuf import text_format
    param = text_format.Parse(TINY, caffe.NetParameter())
    param.layer[0].input_param.shape[0].dim[0] = batch
    return param


def test_notebook_00_classification_reshaped_batch(tiny, tmp_path):
    """BVLC's examples/00-classification, with a small net and 8×8 images for 227×227."""
    if not _follows_reshaped_input():
        pytest.skip("this build's Net::Forward does not reshape the layers after "
                    "net.blobs['data'].reshape() (BVLC's does); rebuild with that fix")
    png = tmp_path / "cat.png"
    _write_png(png, _images(1, 9, 9, seed=7)[0])
    net = caffe.Net(tiny[0], caffe.TEST, weights=tiny[1])
    mu = MEAN
    transformer = caffe.io.Transformer({"data": net.blobs["data"].data.shape})
    transformer.set_transpose("data", (2, 0, 1))
    transformer.set_mean("data", mu)
    transformer.set_raw_scale("data", 255)
    transformer.set_channel_swap("data", (2, 1, 0))
    image = caffe.io.load_image(str(png))
    transformed_image = transformer.preprocess("data", image)
    reference = _forward(caffe.Net(tiny[0], caffe.TEST, weights=tiny[1]),
                         transformed_image[None])[0]
    for batch in (50, 3, 12):  # growing, shrinking, growing again
        net.blobs["data"].reshape(batch, 3, 8, 8)
        net.blobs["data"].data[...] = transformed_image
        output = net.forward()
        shapes = {name: blob.data.shape[0] for name, blob in net.blobs.items()}
        assert set(shapes.values()) == {batch}, shapes
        output_prob = output["prob"][0]
        assert output_prob.argmax() == reference.argmax()
        np.testing.assert_allclose(output["prob"], np.broadcast_to(reference, (batch, 5)),
                                   rtol=1e-5, atol=1e-6)


def test_bvlc_deploy_scores_match_opencv(bvlc_models, tmp_path):
    """cifar10_quick's deploy net with random weights: caffe.Classifier and the BVLC-era script
    idiom (Net(weights=), io.load_image, Transformer, forward_all) against
    cv2.dnn.readNetFromCaffe on the same caffemodel."""
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless<5 is not installed")
    model = str(bvlc_models / "cifar10" / "cifar10_quick.prototxt")
    net = caffe.Net(model, caffe.TEST)
    rng = np.random.default_rng(8)
    for blobs in net.params.values():
        weights = blobs[0].data
        weights[...] = rng.normal(0, np.sqrt(2.0 / weights[0].size), weights.shape)
        blobs[1].data[...] = rng.normal(0, 0.1, blobs[1].data.shape)
    weights = tmp_path / "cifar10_random.caffemodel"
    net.save(str(weights))
    for i, image in enumerate(_images(3, 36, 40, seed=9)):
        _write_png(tmp_path / f"{i}.png", image)
    images = [caffe.io.load_image(str(tmp_path / f"{i}.png")) for i in range(3)]

    classifier = caffe.Classifier(model, str(weights), image_dims=(36, 40), **PREPROCESS)
    scores = classifier.predict(images, oversample=False)
    y, x = 2, 4
    inputs = np.stack([classifier.transformer.preprocess(
        "data", caffe.io.resize_image(im, (36, 40))[y:y + 32, x:x + 32]) for im in images])
    reader = cv2.dnn.readNetFromCaffe(model, str(weights))
    reader.setInput(inputs)
    names = ["ip2", "prob"]
    ip2, prob = reader.forward(names)
    np.testing.assert_allclose(scores, prob, atol=1e-4)
    assert np.abs(ip2).max() > 0.1 and prob.max() < 0.99  # neither trivial nor saturated

    script_net = caffe.Net(model, caffe.TEST, weights=str(weights))
    transformer = caffe.io.Transformer({"data": script_net.blobs["data"].data.shape})
    transformer.set_transpose("data", (2, 0, 1))
    transformer.set_channel_swap("data", (2, 1, 0))
    transformer.set_raw_scale("data", 255.0)
    transformer.set_mean("data", MEAN)
    transformer.set_input_scale("data", 0.02)
    data = np.stack([transformer.preprocess("data", im) for im in images])  # resized to 32×32
    out = script_net.forward_all(blobs=["ip2"], data=data)
    reader.setInput(data)
    ip2, prob = reader.forward(names)
    np.testing.assert_allclose(out["ip2"], ip2, atol=1e-4)
    np.testing.assert_allclose(out["prob"], prob, atol=1e-4)
