"""mpcaffe — `import mpcaffe as caffe`: pycaffe's API (NetSpec, layers, params, Net, Solver,
phases, devices, Classifier, Detector) over mpcaffe's OpenCL/CUDA core, with data types and
quantizer modes."""

from ._version import __version__
from . import caffe_pb2
from . import _mpcaffe
from . import proto
from . import io
from ._mpcaffe import (Error, DeviceError, OutOfMemoryError, BuildError, NetError, SolverError,
                       LayerError, BlobError, ModelFileError)
from ._mpcaffe import devices, set_device, set_mode_gpu, set_mode_cpu, device_index, layer_type_list
from ._mpcaffe import solver_count, solver_rank, mpi_built
from .device_calls import enumerate_devices, set_devices, select_device
from .net_spec import NetSpec, layers, params, to_proto
from .pycaffe import (Net, Blob, Layer, Solver, SGDSolver, NesterovSolver, AdaGradSolver,
                      RMSPropSolver, AdaDeltaSolver, AdamSolver, get_solver, TRAIN, TEST)
from ._command import calibrate
from . import classifier, detector
from .classifier import Classifier
from .detector import Detector

NetParameter = caffe_pb2.NetParameter
LayerParameter = caffe_pb2.LayerParameter
SolverParameter = caffe_pb2.SolverParameter


class _EnumNamespace:
    """The values of one caffe.proto enum as attributes (data_type.CAFFE_HALF == 1)."""

    def __init__(self, enum):
        self._enum = enum
        for value in enum.DESCRIPTOR.values:
            setattr(self, value.name, value.number)

    def Name(self, number):
        return self._enum.Name(number)

    def __iter__(self):
        return iter(value.number for value in self._enum.DESCRIPTOR.values)

    def __repr__(self):
        names = ", ".join(v.name for v in self._enum.DESCRIPTOR.values)
        return f"<{self._enum.DESCRIPTOR.name}: {names}>"


def __getattr__(name):
    """mpcaffe.onnx, mpcaffe.draw and mpcaffe.coord_map load on first use (onnx needs the
    optional `onnx` package, draw `pydot`)."""
    if name in ("onnx", "draw", "coord_map"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'mpcaffe' has no attribute '{name}'")


data_type = _EnumNamespace(caffe_pb2.DataType)
quantizer_mode = _EnumNamespace(caffe_pb2.QuantizerMode)

__all__ = [
    "NetSpec", "layers", "params", "to_proto", "Net", "Blob", "Layer", "TRAIN", "TEST",
    "data_type", "quantizer_mode", "devices", "set_device", "set_mode_gpu", "set_mode_cpu",
    "device_index", "layer_type_list", "enumerate_devices", "set_devices", "select_device",
    "Error", "DeviceError", "OutOfMemoryError", "BuildError", "NetError",
    "SolverError", "LayerError", "BlobError", "ModelFileError", "proto", "caffe_pb2", "NetParameter", "LayerParameter", "SolverParameter",
    "Solver", "SGDSolver", "NesterovSolver", "AdaGradSolver", "RMSPropSolver", "AdaDeltaSolver",
    "AdamSolver", "get_solver", "calibrate", "solver_count", "solver_rank", "mpi_built",
    "Classifier", "Detector",
]
