"""mpcaffe.proto — pycaffe's `caffe.proto` package: `from mpcaffe.proto import caffe_pb2` (and
`import mpcaffe.proto.caffe_pb2`) give the caffe.proto message classes, which this package also
re-exports (mpcaffe.proto.NetParameter)."""

import sys as _sys

from .. import caffe_pb2
from ..caffe_pb2 import *  # noqa: F401,F403 — the messages and enums of caffe.proto

_sys.modules[__name__ + ".caffe_pb2"] = caffe_pb2
