"""pycaffe.py — caffe.Net, caffe.Layer (the base of Python layers) and the solver classes in
pycaffe's shape: blobs and params as ordered dicts of Blobs whose .data/.diff are NumPy views of
host memory, forward/backward (whole net or start..end), HDF5 and caffemodel weights,
quant_mode; SGDSolver … AdamSolver and get_solver with step(), solve(), apply_update(), net and
test_nets."""

from collections import OrderedDict
import os

import numpy as np

from . import _mpcaffe
from . import caffe_pb2

TRAIN = caffe_pb2.TRAIN
TEST = caffe_pb2.TEST

Blob = _mpcaffe.Blob


class Layer:
    """Base class of Python layers, and the type of the entries of Net.layers.

    A Python layer (``type: "Python"``, ``python_param { module layer param_str }``) is a class
    deriving from this one, constructed with its caffe_pb2.LayerParameter; before
    setup() the net sets ``self.param_str``, ``self.phase`` and ``self.blobs`` (its parameter
    blobs: ``self.blobs.add_blob(*shape)`` in setup() adds a trained one). Override
    ``setup(bottom, top)``, ``reshape(bottom, top)`` (called before every forward),
    ``forward(bottom, top)`` and ``backward(top, propagate_down, bottom)``; bottom and top are
    lists of fp32 Blobs whose ``.data`` / ``.diff`` are NumPy views, ``top[i].reshape(*shape)``
    shapes an output. They run on the host under the GIL, whatever the device.
    """

    type = "Python"

    def __init__(self, layer_param=None):
        self.layer_param = layer_param

    def setup(self, bottom, top):
        """One-time set-up: read self.param_str, check the bottoms, add parameter blobs."""

    def reshape(self, bottom, top):
        """Shapes the tops for the bottoms (runs before every forward)."""

    def forward(self, bottom, top):
        raise NotImplementedError(f"{type(self).__name__} does not implement forward()")

    def backward(self, top, propagate_down, bottom):
        """Writes bottom[i].diff where propagate_down[i] (default: no gradient)."""


class _NetLayer(Layer):
    """A layer of a Net: name, type, parameter blobs, bottom and top names."""

    def __init__(self, net, index):
        super().__init__()
        self.name = net._net.layer_names[index]
        self.type = net._net.layer_type(index)
        self.blobs = net._net.layer_params(index)
        self.bottoms = net._net.layer_bottoms(index)
        self.tops = net._net.layer_tops(index)
        self.inserted = net._net.layer_inserted(index)

    def setup(self, bottom, top):
        raise TypeError(f"layer '{self.name}' ({self.type}) is set up by its net")

    def forward(self, bottom, top):
        raise TypeError(f"layer '{self.name}' ({self.type}) runs through Net.forward()")

    def backward(self, top, propagate_down, bottom):
        raise TypeError(f"layer '{self.name}' ({self.type}) runs through Net.backward()")

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

    prototxt may also be a caffe_pb2.NetParameter (or a NetSpec). weights is a .caffemodel or
    an HDF5 file (.caffemodel.h5, as BVLC's snapshot_format: HDF5 writes). Inputs are fed by
    writing net.blobs[name].data (or passing them to forward); outputs are read the same way.
    optimize (TEST phase): the inference graph optimizer's level, None for MPCAFFE_OPTIMIZE,
    else 1 (every blob holds what the unoptimized net writes, as pycaffe expects); 2 is the
    level `mpcaffe time` and `bench net` run: a chain's intermediate blob that only its next
    layer reads is not written (a typed net's BatchNorm and Scale fold into its convolutions).
    """

    def __init__(self, model, *args, weights=None, phase=None, level=0, stages=(),
                 reduced_memory=None, optimize=None):
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
        optimize = -1 if optimize is None else int(optimize)
        self._net = build(value, int(phase), level=int(level), stages=list(stages or ()),
                          reduced_memory=reduced, optimize=optimize)
        self._index()
        if weights is not None:
            self.copy_from(weights)

    @classmethod
    def _wrap(cls, cpp_net):
        """A Net over a C++ net owned elsewhere (a solver's train or test net)."""
        net = cls.__new__(cls)
        net._net = cpp_net
        net._index()
        return net

    def _index(self):
        self._blobs = OrderedDict((name, self._net.blob(name)) for name in self._net.blob_names)
        self._layers = []
        self._layer_params = []
        for i in range(len(self._net.layer_names)):
            python_object = self._net.layer_object(i)
            self._layers.append(python_object if python_object is not None else _NetLayer(self, i))
            self._layer_params.append(self._net.layer_params(i))

    # --- structure ---------------------------------------------------------------------------
    @property
    def name(self):
        return self._net.name

    @property
    def phase(self):
        return self._net.phase

    @property
    def blobs(self):
        """Ordered dict blob name -> Blob, in the order the net creates them (its own blobs,
        and the Split and conversion blobs it inserts)."""
        return self._blobs

    @property
    def params(self):
        """Ordered dict layer name -> list of parameter Blobs, for layers that have any, in
        layer order."""
        return OrderedDict((name, blobs) for name, blobs, inserted in
                           zip(self._net.layer_names, self._layer_params, self._inserted())
                           if blobs and not inserted)

    def _inserted(self):
        return [self._net.layer_inserted(i) for i in range(len(self._layers))]

    @property
    def layers(self):
        """The layers in execution order (Python layers are their own objects)."""
        return self._layers

    @property
    def layer_dict(self):
        return OrderedDict(zip(self._net.layer_names, self._layers))

    @property
    def _layer_names(self):
        return list(self._net.layer_names)

    @property
    def _blob_names(self):
        return list(self._net.blob_names)

    @property
    def top_names(self):
        """Ordered dict layer name -> names of its top blobs."""
        return OrderedDict((name, list(self._net.layer_tops(i)))
                           for i, name in enumerate(self._net.layer_names))

    @property
    def bottom_names(self):
        """Ordered dict layer name -> names of its bottom blobs."""
        return OrderedDict((name, list(self._net.layer_bottoms(i)))
                           for i, name in enumerate(self._net.layer_names))

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
    def optimize_level(self):
        return self._net.optimize_level

    @property
    def peak_device_bytes(self):
        return self._net.peak_device_bytes

    # --- running -----------------------------------------------------------------------------
    def _layer_index(self, name, what, method):
        try:
            return self._net.layer_names.index(name)
        except ValueError:
            raise KeyError(f"Net.{method}: {what} layer '{name}' is not in the net") from None

    def forward(self, blobs=None, start=None, end=None, **kwargs):
        """Writes the given input arrays, runs the net (or layers start..end, by name) and
        returns a dict of the output blobs' data: the net's outputs, or with `end` the end
        layer's tops (pycaffe: top_names[end]), plus the names in `blobs`."""
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
            blob.write_data(value)
        if reshaped:
            self._net.reshape()
        first = 0 if start is None else self._layer_index(start, "start", "forward")
        last = len(self._layers) - 1 if end is None else self._layer_index(end, "end", "forward")
        if first > last:
            raise ValueError(f"Net.forward: start layer '{start}' comes after end layer '{end}'")
        if first == 0 and last == len(self._layers) - 1:
            self._net.forward()
        else:
            self._net.forward_from_to(first, last)
        names = list(self.outputs) if end is None else list(self._net.layer_tops(last))
        names += [b for b in (blobs or []) if b not in names]
        return {name: self._blobs[name].data for name in names}

    def backward(self, diffs=None, start=None, end=None, **kwargs):
        """Back-propagates from layer `start` (default: the last) down to layer `end` (default:
        the first); gradients land in the blobs' and parameters' .diff. Keyword arguments set
        the diffs of output blobs first. Returns a dict of diffs: the net's inputs, or with
        `end` the end layer's bottoms (pycaffe: bottom_names[end]), plus the names in `diffs`."""
        for name, value in kwargs.items():
            if name not in self.outputs:
                raise KeyError(f"Net.backward: '{name}' is not an output blob of the net "
                               f"(outputs: {self.outputs})")
            self._blobs[name].diff[...] = value
        last = len(self._layers) - 1 if start is None else self._layer_index(start, "start",
                                                                              "backward")
        first = 0 if end is None else self._layer_index(end, "end", "backward")
        if first > last:
            raise ValueError(f"Net.backward: start layer '{start}' comes before end layer '{end}'"
                             " (backward runs from start down to end)")
        if first == 0 and last == len(self._layers) - 1:
            self._net.backward()
        else:
            self._net.backward_from_to(first, last)
        names = list(self.inputs) if end is None else list(self._net.layer_bottoms(first))
        names += [d for d in (diffs or []) if d not in names]
        return {name: self._blobs[name].diff for name in names}

    def _batches(self, arrays):
        """Splits input arrays (name -> N×...) into the net's batch size, zero-padding the
        last batch; yields (dict of batch arrays, rows of real data in it)."""
        sizes = {len(v) for v in arrays.values()}
        if len(sizes) != 1:
            raise ValueError(f"Net: the inputs have different numbers of rows: "
                             f"{ {k: len(v) for k, v in arrays.items()} }")
        total = sizes.pop()
        batch = self._blobs[next(iter(arrays))].shape[0]
        for start in range(0, total, batch):
            rows = min(batch, total - start)
            part = {}
            for name, values in arrays.items():
                chunk = np.asarray(values[start:start + rows])
                if rows < batch:
                    padding = np.zeros((batch - rows,) + chunk.shape[1:], chunk.dtype)
                    chunk = np.concatenate([chunk, padding])
                part[name] = chunk
            yield part, rows

    def set_input_arrays(self, data, labels):
        """Gives the net's first layer, a MemoryData layer, the arrays it serves batch by batch
        (pycaffe): data (N, C, H, W) and labels (N) or (N, 1, 1, 1), float32 and C-contiguous,
        N a multiple of the batch size. The arrays are copied; transform_param does not apply to
        them (as in BVLC)."""
        if getattr(labels, "ndim", None) == 1:
            labels = np.ascontiguousarray(labels[:, np.newaxis, np.newaxis, np.newaxis])
        self._net.set_input_arrays(data, labels)

    def forward_all(self, blobs=None, **kwargs):
        """forward() over inputs of any number of rows, in batches of the net's batch size;
        returns the outputs (and `blobs`) concatenated, without the padding."""
        outputs = {}
        for part, rows in self._batches(kwargs):
            for name, value in self.forward(blobs=blobs, **part).items():
                outputs.setdefault(name, []).append(np.array(value[:rows]))
        return {name: np.concatenate(parts) for name, parts in outputs.items()}

    def forward_backward_all(self, blobs=None, diffs=None, **kwargs):
        """forward_all and backward over the batches: kwargs hold inputs (net.inputs) and
        output diffs (net.outputs); returns (outputs, diffs) concatenated without padding."""
        inputs = {k: v for k, v in kwargs.items() if k in self.inputs}
        top_diffs = {k: v for k, v in kwargs.items() if k in self.outputs}
        unknown = set(kwargs) - set(inputs) - set(top_diffs)
        if unknown:
            raise KeyError(f"Net.forward_backward_all: {sorted(unknown)} are neither inputs "
                           f"{self.inputs} nor outputs {self.outputs}")
        if len({len(v) for v in kwargs.values()}) > 1:
            raise ValueError(f"Net.forward_backward_all: the inputs and diffs have different "
                             f"numbers of rows: { {k: len(v) for k, v in kwargs.items()} }")
        forward_out, backward_out = {}, {}
        diff_batches = self._batches(top_diffs) if top_diffs else None
        for part, rows in self._batches(inputs):
            for name, value in self.forward(blobs=blobs, **part).items():
                forward_out.setdefault(name, []).append(np.array(value[:rows]))
            given = next(diff_batches)[0] if diff_batches else {}
            for name, value in self.backward(diffs=diffs, **given).items():
                backward_out.setdefault(name, []).append(np.array(value[:rows]))
        return ({n: np.concatenate(p) for n, p in forward_out.items()},
                {n: np.concatenate(p) for n, p in backward_out.items()})

    def clear_param_diffs(self):
        """Zeroes the diffs of every learnable parameter (backward accumulates into them)."""
        self._net.clear_param_diffs()

    def reshape(self):
        self._net.reshape()

    def share_with(self, other):
        """Makes this net's layers use the parameter blobs of `other`'s layers of the same name
        (data and diff; a test net sharing a train net's weights)."""
        if not isinstance(other, Net):
            raise TypeError(f"Net.share_with: expected a Net, got {type(other).__name__}")
        self._net.share_with(other._net)
        self._index()

    # --- weights -----------------------------------------------------------------------------
    def copy_from(self, weights):
        """Copies trained weights by layer name: a .caffemodel (with quantizer ranges), an HDF5
        weights file (recognised by its signature, as BVLC does), or a NetParameter message."""
        if isinstance(weights, (str, os.PathLike)):
            path = os.fspath(weights)
            if _is_hdf5(path):
                self.load_hdf5(path)
            else:
                self._net.copy_from(path)
        elif hasattr(weights, "SerializeToString"):
            self._net.copy_from_bytes(weights.SerializeToString())
        else:
            raise TypeError(f"Net.copy_from: expected a file path or a NetParameter, got "
                            f"{type(weights).__name__}")

    def save(self, path):
        """Writes weights and quantizer ranges to a .caffemodel."""
        self._net.save(os.fspath(path))

    def _hdf5_layers(self):
        """(layer index, name, parameter blobs) of the layers whose parameters BVLC's HDF5 files
        hold, each shared parameter with its first owner only (as BVLC writes them)."""
        seen = set()
        for i, (name, blobs) in enumerate(zip(self._net.layer_names, self._layer_params)):
            if self._net.layer_inserted(i):
                continue
            owned = []
            for j, blob in enumerate(blobs):
                owned.append(id(blob) not in seen)
                seen.add(id(blob))
            yield i, name, blobs, owned

    def save_hdf5(self, path, write_diff=False):
        """Writes the parameters as BVLC's Net::ToHDF5 does: group data/<layer>/<index> (float32
        datasets of the blobs' shapes; reduced-precision parameters as their real values), and
        data/diff when write_diff."""
        h5py = _h5py("Net.save_hdf5")
        with h5py.File(os.fspath(path), "w") as f:
            data = f.create_group("data")
            diff = f.create_group("diff") if write_diff else None
            for i, name, blobs, owned in self._hdf5_layers():
                layer_data = data.create_group(name)
                layer_diff = diff.create_group(name) if diff is not None else None
                for j, blob in enumerate(blobs):
                    if owned[j]:
                        layer_data.create_dataset(str(j), data=self._net.layer_param_float(i, j))
                    if layer_diff is not None:
                        if blob.data_type != caffe_pb2.CAFFE_FLOAT:
                            raise ValueError(f"Net.save_hdf5: layer '{name}' parameter {j} is "
                                             f"{blob.type_name}; only fp32 parameters have diffs")
                        layer_diff.create_dataset(str(j), data=np.array(blob.diff, np.float32))

    def load_hdf5(self, path):
        """Copies parameters from an HDF5 weights file (BVLC's layout, see save_hdf5) by layer
        name; layers the file lacks keep their values, layers the net lacks are ignored. A
        parameter count or shape that does not fit raises ValueError naming the layer."""
        h5py = _h5py("Net.load_hdf5")
        weights = caffe_pb2.NetParameter()
        owned_of = {name: owned for _, name, _, owned in self._hdf5_layers()}
        with h5py.File(os.fspath(path), "r") as f:
            if "data" not in f:
                raise ValueError(f"Net.load_hdf5: {path} has no 'data' group (not a Caffe HDF5 "
                                 "weights file)")
            data = f["data"]
            for name, blobs in zip(self._net.layer_names, self._layer_params):
                if name not in data or name not in owned_of:
                    continue
                group = data[name]
                if len(group) > len(blobs):
                    raise ValueError(f"Net.load_hdf5: layer '{name}' has {len(blobs)} parameter "
                                     f"blobs, {path} holds {len(group)}")
                layer = weights.layer.add()
                layer.name = name
                for j, blob in enumerate(blobs):
                    if str(j) not in group:
                        if owned_of[name][j]:
                            raise ValueError(f"Net.load_hdf5: {path} has no parameter {j} of "
                                             f"layer '{name}'")
                        del weights.layer[-1]  # shared with an earlier layer: loaded there
                        break
                    values = np.asarray(group[str(j)], dtype=np.float32)
                    if tuple(values.shape) != tuple(blob.shape):
                        raise ValueError(f"Net.load_hdf5: layer '{name}' parameter {j} has shape "
                                         f"{tuple(blob.shape)}, {path} holds "
                                         f"{tuple(values.shape)}")
                    proto = layer.blobs.add()
                    proto.shape.dim.extend(values.shape)
                    proto.data.extend(values.ravel().tolist())
        self._net.copy_from_bytes(weights.SerializeToString())

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


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _is_hdf5(path):
    """Whether the file starts with the HDF5 signature (BVLC tells weight formats apart so)."""
    try:
        with open(path, "rb") as f:
            return f.read(8) == _HDF5_SIGNATURE
    except OSError:
        return False  # the C++ reader reports the missing file with its own message


def _h5py(what):
    try:
        import h5py
    except ImportError:
        raise ImportError(f"{what} needs the h5py package (pip install h5py)") from None
    return h5py


# --- solvers ---------------------------------------------------------------------------------

def _read_solver_param(solver):
    """A SolverParameter from a solver .prototxt path or a message (copied)."""
    param = caffe_pb2.SolverParameter()
    if isinstance(solver, (str, os.PathLike)):
        from google.protobuf import text_format
        path = os.fspath(solver)
        try:
            with open(path) as f:
                text_format.Merge(f.read(), param)
        except OSError as e:
            raise _mpcaffe.SolverError(f"cannot read solver file '{path}': {e.strerror}") from None
        except text_format.ParseError as e:
            raise _mpcaffe.SolverError(f"solver file '{path}': {e}") from None
    elif hasattr(solver, "SerializeToString"):
        param.CopyFrom(solver)
    else:
        raise TypeError(f"expected a solver .prototxt path or a SolverParameter, got "
                        f"{type(solver).__name__}")
    return param


_SOLVER_TYPE_NAMES = {0: "SGD", 1: "Nesterov", 2: "AdaGrad", 3: "RMSProp", 4: "AdaDelta",
                      5: "Adam"}


class Solver:
    """A training loop over solver.net (TRAIN) and solver.test_nets (TEST, sharing its weights).

    Build one with caffe.get_solver(path) (the type the file names) or with the class of the
    update rule: SGDSolver, NesterovSolver, AdaGradSolver, RMSPropSolver, AdaDeltaSolver,
    AdamSolver (which use their own rule whatever the file's `type` says, as pycaffe's do).
    """

    _type = None  # the update rule of the subclass

    def __init__(self, solver):
        param = _read_solver_param(solver)
        if self._type is not None:
            param.ClearField("solver_type")
            param.type = self._type
        self._param = param
        self._solver = _mpcaffe.Solver.from_bytes(param.SerializeToString())
        self.net = Net._wrap(self._solver.net)
        self.test_nets = [Net._wrap(n) for n in self._solver.test_nets]

    @property
    def param(self):
        """The SolverParameter (a copy)."""
        param = caffe_pb2.SolverParameter()
        param.CopyFrom(self._param)
        return param

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
        """Trains to max_iter (restoring `resume_file`, a .solverstate, first when given)."""
        self._solver.solve(os.fspath(resume_file) if resume_file else "")

    def apply_update(self):
        """One update of the parameters from their accumulated diffs (learning rate,
        regularization, clipping, the solver's rule); the iteration count stays."""
        self._solver.apply_update()

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

    def broadcast_parameters(self):
        """Under mpirun: rank 0's parameters to every rank (after loading weights on rank 0;
        the solver does it itself when built and when restoring)."""
        self._solver.broadcast_parameters()

    def set_allreduce(self, bucket_mb=25.0, fp16=False):
        """Under mpirun: gradients summed in buckets of about `bucket_mb` MB, sent as fp16
        (summed in fp32 per step) when `fp16`."""
        self._solver.set_allreduce(float(bucket_mb), bool(fp16))

    def __repr__(self):
        return f"<mpcaffe {type(self).__name__} '{self.type}' iter {self.iter}>"


class SGDSolver(Solver):
    _type = "SGD"


class NesterovSolver(SGDSolver):
    _type = "Nesterov"


class AdaGradSolver(SGDSolver):
    _type = "AdaGrad"


class RMSPropSolver(SGDSolver):
    _type = "RMSProp"


class AdaDeltaSolver(SGDSolver):
    _type = "AdaDelta"


class AdamSolver(SGDSolver):
    _type = "Adam"


_SOLVER_CLASSES = {cls._type: cls for cls in (SGDSolver, NesterovSolver, AdaGradSolver,
                                               RMSPropSolver, AdaDeltaSolver, AdamSolver)}


def get_solver(solver):
    """The solver a solver .prototxt path or caffe_pb2.SolverParameter describes, as an instance
    of the class of its type (AdamSolver for type: "Adam"; SGD when no type is given)."""
    param = _read_solver_param(solver)
    if param.HasField("type"):
        name = param.type
    elif param.HasField("solver_type"):
        name = _SOLVER_TYPE_NAMES.get(param.solver_type, str(param.solver_type))
    else:
        name = "SGD"
    cls = _SOLVER_CLASSES.get(name)
    if cls is None:
        raise _mpcaffe.SolverError(f"solver type '{name}' is unknown (known types: "
                                   f"{', '.join(_SOLVER_CLASSES)})")
    return cls(param)
