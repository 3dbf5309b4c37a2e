"""test_notebooks.py — the code of BVLC's notebooks, Python 3 syntax and local files in place of
downloads, run unchanged with `import mpcaffe as caffe`: 01-learning-lenet (NetSpec LeNet on an
LMDB, SGDSolver, stepping by hand, the test net read during training) and net_surgery (designer
filters on an image, then a classifier's InnerProduct layers cast into convolutions). The LMDBs
are Fashion-MNIST (Debian's dataset-fashion-mnist) through `python -m mpcaffe convert_mnist`;
the sizes are cut down so the file runs in seconds (00-classification's reshaped batch is
tests/python/test_classify.py's)."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import layers as L, params as P

FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")


def convert_mnist(images, labels, out, limit):
    subprocess.run([sys.executable, "-m", "mpcaffe", "convert_mnist", str(FASHION / images),
                    str(FASHION / labels), str(out), "--limit", str(limit)], check=True,
                   capture_output=True)


def lenet(lmdb, batch_size):
    # our version of LeNet: a series of linear and simple nonlinear transformations
    n = caffe.NetSpec()
    n.data, n.label = L.Data(batch_size=batch_size, backend=P.Data.LMDB, source=lmdb,
                             transform_param=dict(scale=1. / 255), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, weight_filler=dict(type='xavier'))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.conv2 = L.Convolution(n.pool1, kernel_size=5, num_output=50, weight_filler=dict(type='xavier'))
    n.pool2 = L.Pooling(n.conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.fc1 = L.InnerProduct(n.pool2, num_output=500, weight_filler=dict(type='xavier'))
    n.relu1 = L.ReLU(n.fc1, in_place=True)
    n.score = L.InnerProduct(n.relu1, num_output=10, weight_filler=dict(type='xavier'))
    n.loss = L.SoftmaxWithLoss(n.score, n.label)
    return n.to_proto()


@pytest.mark.skipif(not FASHION.is_dir(), reason="Debian's dataset-fashion-mnist is not installed")
def test_01_learning_lenet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("mnist")
    convert_mnist("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                  "mnist/mnist_train_lmdb", 640)
    convert_mnist("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                  "mnist/mnist_test_lmdb", 200)
    with open('mnist/lenet_auto_train.prototxt', 'w') as f:
        f.write(str(lenet('mnist/mnist_train_lmdb', 64)))
    with open('mnist/lenet_auto_test.prototxt', 'w') as f:
        f.write(str(lenet('mnist/mnist_test_lmdb', 100)))
    with open('mnist/lenet_auto_solver.prototxt', 'w') as f:
        f.write('train_net: "mnist/lenet_auto_train.prototxt"\n'
                'test_net: "mnist/lenet_auto_test.prototxt"\n'
                'test_iter: 2\ntest_interval: 500\nbase_lr: 0.01\nmomentum: 0.9\n'
                'weight_decay: 0.0005\nlr_policy: "inv"\ngamma: 0.0001\npower: 0.75\n'
                'display: 100\nmax_iter: 10000\nsnapshot: 5000\n'
                'snapshot_prefix: "mnist/lenet"\n')

    caffe.set_device(0)
    caffe.set_mode_gpu()
    solver = caffe.SGDSolver('mnist/lenet_auto_solver.prototxt')
    # each output is (batch size, feature dim, spatial dim)
    shapes = [(k, v.data.shape) for k, v in solver.net.blobs.items()]
    assert shapes[:3] == [('data', (64, 1, 28, 28)), ('label', (64,)),
                          ('conv1', (64, 20, 24, 24))]
    # just print the weight sizes (we'll omit the biases)
    params = [(k, v[0].data.shape) for k, v in solver.net.params.items()]
    assert params == [('conv1', (20, 1, 5, 5)), ('conv2', (50, 20, 5, 5)), ('fc1', (500, 800)),
                      ('score', (10, 500))]
    solver.net.forward()  # train net
    solver.test_nets[0].forward()  # test net (there can be more than one)
    assert solver.net.blobs['data'].data[:8, 0].shape == (8, 28, 28)
    assert solver.net.blobs['label'].data[:8].shape == (8,)
    solver.step(1)
    assert solver.net.params['conv1'][0].diff[:, 0].reshape(4, 5, 5, 5).transpose(
        0, 2, 1, 3).reshape(4 * 5, 5 * 5).shape == (20, 25)

    niter = 30
    test_interval = 10
    train_loss = np.zeros(niter)
    test_acc = np.zeros(int(np.ceil(niter / test_interval)))
    output = np.zeros((niter, 8, 10))
    for it in range(niter):
        solver.step(1)  # SGD by Caffe
        # store the train loss
        train_loss[it] = solver.net.blobs['loss'].data
        # store the output on the first test batch
        # (start the forward pass at conv1 to avoid loading new data)
        solver.test_nets[0].forward(start='conv1')
        output[it] = solver.test_nets[0].blobs['score'].data[:8]
        # run a full test every so often
        if it % test_interval == 0:
            correct = 0
            for test_it in range(2):
                solver.test_nets[0].forward()
                correct += sum(solver.test_nets[0].blobs['score'].data.argmax(1)
                               == solver.test_nets[0].blobs['label'].data)
            test_acc[it // test_interval] = correct / 200
    assert np.all(np.isfinite(train_loss))
    # 31 steps of SGD: well past chance (0.1) on Fashion-MNIST, loss below the start's ln 10
    assert train_loss[-5:].mean() < train_loss[:3].mean()
    assert test_acc[-1] > 0.3, test_acc
    probs = np.exp(output[-1]) / np.exp(output[-1]).sum(1, keepdims=True)
    assert np.allclose(probs.sum(1), 1, atol=1e-5)


def test_net_surgery(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Designer filters: a 3-output 5x5 convolution over a gray image, reshaped to the image.
    with open('conv.prototxt', 'w') as f:
        f.write('name: "convolution"\n'
                'layer { name: "data" type: "Input" top: "data"\n'
                '        input_param { shape: { dim: 1 dim: 1 dim: 100 dim: 100 } } }\n'
                'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"\n'
                '        convolution_param { num_output: 3 kernel_size: 5 stride: 1\n'
                '          weight_filler { type: "gaussian" std: 0.01 }\n'
                '          bias_filler { type: "constant" value: 0 } } }\n')
    from PIL import Image
    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 256, (36, 48), dtype=np.uint8)).save('cat_gray.png')
    net = caffe.Net('conv.prototxt', caffe.TEST)
    assert [(k, v.data.shape) for k, v in net.blobs.items()] == [('data', (1, 1, 100, 100)),
                                                                 ('conv', (1, 3, 96, 96))]
    im = np.array(caffe.io.load_image('cat_gray.png', color=False)).squeeze()
    im_input = im[np.newaxis, np.newaxis, :, :]
    net.blobs['data'].reshape(*im_input.shape)
    net.blobs['data'].data[...] = im_input
    net.forward()
    assert net.blobs['conv'].data.shape == (1, 3, 32, 44)
    # pick first filter output, then a designer filter: the identity kernel's centre tap
    net.params['conv'][0].data[...] = 0
    net.params['conv'][0].data[0, 0, 2, 2] = 1
    net.params['conv'][1].data[...] = 1
    net.forward()
    assert np.allclose(net.blobs['conv'].data[0, 0], im[2:-2, 2:-2] + 1, atol=1e-6)
    assert np.allclose(net.blobs['conv'].data[0, 1:], 1)
    net.save('conv.caffemodel')

    # Casting a classifier into a fully convolutional net: the fc layers' weights carried over.
    body = ('layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"\n'
            '  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }\n'
            'layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }\n')
    with open('classifier.prototxt', 'w') as f:
        f.write('layer { name: "data" type: "Input" top: "data"\n'
                '        input_param { shape: { dim: 1 dim: 3 dim: 10 dim: 10 } } }\n' + body +
                'layer { name: "fc6" type: "InnerProduct" bottom: "conv1" top: "fc6"\n'
                '  inner_product_param { num_output: 6 weight_filler { type: "xavier" }\n'
                '    bias_filler { type: "constant" value: 0.1 } } }\n'
                'layer { name: "prob" type: "Softmax" bottom: "fc6" top: "prob" }\n')
    with open('classifier_full_conv.prototxt', 'w') as f:
        f.write('layer { name: "data" type: "Input" top: "data"\n'
                '        input_param { shape: { dim: 1 dim: 3 dim: 14 dim: 14 } } }\n' + body +
                'layer { name: "fc6-conv" type: "Convolution" bottom: "conv1" top: "fc6-conv"\n'
                '  convolution_param { num_output: 6 kernel_size: 8 } }\n'
                'layer { name: "prob" type: "Softmax" bottom: "fc6-conv" top: "prob" }\n')
    caffe.Net('classifier.prototxt', caffe.TEST).save('classifier.caffemodel')
    net = caffe.Net('classifier.prototxt', 'classifier.caffemodel', caffe.TEST)
    params = ['fc6']
    # fc_params = {name: (weights, biases)}
    fc_params = {pr: (net.params[pr][0].data, net.params[pr][1].data) for pr in params}
    assert fc_params['fc6'][0].shape == (6, 256) and fc_params['fc6'][1].shape == (6,)
    net_full_conv = caffe.Net('classifier_full_conv.prototxt', 'classifier.caffemodel',
                              caffe.TEST)
    params_full_conv = ['fc6-conv']
    conv_params = {pr: (net_full_conv.params[pr][0].data, net_full_conv.params[pr][1].data)
                   for pr in params_full_conv}
    assert conv_params['fc6-conv'][0].shape == (6, 4, 8, 8)
    for pr, pr_conv in zip(params, params_full_conv):
        conv_params[pr_conv][0].flat = fc_params[pr][0].flat  # flat unrolls the arrays
        conv_params[pr_conv][1][...] = fc_params[pr][1]
    net_full_conv.save('classifier_full_conv.caffemodel')

    im = rng.random((14, 14, 3), dtype=np.float32)
    transformer = caffe.io.Transformer({'data': net_full_conv.blobs['data'].data.shape})
    transformer.set_transpose('data', (2, 0, 1))
    out = net_full_conv.forward_all(data=np.asarray([transformer.preprocess('data', im)]))
    assert out['prob'].shape == (1, 6, 5, 5)
    # each position of the map is the classifier on the 10x10 window there
    for y, x in [(0, 0), (2, 3), (4, 4)]:
        window = transformer.preprocess('data', im)[:, y:y + 10, x:x + 10]
        ref = net.forward_all(data=window[np.newaxis])['prob'][0]
        assert np.allclose(out['prob'][0, :, y, x], ref, atol=1e-5), (y, x)
