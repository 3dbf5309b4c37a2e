// python/python_layer.cc — the "Python" layer: python_param { module layer param_str } names a
// class deriving from mpcaffe.Layer; its setup/reshape/forward/backward run under the GIL on the
// host over fp32 blobs (NumPy views), on every device: the host side is brought up to date
// before each call and marked newest where Python may write. A Python exception raised in a
// method keeps its type and gains the layer's name in its message.
#include "python/python_layer.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "layers/layer_registry.h"
#include "net/net.h"

namespace py = pybind11;

namespace mpcaffe::python {
namespace {

class PythonLayer;

/// `self.blobs` of a Python layer: its parameter blobs, grown by add_blob(*shape) in setup()
/// (they are trained by the solver and saved with the net, as BVLC's are).
struct LayerBlobs {
  PythonLayer* layer;
};

class PythonLayer : public Layer {
 public:
  PythonLayer(const caffe::LayerParameter& param, Device& device) : Layer(param, device) {}
  ~PythonLayer() override {
    if (!self_) return;
    if (!Py_IsInitialized()) {  // interpreter gone (process exit): nothing left to release
      self_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    // The object may outlive the net (a reference kept to net.layers[i]): its blobs now
    // refuse access instead of reaching freed memory.
    try {
      if (py::hasattr(self_, "blobs") && py::isinstance<LayerBlobs>(self_.attr("blobs")))
        self_.attr("blobs").cast<LayerBlobs&>().layer = nullptr;
    } catch (py::error_already_set&) {
    }
    self_ = py::object();
  }

  const char* type() const override { return "Python"; }
  bool SupportsType(DataType type) const override { return type == DataType::kFloat32; }
  bool HasBackward() const override { return true; }
  bool ReshapesEachPass() const override { return true; }
  const py::object& object() const { return self_; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& pp = param_.python_param();
    if (pp.module().empty() || pp.layer().empty())
      Fail("python_param needs both 'module' and 'layer' (the Python module to import and the "
           "class in it), got module '" + pp.module() + "', layer '" + pp.layer() + "'");
    py::gil_scoped_acquire gil;
    py::object cls;
    try {
      cls = py::module_::import(pp.module().c_str()).attr(pp.layer().c_str());
    } catch (py::error_already_set& e) {
      Annotate(e, "import of " + pp.module() + "." + pp.layer());
      throw;
    }
    py::object base = py::module_::import("mpcaffe").attr("Layer");
    if (!py::isinstance<py::type>(cls) || !PyObject_IsSubclass(cls.ptr(), base.ptr()))
      Fail(pp.module() + "." + pp.layer() + " is not a class deriving from caffe.Layer "
           "(mpcaffe.Layer)");
    py::object message = py::module_::import("mpcaffe.caffe_pb2").attr("LayerParameter")();
    message.attr("ParseFromString")(py::bytes(param_.SerializeAsString()));
    try {
      self_ = cls(message);
      self_.attr("param_str") = pp.param_str();
      self_.attr("phase") = static_cast<int>(phase());
      self_.attr("blobs") = py::cast(LayerBlobs{this});
    } catch (py::error_already_set& e) {
      Annotate(e, "construction");
      throw;
    }
    in_setup_ = true;
    try {
      Call("setup", Blobs(bottom), Blobs(top));
    } catch (...) {
      in_setup_ = false;
      throw;
    }
    in_setup_ = false;
  }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    py::gil_scoped_acquire gil;
    for (Blob* b : bottom) HostCurrent(*b, false);
    Call("reshape", Blobs(bottom), Blobs(top));
  }

  /// add_blob: a new fp32 parameter blob of `shape` (zeros), only during setup().
  Blob& AddBlob(const std::vector<int>& shape) {
    if (!in_setup_)
      Fail("blobs.add_blob is only possible in setup() (the net's trained parameters are fixed "
           "once the layer is set up)");
    caffe::FillerParameter zeros;
    zeros.set_type("constant");
    AddParam(shape, zeros);
    return *blobs().back();  // drawn now, so values written in setup() stay
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    py::gil_scoped_acquire gil;
    // Views kept from earlier calls see current values, and what Python writes into the tops
    // (through any view) is what the device reads next.
    for (Blob* b : bottom) HostCurrent(*b, false);
    for (auto& b : blobs()) HostCurrent(*b, false);
    for (Blob* t : top) HostWritable(*t, false);
    Call("forward", Blobs(bottom), Blobs(top));
  }

  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {
    py::gil_scoped_acquire gil;
    for (Blob* t : top) HostCurrent(*t, false), HostCurrent(*t, true);
    for (size_t i = 0; i < bottom.size(); ++i) {
      HostCurrent(*bottom[i], false);
      if (propagate_down[i]) HostWritable(*bottom[i], true);
    }
    for (auto& b : blobs()) HostCurrent(*b, false), HostWritable(*b, true);
    py::list down;
    for (bool d : propagate_down) down.append(py::bool_(d));
    Call("backward", Blobs(top), down, Blobs(bottom));
  }

 private:
  static void HostCurrent(Blob& b, bool diff) {
    if (b.count() == 0) return;
    if (diff) b.host_diff();
    else b.host_data();
  }
  static void HostWritable(Blob& b, bool diff) {
    if (b.count() == 0) return;
    if (diff) b.mutable_host_diff();
    else b.mutable_host_data();
  }
  static py::list Blobs(const std::vector<Blob*>& blobs) {
    py::list out;
    for (Blob* b : blobs) out.append(py::cast(b, py::return_value_policy::reference));
    return out;
  }

  template <typename... Args>
  void Call(const char* method, Args&&... args) {
    try {
      self_.attr(method)(std::forward<Args>(args)...);
    } catch (py::error_already_set& e) {
      Annotate(e, std::string(method) + "()");
      throw;
    }
  }

  /// Prefixes the exception's message with the layer (its type is kept, so `except ValueError`
  /// in the caller still matches); exceptions whose first argument is no string get a note.
  void Annotate(py::error_already_set& e, const std::string& where) const {
    const auto& pp = param_.python_param();
    const std::string prefix = "Python layer '" + name() + "' (" + pp.module() + "." +
                               pp.layer() + ") " + where + ": ";
    py::object value = e.value();
    try {
      py::tuple args = value.attr("args");
      if (args.empty() || py::isinstance<py::str>(args[0])) {
        py::list fresh;
        // An exception without arguments (KeyboardInterrupt, a bare raise X) gets the layer
        // as its whole message.
        fresh.append(py::str(args.empty() ? prefix.substr(0, prefix.size() - 2)
                                          : prefix + args[0].cast<std::string>()));
        for (size_t i = 1; i < args.size(); ++i) fresh.append(args[i]);
        value.attr("args") = py::tuple(fresh);
        // ImportError and SyntaxError print their `msg` attribute rather than args.
        if (py::hasattr(value, "msg") && py::isinstance<py::str>(value.attr("msg")))
          value.attr("msg") = py::str(prefix + value.attr("msg").cast<std::string>());
      } else if (py::hasattr(value, "add_note")) {
        value.attr("add_note")(prefix.substr(0, prefix.size() - 2));
      }
    } catch (py::error_already_set&) {  // an exception refusing new args keeps its own
    }
  }

  py::object self_;
  bool in_setup_ = false;
};

}  // namespace

py::object PythonLayerObject(const Net& net, int index) {
  auto* layer = dynamic_cast<const PythonLayer*>(net.layers().at(index).get());
  if (!layer || !layer->object()) return py::none();
  return layer->object();
}

/// The layer behind `self.blobs`; raises when its net is gone.
PythonLayer& LayerOf(const LayerBlobs& b) {
  if (!b.layer)
    throw py::value_error("the net holding this Python layer no longer exists (its blobs went "
                          "with it)");
  return *b.layer;
}

void RegisterPythonLayer(py::module_& m) {
  RegisterLayerType<PythonLayer>("Python");
  py::class_<LayerBlobs>(m, "LayerBlobs", "The parameter blobs of a Python layer (self.blobs).")
      .def("__len__", [](const LayerBlobs& b) { return LayerOf(b).num_params(); })
      .def("__getitem__", [](const LayerBlobs& b, int i) -> Blob& {
        const int n = LayerOf(b).num_params();
        if (i < 0) i += n;
        if (i < 0 || i >= n) throw py::index_error("blob index out of range");
        return *LayerOf(b).blobs().at(i);
      }, py::return_value_policy::reference)
      .def("__iter__", [](const LayerBlobs& b) {
        py::list out;
        for (auto& blob : LayerOf(b).blobs())
          out.append(py::cast(blob.get(), py::return_value_policy::reference));
        return py::iter(out);
      })
      .def("add_blob", [](const LayerBlobs& b, py::args dims) -> Blob& {
        std::vector<int> shape;
        for (auto d : dims) shape.push_back(d.cast<int>());
        return LayerOf(b).AddBlob(shape);
      }, py::return_value_policy::reference,
         "Adds an fp32 parameter blob of the given shape (zeros); only in setup().");
}

}  // namespace mpcaffe::python
