"""pycaffe.py — caffe.Net and caffe.get_solver in pycaffe's shape: blobs and params as ordered
dicts of Blobs whose .data/.diff are NumPy views of host memory, forward(**inputs), backward(),
save(), quant_mode; solvers with step(), solve(), net and test_nets."""

from collections import OrderedDict
import os

import numpy as np

from . import _mpcaffe
from . import caffe_pb2

TRAIN = caffe_pb2.TRAIN
TEST = caffe_pb2.TEST

Blob = _mpcaffe.Blob


class Layer:
    """A layer of a Net: name, type, parameter blobs, bottom and top names."""

    def __init__(self, net, index):
        self.name = net._net.layer_names[index]
        self.type = net._net.layer_type(index)
        self.blobs = net._net.layer_params(index)
        self.bottoms = net._net.layer_bottoms(index)
        self.tops = net._net.layer_tops(index)
        self.inserted = net._net.layer_inserted(index)

    def __repr__(self):
        return f"<mpcaffe Layer '{self.name}' {self.type}>"


def _model_source(model):
    """(kind, value) for a prototxt path, a NetParameter message or NetSpec, or serialized bytes."""
    if isinstance(model, (str, os.PathLike)):
        return "file", os.fspath(model)
    if hasattr(model, "to_proto"):
        model = model.to_proto()
    if hasattr(model, "SerializeToString"):
        return "bytes", model.SerializeToString()
    if isinstance(model, (bytes, bytearray)):
        return "bytes", bytes(model)
    raise TypeError(f"Net: model must be a .prototxt path or a NetParameter, "
                    f"got {type(model).__name__}")


class Net:
    """Net(prototxt, phase, weights=None, level=0, stages=()) or Net(prototxt, weights, phase).

    prototxt may also be a caffe_pb2.NetParameter (or a NetSpec). Inputs are fed by writing
    net.blobs[name].data (or passing them to forward); outputs are read the same way.
    """

    def __init__(self, model, *args, weights=None, phase=None, level=0, stages=(),
                 reduced_memory=None):
        if len(args) == 1:
            phase = args[0]
        elif len(args) == 2:  # the older positional form Net(prototxt, weights, phase)
            weights, phase = args
        elif len(args) > 2:
            raise TypeError("Net(prototxt, phase) or Net(prototxt, weights, phase)")
        if phase is None:
            raise TypeError("Net: the phase (caffe.TRAIN or caffe.TEST) is required")
        kind, value = _model_source(model)
        reduced = -1 if reduced_memory is None else int(bool(reduced_memory))
        build = _mpcaffe.Net.from_file if kind == "file" else _mpcaffe.Net.from_bytes
        self._net = build(value, int(phase), level=int(level), stages=list(stages),
                          reduced_memory=reduced)
        if weights is not None:
            self.copy_from(weights)
        self._index()

    @classmethod
    def _wrap(cls, cpp_net):
        """A Net over a C++ net owned elsewhere (a solver's train or test net)."""
        net = cls.__new__(cls)
        net._net = cpp_net
        net._index()
        return net

    def _index(self):
        self._blobs = OrderedDict((name, self._net.blob(name)) for name in self._net.blob_names)
        self._layers = [Layer(self, i) for i in range(len(self._net.layer_names))]

    # --- structure ---------------------------------------------------------------------------
    @property
    def name(self):
        return self._net.name

    @property
    def phase(self):
        return self._net.phase

    @property
    def blobs(self):
        """Ordered dict blob name -> Blob (the net's own and inserted conversion blobs)."""
        return self._blobs

    @property
    def params(self):
        """Ordered dict layer name -> list of parameter Blobs, for layers that have any."""
        return OrderedDict((layer.name, layer.blobs) for layer in self._layers
                           if layer.blobs and not layer.inserted)

    @property
    def layers(self):
        return self._layers

    @property
    def layer_dict(self):
        return OrderedDict((layer.name, layer) for layer in self._layers)

    @property
    def _layer_names(self):
        return list(self._net.layer_names)

    @property
    def inputs(self):
        return list(self._net.input_names)

    @property
    def outputs(self):
        return list(self._net.output_names)

    @property
    def quant_mode(self):
        return self._net.quant_mode

    @quant_mode.setter
    def quant_mode(self, mode):
        self._net.quant_mode = int(mode)

    @property
    def device_index(self):
        return self._net.device_index

    @property
    def peak_device_bytes(self):
        return self._net.peak_device_bytes

    # --- running -----------------------------------------------------------------------------
    def _layer_index(self, name, what):
        try:
            return self._net.layer_names.index(name)
        except ValueError:
            raise KeyError(f"Net.forward: {what} layer '{name}' is not in the net") from None

    def forward(self, blobs=None, start=None, end=None, **kwargs):
        """Writes the given input arrays, runs the net (or layers start..end) and returns a dict
        of the output blobs' data (plus `blobs`, names of further blobs to return)."""
        reshaped = False
        for name, value in kwargs.items():
            if name not in self._blobs:
                raise KeyError(f"Net.forward: no blob named '{name}' (inputs: {self.inputs})")
            blob = self._blobs[name]
            value = np.asarray(value)
            if tuple(value.shape) != tuple(blob.shape):
                if value.size == blob.count and value.ndim != len(blob.shape):
                    value = value.reshape(blob.shape)
                else:
                    blob.reshape(*value.shape)
                    reshaped = True
            blob.data[...] = value
        if reshaped:
            self._net.reshape()
        first = 0 if start is None else self._layer_index(start, "start")
        last = len(self._layers) - 1 if end is None else self._layer_index(end, "end")
        if first == 0 and last == len(self._layers) - 1:
            self._net.forward()
        else:
            self._net.forward_from_to(first, last)
        names = list(self.outputs) if end is None else list(self._layers[last].tops)
        names += [b for b in (blobs or []) if b not in names]
        return {name: self._blobs[name].data for name in names}

    def backward(self, start=None, end=None):
        """Back-propagates from the loss tops (whole net, or layers end..start in reverse
        order); gradients land in the blobs' and parameters' .diff."""
        last = len(self._layers) - 1 if start is None else self._layer_index(start, "start")
        first = 0 if end is None else self._layer_index(end, "end")
        if first == 0 and last == len(self._layers) - 1:
            self._net.backward()
        else:
            self._net.backward_from_to(last, first)

    def reshape(self):
        self._net.reshape()

    # --- weights -----------------------------------------------------------------------------
    def copy_from(self, weights):
        """Copies trained weights and quantizer ranges by layer name (a .caffemodel path or a
        NetParameter message)."""
        if isinstance(weights, (str, os.PathLike)):
            self._net.copy_from(os.fspath(weights))
        else:
            self._net.copy_from_bytes(weights.SerializeToString())

    def save(self, path):
        """Writes weights and quantizer ranges to a .caffemodel."""
        self._net.save(os.fspath(path))

    def to_proto(self):
        """The weights as a caffe_pb2.NetParameter (what save() writes)."""
        param = caffe_pb2.NetParameter()
        param.ParseFromString(self._net.to_proto_bytes())
        return param

    def built_proto(self):
        """The net as built (filtered by phase, with inserted Quantizer and Split layers)."""
        param = caffe_pb2.NetParameter()
        param.ParseFromString(self._net.built_param_bytes)
        return param

    def __repr__(self):
        return f"<mpcaffe Net '{self.name}' {len(self._layers)} layers>"


class Solver:
    """A training loop (type from SolverParameter.type: SGD, Nesterov, AdaGrad, RMSProp,
    AdaDelta, Adam). Build it with get_solver()."""

    def __init__(self, cpp_solver):
        self._solver = cpp_solver
        self.net = Net._wrap(cpp_solver.net)
        self.test_nets = [Net._wrap(n) for n in cpp_solver.test_nets]

    @property
    def iter(self):
        return self._solver.iter

    @property
    def type(self):
        return self._solver.type

    @property
    def learning_rate(self):
        return self._solver.learning_rate

    def step(self, iters):
        """Runs `iters` iterations; returns the smoothed training loss. Input blobs written
        through .data (a fresh view or one kept from before) are what the first iteration reads."""
        return self._solver.step(int(iters))

    def solve(self, resume_file=None):
        self._solver.solve(os.fspath(resume_file) if resume_file else "")

    def test(self, test_net=0):
        """Mean test outputs of test net `test_net` as a dict name -> value."""
        values = self._solver.test(int(test_net))
        return dict(zip(self._solver.test_output_names(int(test_net)), values))

    def snapshot(self):
        """Writes <prefix>_iter_<n>.caffemodel and .solverstate; returns the .solverstate path."""
        return self._solver.snapshot()

    def restore(self, solverstate):
        self._solver.restore(os.fspath(solverstate))

    def quiet(self):
        """Stops the progress lines the solver prints."""
        self._solver.quiet()


def get_solver(solver):
    """A Solver from a solver .prototxt path or a caffe_pb2.SolverParameter."""
    if isinstance(solver, (str, os.PathLike)):
        return Solver(_mpcaffe.Solver.from_file(os.fspath(solver)))
    if hasattr(solver, "SerializeToString"):
        return Solver(_mpcaffe.Solver.from_bytes(solver.SerializeToString()))
    raise TypeError(f"get_solver: expected a path or a SolverParameter, got {type(solver).__name__}")
