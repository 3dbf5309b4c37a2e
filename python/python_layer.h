// python/python_layer.h — the "Python" layer type (BVLC's PythonLayer): a layer whose setup,
// reshape, forward and backward are methods of a Python object, called under the GIL over the
// fp32 blobs' host memory. Registered by the extension module, so only Python programs have it.
#pragma once

#include <pybind11/pybind11.h>

namespace mpcaffe {
class Net;
}

namespace mpcaffe::python {

/// Registers the "Python" layer type and binds its helper classes into `m` (once per process).
void RegisterPythonLayer(pybind11::module_& m);

/// The Python object behind layer `index` of `net` when it is a Python layer, else None.
pybind11::object PythonLayerObject(const Net& net, int index);

}  // namespace mpcaffe::python
