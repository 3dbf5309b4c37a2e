#!/usr/bin/env python3
"""bench/zoo_nets.py — deploy prototxts of public architectures mpcaffe was not tuned on, written
here from their papers' layer tables: SqueezeNet 1.1 (fire modules: a Split into two expands and
a Concat), GoogLeNet (inception modules: four branches into a Concat; BVLC's layer names, without
its LRN layers) and MobileNet v2 (inverted residuals: 1×1 expand, depthwise 3×3, linear 1×1
projection, an Eltwise sum where shapes allow; BatchNorm + Scale after every convolution; ReLU
where the paper has ReLU6, as the Caffe ports do) and DenseNet-121 (dense blocks of pre-activation
BatchNorm + Scale + ReLU before each convolution, a chain of Concats growing each block's output
by 32 channels per layer; transitions of a 1×1 convolution and 2×2 average pooling). Random
weights come from the fillers
(`mpcaffe time --synthetic`, bench/peers.py), so these are for speed and agreement checks:

    python3 bench/zoo_nets.py --output-dir /tmp/zoo            # 224 / 227-pixel inputs
    python3 bench/zoo_nets.py --output-dir /tmp/zoo --size 64  # small, for tests
    python3 bench/peers.py --model /tmp/zoo/googlenet_deploy.prototxt --batch 1 --device 0,1

The final pooling is global, so every size from 32 pixels up gives a valid net.
"""
import argparse
import os


class Writer:
    """Appends layers to a prototxt text; each method returns the name of its top."""

    def __init__(self, name, size):
        self.lines = [f'name: "{name}"',
                      'layer { name: "data" type: "Input" top: "data" input_param { shape { '
                      f'dim: 1 dim: 3 dim: {size} dim: {size} }} }} }}']

    def add(self, text):
        self.lines.append("layer { " + text + " }")

    def conv(self, name, bottom, n, k, stride=1, pad=0, group=1, bias=True):
        self.add(f'name: "{name}" type: "Convolution" bottom: "{bottom}" top: "{name}" '
                 f'convolution_param {{ num_output: {n} kernel_size: {k} stride: {stride} '
                 f'pad: {pad} group: {group} bias_term: {str(bias).lower()} '
                 'weight_filler { type: "msra" } }')
        return name

    def relu(self, blob):
        self.add(f'name: "{blob}/relu" type: "ReLU" bottom: "{blob}" top: "{blob}"')
        return blob

    def bn(self, blob):
        self.add(f'name: "{blob}/bn" type: "BatchNorm" bottom: "{blob}" top: "{blob}" '
                 'batch_norm_param { use_global_stats: true }')
        self.add(f'name: "{blob}/scale" type: "Scale" bottom: "{blob}" top: "{blob}" '
                 'scale_param { bias_term: true }')
        return blob

    def pool(self, name, bottom, k=0, stride=1, pad=0, mode="MAX"):
        shape = "global_pooling: true" if k == 0 else f"kernel_size: {k} stride: {stride} pad: {pad}"
        self.add(f'name: "{name}" type: "Pooling" bottom: "{bottom}" top: "{name}" '
                 f'pooling_param {{ pool: {mode} {shape} }}')
        return name

    def concat(self, name, bottoms):
        self.add(f'name: "{name}" type: "Concat" ' + " ".join(f'bottom: "{b}"' for b in bottoms) +
                 f' top: "{name}"')
        return name

    def classifier(self, bottom, name, dropout=None):
        if dropout:
            self.add(f'name: "{bottom}/drop" type: "Dropout" bottom: "{bottom}" top: "{bottom}" '
                     f'dropout_param {{ dropout_ratio: {dropout} }}')
        if name:
            self.add(f'name: "{name}" type: "InnerProduct" bottom: "{bottom}" top: "{name}" '
                     'inner_product_param { num_output: 1000 weight_filler { type: "xavier" } }')
            bottom = name
        self.add(f'name: "prob" type: "Softmax" bottom: "{bottom}" top: "prob"')
        return "\n".join(self.lines) + "\n"


def squeezenet(size=227):
    w = Writer("squeezenet1.1", size)
    x = w.pool("pool1", w.relu(w.conv("conv1", "data", 64, 3, 2)), 3, 2)

    def fire(i, x, squeeze, expand):
        s = w.relu(w.conv(f"fire{i}/squeeze1x1", x, squeeze, 1))
        return w.concat(f"fire{i}/concat", [w.relu(w.conv(f"fire{i}/expand1x1", s, expand, 1)),
                                            w.relu(w.conv(f"fire{i}/expand3x3", s, expand, 3,
                                                          pad=1))])
    x = w.pool("pool3", fire(3, fire(2, x, 16, 64), 16, 64), 3, 2)
    x = w.pool("pool5", fire(5, fire(4, x, 32, 128), 32, 128), 3, 2)
    for i, s, e in [(6, 48, 192), (7, 48, 192), (8, 64, 256), (9, 64, 256)]:
        x = fire(i, x, s, e)
    w.add(f'name: "drop9" type: "Dropout" bottom: "{x}" top: "{x}" '
          'dropout_param { dropout_ratio: 0.5 }')
    x = w.pool("pool10", w.relu(w.conv("conv10", x, 1000, 1)), mode="AVE")
    return w.classifier(x, None)


def googlenet(size=224):
    w = Writer("googlenet", size)
    x = w.pool("pool1/3x3_s2", w.relu(w.conv("conv1/7x7_s2", "data", 64, 7, 2, 3)), 3, 2)
    x = w.relu(w.conv("conv2/3x3", w.relu(w.conv("conv2/3x3_reduce", x, 64, 1)), 192, 3, pad=1))
    x = w.pool("pool2/3x3_s2", x, 3, 2)

    def inception(n, x, c1, c3r, c3, c5r, c5, proj):
        n = "inception_" + n
        return w.concat(f"{n}/output", [
            w.relu(w.conv(f"{n}/1x1", x, c1, 1)),
            w.relu(w.conv(f"{n}/3x3", w.relu(w.conv(f"{n}/3x3_reduce", x, c3r, 1)), c3, 3, pad=1)),
            w.relu(w.conv(f"{n}/5x5", w.relu(w.conv(f"{n}/5x5_reduce", x, c5r, 1)), c5, 5, pad=2)),
            w.relu(w.conv(f"{n}/pool_proj", w.pool(f"{n}/pool", x, 3, 1, 1), proj, 1))])
    x = inception("3b", inception("3a", x, 64, 96, 128, 16, 32, 32), 128, 128, 192, 32, 96, 64)
    x = w.pool("pool3/3x3_s2", x, 3, 2)
    for n, c in [("4a", (192, 96, 208, 16, 48, 64)), ("4b", (160, 112, 224, 24, 64, 64)),
                 ("4c", (128, 128, 256, 24, 64, 64)), ("4d", (112, 144, 288, 32, 64, 64)),
                 ("4e", (256, 160, 320, 32, 128, 128))]:
        x = inception(n, x, *c)
    x = w.pool("pool4/3x3_s2", x, 3, 2)
    x = inception("5a", x, 256, 160, 320, 32, 128, 128)
    x = inception("5b", x, 384, 192, 384, 48, 128, 128)
    return w.classifier(w.pool("pool5/7x7_s1", x, mode="AVE"), "loss3/classifier", dropout=0.4)


def mobilenet_v2(size=224):
    w = Writer("mobilenet_v2", size)
    x = w.relu(w.bn(w.conv("conv1", "data", 32, 3, 2, 1, bias=False)))
    channels, block = 32, 0
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for j in range(n):
            block += 1
            p, stride, y = f"block{block}", s if j == 0 else 1, x
            if t != 1:
                y = w.relu(w.bn(w.conv(p + "/expand", y, channels * t, 1, bias=False)))
            y = w.relu(w.bn(w.conv(p + "/dw", y, channels * t, 3, stride, 1, group=channels * t,
                                   bias=False)))
            y = w.bn(w.conv(p + "/project", y, c, 1, bias=False))
            if stride == 1 and channels == c:
                w.add(f'name: "{p}/add" type: "Eltwise" bottom: "{x}" bottom: "{y}" '
                      f'top: "{p}/add"')
                y = p + "/add"
            x, channels = y, c
    x = w.relu(w.bn(w.conv("conv_last", x, 1280, 1, bias=False)))
    return w.classifier(w.pool("pool", x, mode="AVE"), "fc")


def densenet121(size=224):
    # Pre-activation layers (BatchNorm, Scale, ReLU, then the convolution) whose inputs stay
    # whole, each dense layer's 32 new channels concatenated onto its block's running output,
    # one Concat per layer as the Caffe ports write it; transitions halve the channels and pool.
    w = Writer("densenet121", size)

    def preact(name, bottom):
        w.add(f'name: "{name}/bn" type: "BatchNorm" bottom: "{bottom}" top: "{name}/bn" '
              'batch_norm_param { use_global_stats: true }')
        w.add(f'name: "{name}/scale" type: "Scale" bottom: "{name}/bn" top: "{name}/bn" '
              'scale_param { bias_term: true }')
        return w.relu(f"{name}/bn")
    x = w.pool("pool1", w.relu(w.bn(w.conv("conv1", "data", 64, 7, 2, 3, bias=False))), 3, 2, 1)
    channels = 64
    for block, layers in enumerate([6, 12, 24, 16], start=2):
        for j in range(1, layers + 1):
            p = f"conv{block}_{j}"
            y = w.conv(p + "/x1", preact(p + "/x1", x), 128, 1, bias=False)
            y = w.conv(p + "/x2", preact(p + "/x2", y), 32, 3, pad=1, bias=False)
            x = w.concat(f"concat_{block}_{j}", [x, y])
            channels += 32
        if block < 5:
            channels //= 2
            x = w.conv(f"conv{block}_blk", preact(f"conv{block}_blk", x), channels, 1, bias=False)
            x = w.pool(f"pool{block}", x, 2, 2, mode="AVE")
    return w.classifier(w.pool("pool5", preact("conv5_blk", x), mode="AVE"), "fc6")


NETS = {"squeezenet11": squeezenet, "googlenet": googlenet, "mobilenet_v2": mobilenet_v2,
        "densenet121": densenet121}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output-dir", required=True)
    ap.add_argument("--size", type=int, help="input height and width (default: the paper's)")
    ap.add_argument("--nets", default=",".join(NETS), help="comma-separated: " + ", ".join(NETS))
    args = ap.parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    for name in args.nets.split(","):
        if name not in NETS:
            raise SystemExit(f"zoo_nets.py: unknown net {name!r} (known: {', '.join(NETS)})")
        if args.size is not None and args.size < 32:
            raise SystemExit(f"zoo_nets.py: --size {args.size}: 32 pixels at least")
        text = NETS[name]() if args.size is None else NETS[name](args.size)
        path = os.path.join(args.output_dir, f"{name}_deploy.prototxt")
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
