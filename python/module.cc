// python/module.cc — the pybind11 extension mpcaffe._mpcaffe: devices, Net and Blob with NumPy
// views of the blobs' host memory; the pure-Python package (python/mpcaffe) builds pycaffe's API
// on top of these bindings.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/program_cache.h"
#include "device/device.h"
#include "device/error.h"
#include "layers/blob.h"
#include "layers/layer.h"
#include "layers/layer_registry.h"
#include "layers/memory_data_layer.h"
#include "net/device_choice.h"
#include "net/net.h"
#include "net/solver.h"
#include "proto/model_io.h"
#include "proto/upgrade.h"
#include "python/python_layer.h"
#include "quant/quantizer_proto.h"
#include "tools/command.h"
#include "tools/net_variants.h"

namespace py = pybind11;

// Net and Solver hold unique_ptrs: their implicit copy constructors are declared but unusable,
// so pybind11 must not try to generate copies when returning them by pointer.
namespace pybind11::detail {
template <>
struct is_copy_constructible<mpcaffe::Net> : std::false_type {};
template <>
struct is_copy_constructible<mpcaffe::Solver> : std::false_type {};
}  // namespace pybind11::detail
using mpcaffe::Blob;
using mpcaffe::DataType;
using mpcaffe::Device;
using mpcaffe::Net;

namespace {

/// The device nets are built on: chosen by set_device / set_mode_gpu / set_mode_cpu (-1: none
/// chosen), else the library default (first GPU, else first OpenCL device; MPCAFFE_DEVICE
/// overrides). caffe.Classifier and caffe.Detector take the device `mpcaffe classify` would
/// where none is chosen (_device_for_net).
int g_device_index = -1;
/// The index given to set_device, kept so set_mode_gpu after set_mode_cpu returns to it.
int g_chosen_gpu = -1;

Device& CurrentDevice() {
  return g_device_index >= 0 ? mpcaffe::GetDevice(g_device_index) : mpcaffe::DefaultDevice();
}

/// BVLC's check of an array for set_input_arrays: float32, C-contiguous, 4-D, with the given
/// channels, height and width. Throws std::runtime_error (Python's RuntimeError) as BVLC.
void CheckInputArray(const py::array& a, const std::string& name, int channels, int height,
                     int width) {
  if (!(a.flags() & py::array::c_style))
    throw std::runtime_error(name + " must be C contiguous");
  if (a.ndim() != 4) throw std::runtime_error(name + " must be 4-d");
  if (!a.dtype().is(py::dtype::of<float>())) throw std::runtime_error(name + " must be float32");
  if (a.shape(1) != channels)
    throw std::runtime_error(name + " has wrong number of channels (" +
                             std::to_string(a.shape(1)) + ", expected " +
                             std::to_string(channels) + ")");
  if (a.shape(2) != height)
    throw std::runtime_error(name + " has wrong height (" + std::to_string(a.shape(2)) +
                             ", expected " + std::to_string(height) + ")");
  if (a.shape(3) != width)
    throw std::runtime_error(name + " has wrong width (" + std::to_string(a.shape(3)) +
                             ", expected " + std::to_string(width) + ")");
}

/// pycaffe's Net._set_input_arrays: the net's first layer must be a MemoryData layer; data
/// (N, C, H, W) and labels (N, 1, 1, 1) float32 C-contiguous arrays with N a multiple of its
/// batch size are copied into it.
void SetInputArrays(Net& net, const py::array& data, const py::array& labels) {
  auto* md = net.layers().empty()
                 ? nullptr
                 : dynamic_cast<mpcaffe::MemoryDataLayer*>(net.layers().front().get());
  if (!md)
    throw std::runtime_error(
        "set_input_arrays may only be called if the first layer is a MemoryDataLayer");
  CheckInputArray(data, "data array", md->channels(), md->height(), md->width());
  CheckInputArray(labels, "labels array", 1, 1, 1);
  if (data.shape(0) != labels.shape(0))
    throw std::runtime_error("data and labels must have the same first dimension");
  if (data.shape(0) % md->batch_size() != 0)
    throw std::runtime_error("first dimensions of input arrays must be a multiple of batch size");
  md->Reset(static_cast<const float*>(data.data()), static_cast<const float*>(labels.data()),
            static_cast<int>(data.shape(0)));
}

/// First device of `is_gpu` kind, or -1.
int FirstDevice(bool is_gpu) {
  for (Device* d : mpcaffe::DeviceList())
    if (d->info().is_gpu == is_gpu) return d->index();
  return -1;
}

/// NumPy element type of a blob's storage (int8q is uint8 with a zero point, int16q uint16).
py::dtype StorageDtype(DataType type) {
  switch (type) {
    case DataType::kFloat32: return py::dtype::of<float>();
    case DataType::kFloat16: return py::dtype("float16");
    case DataType::kInt16Q: return py::dtype::of<uint16_t>();
    case DataType::kInt8Q: return py::dtype::of<uint8_t>();
  }
  throw mpcaffe::Error("unknown data type");
}

/// The NumPy views handed out and still alive. Each run (forward, backward, a solver step) first
/// makes the host side newest for every view whose bytes changed since the last run, so writes
/// through a view held across runs reach the device (and layers re-derive packed weights from
/// changed parameters); after the run every live view is brought up to date with the device.
/// A view whose blob was reshaped since is dropped (its memory belongs to the old shape).
/// A view taken since the last run is not hashed when taken: most are temporaries of one
/// statement (`blob.data[...] = x`) that die before the run, and hashing a large input there
/// cost more than writing it. One still alive at the next run counts as written.
class LiveViews {
 public:
  void Add(const py::array& array, Blob& blob, bool diff) {
    Entry e{py::weakref(py::handle(array)), &blob, diff, const_cast<void*>(array.data()),
            static_cast<size_t>(array.nbytes()), 0, false};
    entries_.push_back(std::move(e));
    // Views taken inside a long run (a Python layer's, every iteration of solver.step) die
    // before the run ends: drop the dead ones now and then rather than only after the run.
    if (entries_.size() >= prune_at_) {
      Prune();
      prune_at_ = 2 * entries_.size() + 64;
    }
  }

  /// Host side newest where the user wrote. Holds the GIL.
  void BeforeRun() {
    Prune();
    for (Entry& e : entries_)
      if ((!e.hashed || Hash(e) != e.hash) && Pointer(e, /*mutable_host=*/true) != e.ptr)
        e.blob = nullptr;
    Prune();
  }

  /// Every live view current with the device. Holds the GIL.
  void AfterRun() {
    Prune();
    for (Entry& e : entries_) {
      if (Pointer(e, /*mutable_host=*/false) != e.ptr) {
        e.blob = nullptr;
      } else {
        e.hash = Hash(e);
        e.hashed = true;
      }
    }
    Prune();
  }

 private:
  struct Entry {
    py::weakref array;
    Blob* blob;
    bool diff;
    void* ptr;
    size_t bytes;
    size_t hash;
    bool hashed;  // hash holds the bytes as the last run left them
  };
  static size_t Hash(const Entry& e) {
    return std::hash<std::string_view>()(std::string_view(static_cast<const char*>(e.ptr), e.bytes));
  }
  static const void* Pointer(Entry& e, bool mutable_host) {
    if (e.blob->bytes() != e.bytes) return nullptr;
    if (mutable_host) return e.diff ? e.blob->mutable_host_diff() : e.blob->mutable_host_data();
    return e.diff ? e.blob->host_diff() : e.blob->host_data();
  }
  void Prune() {
    std::vector<Entry> alive;
    for (Entry& e : entries_)
      if (e.blob && !e.array().is_none()) alive.push_back(std::move(e));
    entries_.swap(alive);
  }
  std::vector<Entry> entries_;
  size_t prune_at_ = 64;
};

LiveViews& Views() {
  static LiveViews* views = new LiveViews();  // never destroyed: its weakrefs outlive Python's exit
  return *views;
}

/// Runs `work` with the GIL released between the live views' before and after steps.
template <typename Work>
auto RunWithViews(Work&& work) {
  Views().BeforeRun();
  struct After {
    ~After() noexcept(false) {
      if (!std::uncaught_exceptions()) {
        Views().AfterRun();
        return;
      }
      try {
        Views().AfterRun();
      } catch (const std::exception&) {  // the run's own error is the one to report
      }
    }
  } after;
  py::gil_scoped_release release;
  return work();
}

/// A writable view of the blob's host data or diff; `owner` (the Python Blob) keeps it alive.
/// Taking the view makes the host side the newest, so writes reach the next forward pass; a
/// view kept across runs stays live both ways (see LiveViews).
py::array HostView(py::object owner, bool diff) {
  Blob& blob = owner.cast<Blob&>();
  std::vector<py::ssize_t> shape(blob.shape().begin(), blob.shape().end());
  py::dtype dtype = StorageDtype(blob.type());
  if (blob.count() == 0) return py::array(dtype, shape);
  void* ptr = diff ? blob.mutable_host_diff() : blob.mutable_host_data();
  py::array view(dtype, shape, ptr, owner);
  Views().Add(view, blob, diff);
  return view;
}

/// Writes `value` (NumPy, converted to the storage type as `blob.data[...] = value` would, its
/// element count the blob's) as the blob's whole data on the host side, which becomes the
/// newest: what `blob.data[...] = value` does without a view to track (no hash of the bytes).
/// The host side stays the newest so a Quantizer reading the blob converts it on the host
/// straight into its top's device memory (layers/quantizer_layer.cc, ConvertOnHost) instead of
/// copying the fp32 values over first. Net.forward's input arrays take this way.
void WriteData(Blob& blob, py::object value) {
  py::module_ np = py::module_::import("numpy");
  py::array a = np.attr("ascontiguousarray")(value, StorageDtype(blob.type()));
  if (a.size() != static_cast<py::ssize_t>(blob.count()))
    throw mpcaffe::Error("Blob '" + blob.name() + "': an array of " + std::to_string(a.size()) +
                         " values for a blob of " + std::to_string(blob.count()));
  if (blob.count() == 0) return;
  void* host = blob.mutable_host_data();
  py::gil_scoped_release release;
  std::memcpy(host, a.data(), blob.bytes());
}

/// A NetParameter serialized by Python (caffe_pb2's SerializeToString), upgraded as a file's.
caffe::NetParameter NetParamFromBytes(const std::string& serialized) {
  caffe::NetParameter param;
  if (!param.ParseFromString(serialized))
    throw mpcaffe::NetError("Net: the NetParameter given is not a valid serialized message");
  mpcaffe::UpgradeNetAsNeeded("<NetParameter from Python>", &param);
  return param;
}

/// A prototxt path's or serialized message's NetParameter, typed as `mpcaffe convert --dtype`
/// types it for `device` (as it is for an empty dtype).
caffe::NetParameter TypedModel(const std::string& model, bool is_file, const std::string& dtype,
                               Device& device) {
  caffe::NetParameter param =
      is_file ? mpcaffe::ReadNetParameterText(model) : NetParamFromBytes(model);
  if (dtype.empty()) return param;
  return mpcaffe::tools::TypedVariant(param, mpcaffe::tools::ParseNetDtype(dtype), device);
}

mpcaffe::NetOptions MakeOptions(int phase, int level, const std::vector<std::string>& stages,
                                int reduced_memory, int optimize) {
  if (phase != caffe::TRAIN && phase != caffe::TEST)
    throw mpcaffe::Error("Net: phase must be caffe.TRAIN (0) or caffe.TEST (1), got " +
                         std::to_string(phase));
  mpcaffe::NetOptions options;
  options.phase = static_cast<caffe::Phase>(phase);
  options.level = level;
  options.stages = stages;
  options.reduced_memory = reduced_memory;
  if (optimize < -1 || optimize > 2)
    throw mpcaffe::Error("Net: optimize must be 0, 1 or 2 (None: MPCAFFE_OPTIMIZE, else 1), got " +
                         std::to_string(optimize));
  options.optimize = optimize;
  return options;
}

/// A data type as caffe.proto's DataType number (what caffe.data_type holds in Python).
int ProtoType(DataType type) { return static_cast<int>(mpcaffe::quant::ToProtoDataType(type)); }

/// QuantParams as a dict (type, scale, zero_point, axis, qmin, qmax, symmetric) for Python.
py::dict QuantParamsDict(const mpcaffe::quant::QuantParams& q) {
  py::dict d;
  d["type"] = ProtoType(q.type);
  d["scale"] = q.scale;
  d["zero_point"] = q.zero_point;
  d["axis"] = q.axis;
  d["qmin"] = q.qmin;
  d["qmax"] = q.qmax;
  d["symmetric"] = q.symmetric;
  return d;
}

std::vector<std::string> BlobNamesOf(const Net& net, const std::vector<Blob*>& blobs) {
  std::map<const Blob*, std::string> names;
  for (const auto& name : net.blob_names()) names.emplace(&net.blob(name), name);
  std::vector<std::string> out;
  for (const Blob* b : blobs) out.push_back(names.at(b));
  return out;
}

}  // namespace

PYBIND11_MODULE(_mpcaffe, m) {
  m.doc() = "mpcaffe C++ core (devices, Net, Blob); use the mpcaffe package, not this module";

  // C++ errors become Python exceptions with the same message; the subclasses mirror the C++
  // hierarchy (pybind11 tries the translators last-registered first, so subclasses win).
  auto& error = py::register_exception<mpcaffe::Error>(m, "Error", PyExc_RuntimeError);
  auto& device_error = py::register_exception<mpcaffe::DeviceError>(m, "DeviceError", error.ptr());
  py::register_exception<mpcaffe::OutOfMemoryError>(m, "OutOfMemoryError", device_error.ptr());
  py::register_exception<mpcaffe::BuildError>(m, "BuildError", device_error.ptr());
  py::register_exception<mpcaffe::NetError>(m, "NetError", error.ptr());
  py::register_exception<mpcaffe::SolverError>(m, "SolverError", error.ptr());
  py::register_exception<mpcaffe::LayerError>(m, "LayerError", error.ptr());
  py::register_exception<mpcaffe::BlobError>(m, "BlobError", error.ptr());
  py::register_exception<mpcaffe::ModelFileError>(m, "ModelFileError", error.ptr());

  // Python layers (type "Python") exist in nets built by this process.
  mpcaffe::python::RegisterPythonLayer(m);

  // Every program the package builds goes through the kernel cache (MPCAFFE_CACHE=off disables).
  mpcaffe::cache::EnableProgramCache();

  m.def(
      "run_command",
      [](const std::vector<std::string>& args) {
        // argv as the program gets it; the GIL is released so that Python layers (which take it
        // back) run from whichever thread the net uses.
        std::vector<std::string> words{"mpcaffe"};
        words.insert(words.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& w : words) argv.push_back(w.data());
        argv.push_back(nullptr);
        int status;
        {
          py::gil_scoped_release release;
          status = mpcaffe::tools::RunCommandLine(static_cast<int>(words.size()), argv.data());
          std::fflush(stdout);
          std::fflush(stderr);
        }
        return status;
      },
      py::arg("args"),
      "Runs `mpcaffe <args>` in this process (its commands see this interpreter's Python layers); "
      "returns the exit status.");

  m.def("layer_type_list", [] { return mpcaffe::LayerTypes(); },
        "The layer types nets can use, sorted (Python included).");

  m.def("devices", [] {
    std::vector<py::dict> out;
    for (Device* d : mpcaffe::DeviceList()) {
      py::dict info;
      info["index"] = d->index();
      info["backend"] = mpcaffe::BackendName(d->backend());
      info["name"] = d->info().name;
      info["vendor"] = d->info().vendor;
      info["is_gpu"] = d->info().is_gpu;
      info["fp16"] = d->info().fp16;
      info["implementation"] = d->info().implementation;
      info["platform"] = d->info().platform_name;
      info["global_mem_bytes"] = d->info().global_mem_bytes;
      info["description"] = d->Describe();
      out.push_back(info);
    }
    return out;
  }, "Every device of every backend, as dicts (index, backend, name, vendor, is_gpu, ...).");
  m.def("set_device", [](int index) {
    g_device_index = g_chosen_gpu = mpcaffe::GetDevice(index).index();
  }, "Builds later nets on the device with this index (see devices()).");
  m.def("set_device", [](const std::string& selector) {
    g_device_index = g_chosen_gpu = mpcaffe::SelectDevice(selector).index();
  }, "Builds later nets on the device a selector names: an implementation (\"pocl\", "
     "\"intel\", \"cuda\"), \"gpu\"/\"cpu\", or part of the platform and device name.");
  m.def("device_index", [] { return CurrentDevice().index(); },
        "Index of the device later nets are built on.");
  m.def("_pinned_device", [] { return g_device_index; },
        "The device set_device / set_mode_* chose, or -1 (build_net saves and restores it).");
  m.def("_set_pinned_device", [](int index) {
    g_device_index = index < 0 ? -1 : mpcaffe::GetDevice(index).index();
  });
  m.def("_typed_variant", [](const std::string& model, bool is_file, const std::string& dtype,
                             int device) -> py::bytes {
    std::string out;
    TypedModel(model, is_file, dtype, mpcaffe::GetDevice(device)).SerializeToString(&out);
    return py::bytes(out);
  }, py::arg("model"), py::arg("is_file"), py::arg("dtype"), py::arg("device"),
     "The serialized NetParameter of the model (a prototxt path, or serialized bytes) typed as "
     "`mpcaffe convert --dtype dtype --device device` types it.");
  m.def("_device_for_net", [](const std::string& model, bool is_file,
                              const std::string& dtype) -> py::tuple {
    if (g_device_index >= 0) return py::make_tuple(g_device_index, std::string("set_device"));
    // Typed for the default device: its data types (and signature) are what the choice reads.
    const mpcaffe::DeviceChoice c =
        mpcaffe::ChooseDeviceForNet("", TypedModel(model, is_file, dtype, mpcaffe::DefaultDevice()));
    return py::make_tuple(c.device->index(), c.why);
  }, py::arg("model"), py::arg("is_file"), py::arg("dtype") = std::string(),
     "(index, why): the device `mpcaffe classify` runs the net (typed as `dtype` when given) on "
     "when given none — the one set_device chose, else MPCAFFE_DEVICE's, else the per-net rule "
     "(the fastest recorded pass of this net, else the profile rule for its data types).");
  m.def("set_mode_gpu", [] {
    if (g_chosen_gpu >= 0) {
      g_device_index = g_chosen_gpu;
    } else {
      int gpu = FirstDevice(true);
      g_device_index = gpu >= 0 ? gpu : mpcaffe::DefaultDevice().index();
    }
  }, "Runs on the set_device() choice, else the first GPU, else the library's default device "
     "(PoCL on a machine without a GPU).");
  m.def("set_mode_cpu", [] {
    int cpu = FirstDevice(false);
    if (cpu < 0)
      throw mpcaffe::DeviceError(
          "set_mode_cpu: no CPU device (every device found is a GPU; install PoCL for an "
          "OpenCL CPU device)");
    g_device_index = cpu;
  }, "Runs later nets on the first CPU device (an OpenCL CPU driver such as PoCL).");

  py::class_<Blob>(m, "Blob", "An N-d array of one data type in host and device memory.")
      .def_property_readonly("data", [](py::object self) { return HostView(self, false); },
                             "Writable NumPy view of the host data (float32, float16, uint16 "
                             "for int16q, uint8 for int8q).")
      .def_property_readonly("diff", [](py::object self) { return HostView(self, true); },
                             "Writable NumPy view of the host diff.")
      .def("write_data", &WriteData, py::arg("value"),
           "Writes an array of count values (converted to the storage type) as the whole "
           "data: blob.data[...] = value without a view to keep in sync.")
      .def_property_readonly("shape", [](const Blob& b) { return b.shape(); })
      .def_property_readonly("count", [](const Blob& b) { return b.count(); })
      .def_property_readonly("num", &Blob::num)
      .def_property_readonly("channels", &Blob::channels)
      .def_property_readonly("height", &Blob::height)
      .def_property_readonly("width", &Blob::width)
      .def_property_readonly("data_type", [](const Blob& b) { return ProtoType(b.type()); },
                             "caffe.data_type value of the blob's type.")
      .def_property_readonly("type_name", [](const Blob& b) { return mpcaffe::Name(b.type()); })
      .def("reshape", [](Blob& b, py::args dims) {
        std::vector<int> shape;
        for (auto d : dims) shape.push_back(d.cast<int>());
        b.Reshape(shape);
      }, "Changes the shape (call Net.reshape() afterwards for inputs).")
      .def("__repr__", [](const Blob& b) {
        return "<mpcaffe Blob '" + b.name() + "' " + mpcaffe::Name(b.type()) + " " +
               b.shape_string() + ">";
      });

  py::class_<Net>(m, "Net", "A layer graph built from a NetParameter.")
      .def_static("from_file", [](const std::string& path, int phase, int level,
                                  const std::vector<std::string>& stages, int reduced_memory,
                                  int optimize) {
        return Net::FromFile(path, CurrentDevice(),
                             MakeOptions(phase, level, stages, reduced_memory, optimize));
      }, py::arg("path"), py::arg("phase"), py::arg("level") = 0,
         py::arg("stages") = std::vector<std::string>{}, py::arg("reduced_memory") = -1,
         py::arg("optimize") = -1)
      .def_static("from_bytes", [](py::bytes serialized, int phase, int level,
                                   const std::vector<std::string>& stages, int reduced_memory,
                                   int optimize) {
        return std::make_unique<Net>(NetParamFromBytes(serialized), CurrentDevice(),
                                     MakeOptions(phase, level, stages, reduced_memory, optimize));
      }, py::arg("serialized"), py::arg("phase"), py::arg("level") = 0,
         py::arg("stages") = std::vector<std::string>{}, py::arg("reduced_memory") = -1,
         py::arg("optimize") = -1)
      .def_property_readonly("optimize_level", &Net::optimize_level,
                             "The inference graph optimizer's level this net was built with "
                             "(0 at TRAIN).")
      .def_property_readonly("name", &Net::name)
      .def_property_readonly("phase", [](const Net& n) { return static_cast<int>(n.phase()); })
      .def_property_readonly("device_index", [](const Net& n) { return n.device().index(); })
      .def_property_readonly("blob_names", &Net::blob_names)
      .def_property_readonly("layer_names", &Net::layer_names)
      .def("blob", &Net::blob, py::return_value_policy::reference_internal)
      .def("layer_type", [](const Net& n, int i) { return std::string(n.layers().at(i)->type()); })
      .def("layer_inserted", &Net::inserted)
      .def("layer_types", [](const Net& n, int i) {
        const mpcaffe::Layer& l = *n.layers().at(i);
        std::vector<int> bottoms, tops;
        for (size_t b = 0; b < n.bottom_vecs().at(i).size(); ++b)
          bottoms.push_back(ProtoType(l.bottom_type(static_cast<int>(b))));
        for (size_t t = 0; t < n.top_vecs().at(i).size(); ++t)
          tops.push_back(ProtoType(l.top_type(static_cast<int>(t))));
        return py::make_tuple(ProtoType(l.compute_type()), bottoms, tops);
      }, "(compute type, [bottom types], [top types]) of layer i as caffe.data_type values.")
      .def("layer_param_message", [](const Net& n, int i) {
        return py::bytes(n.layers().at(i)->layer_param().SerializeAsString());
      }, "Serialized LayerParameter of layer i (as built: phase filtered, types resolved).")
      .def("layer_quant_params", [](const Net& n, int i, const std::string& side, int j) {
        mpcaffe::Layer& l = *n.layers().at(i);
        if (side == "bottom") return QuantParamsDict(l.BottomParams(j));
        if (side == "top") return QuantParamsDict(l.TopParams(j));
        if (side == "blob") return QuantParamsDict(l.BlobParams(j));
        throw mpcaffe::Error("Net.layer_quant_params: side must be bottom, top or blob, got '" +
                             side + "'");
      }, py::arg("layer"), py::arg("side"), py::arg("index"),
         "Quantization parameters of a quantized bottom / top / parameter blob of layer i (the "
         "ones its kernels use); raises for float sides or unknown ranges.")
      .def("layer_param_float", [](const Net& n, int i, int j) {
        mpcaffe::Layer& l = *n.layers().at(i);
        std::vector<float> values = l.ParamAsFloat(j);
        const auto& shape = l.param_blob(j).shape();
        std::vector<py::ssize_t> dims(shape.begin(), shape.end());
        py::array_t<float> out(dims);
        std::copy(values.begin(), values.end(), out.mutable_data());
        return out;
      }, "Real values of parameter blob j of layer i (quantized blobs dequantized), a copy.")
      .def("layer_params", [](const Net& n, int i) {
        std::vector<Blob*> out;
        for (auto& b : n.layers().at(i)->blobs()) out.push_back(b.get());
        return out;
      }, py::return_value_policy::reference_internal)
      .def("layer_bottoms", [](const Net& n, int i) { return BlobNamesOf(n, n.bottom_vecs().at(i)); })
      .def("layer_tops", [](const Net& n, int i) { return BlobNamesOf(n, n.top_vecs().at(i)); })
      .def_property_readonly("input_names", [](const Net& n) { return BlobNamesOf(n, n.input_blobs()); })
      .def_property_readonly("output_names", [](const Net& n) { return BlobNamesOf(n, n.output_blobs()); })
      .def("forward", [](Net& n) { return RunWithViews([&] { return n.Forward(); }); }, "Runs every layer; returns the weighted loss.")
      .def("forward_from_to", [](Net& n, int start, int end) {
        return RunWithViews([&] { return n.ForwardFromTo(start, end); });
      })
      .def("backward", [](Net& n) { RunWithViews([&] { n.Backward(); }); }, "Sets the loss tops' diffs to their weights and back-propagates through every layer.")
      .def("backward_from_to", [](Net& n, int start, int end) {
        RunWithViews([&] { n.BackwardFromTo(start, end); });
      })
      .def("reshape", &Net::Reshape)
      .def("clear_param_diffs", [](Net& n) { RunWithViews([&] { n.ClearParamDiffs(); }); },
           "Zeroes the diffs of every learnable parameter.")
      .def("layer_object", &mpcaffe::python::PythonLayerObject,
           "The Python object of layer i when it is a Python layer, else None.")
      .def("layer_need_backward", &Net::layer_need_backward)
      .def("share_with", [](Net& n, const Net& other) { n.ShareTrainedLayersWith(other); },
           "Uses the parameter blobs of `other`'s layers of the same name (BVLC's "
           "ShareTrainedLayersWith).")
      .def_property_readonly("learnable_param_names", &Net::learnable_param_names)
      .def_property("quant_mode", [](const Net& n) { return static_cast<int>(n.quant_mode()); },
                    [](Net& n, int mode) {
                      if (mode < 0 || mode > 3)
                        throw mpcaffe::Error("Net.quant_mode: unknown quantizer mode " +
                                             std::to_string(mode));
                      n.SetQuantMode(static_cast<mpcaffe::quant::QuantizerMode>(mode));
                    })
      .def("copy_from", py::overload_cast<const std::string&>(&Net::CopyTrainedLayersFrom),
           "Copies trained weights (and quantizer ranges) from a .caffemodel by layer name.")
      .def("copy_from_bytes", [](Net& n, py::bytes serialized) {
        caffe::NetParameter param;
        if (!param.ParseFromString(std::string(serialized)))
          throw mpcaffe::NetError("Net.copy_from: the weights given are not a serialized NetParameter");
        n.CopyTrainedLayersFrom(param);
      })
      .def("save", &Net::Save, "Writes the weights and quantizer ranges to a .caffemodel.")
      .def("to_proto_bytes", [](Net& n) {
        caffe::NetParameter param;
        n.ToProto(&param);
        return py::bytes(param.SerializeAsString());
      })
      .def_property_readonly("built_param_bytes", [](const Net& n) {
        return py::bytes(n.built_param().SerializeAsString());
      })
      .def_property_readonly("peak_device_bytes", &Net::peak_device_bytes)
      .def_property_readonly("blob_device_bytes", &Net::blob_device_bytes)
      .def("quantizers_without_range", &Net::QuantizersWithoutRange)
      .def("set_input_arrays", &SetInputArrays, py::arg("data"), py::arg("labels"),
           "Copies data (N, C, H, W) and labels (N, 1, 1, 1), float32 C-contiguous, into the "
           "net's first layer, a MemoryData layer (BVLC's checks).");

  py::class_<mpcaffe::Solver>(m, "Solver", "BVLC's training loop over a train net and test nets.")
      .def_static("from_file", [](const std::string& path) {
        return mpcaffe::Solver::FromFile(path, CurrentDevice());
      })
      .def_static("from_bytes", [](py::bytes serialized) {
        caffe::SolverParameter param;
        if (!param.ParseFromString(std::string(serialized)))
          throw mpcaffe::SolverError("Solver: the SolverParameter given is not a valid serialized message");
        mpcaffe::UpgradeSolverAsNeeded("<SolverParameter from Python>", &param);
        return std::make_unique<mpcaffe::Solver>(param, CurrentDevice());
      })
      .def_property_readonly("type", &mpcaffe::Solver::type)
      .def_property_readonly("iter", &mpcaffe::Solver::iter)
      .def_property_readonly("net", [](mpcaffe::Solver& s) { return &s.net(); },
                             py::return_value_policy::reference_internal)
      .def_property_readonly("test_nets", [](const mpcaffe::Solver& s) {
        std::vector<Net*> out;
        for (const auto& n : s.test_nets()) out.push_back(n.get());
        return out;
      }, py::return_value_policy::reference_internal)
      .def_property_readonly("smoothed_loss", &mpcaffe::Solver::smoothed_loss)
      .def_property_readonly("learning_rate", &mpcaffe::Solver::GetLearningRate)
      .def("step", [](mpcaffe::Solver& s, int iters) {
        return RunWithViews([&] {
          s.Step(iters);
          return s.smoothed_loss();
        });
      }, "Runs `iters` iterations; returns the smoothed loss.")
      .def("solve", [](mpcaffe::Solver& s, const std::string& resume) {
        RunWithViews([&] { s.Solve(resume); });
      }, py::arg("resume_file") = "")
      .def("test", [](mpcaffe::Solver& s, int i) { return RunWithViews([&] { return s.Test(i); }); })
      .def("test_output_names", &mpcaffe::Solver::TestOutputNames)
      .def("apply_update", [](mpcaffe::Solver& s) { RunWithViews([&] { s.ApplyUpdate(); }); },
           "One update from the accumulated parameter diffs (the iteration count stays).")
      .def("snapshot", &mpcaffe::Solver::Snapshot)
      .def("restore", &mpcaffe::Solver::Restore)
      .def("quiet", [](mpcaffe::Solver& s) { s.set_log(nullptr); }, "Stops progress lines.")
      .def("broadcast_parameters", [](mpcaffe::Solver& s) {
        RunWithViews([&] { s.BroadcastParameters(); });
      }, "Rank 0's parameters to every rank of the MPI job (after loading weights).")
      .def("set_allreduce", [](mpcaffe::Solver& s, double bucket_mb, bool fp16) {
        if (!(bucket_mb > 0)) throw mpcaffe::SolverError("set_allreduce: bucket_mb must be positive");
        mpcaffe::AllreduceOptions o;
        o.bucket_bytes = static_cast<size_t>(bucket_mb * (1 << 20));
        o.half = fp16;
        s.set_allreduce_options(o);
      }, py::arg("bucket_mb") = 25.0, py::arg("fp16") = false,
         "How gradients travel between the ranks of an MPI job (bucket size, fp16).");

  // The data-parallel job (MPI): pycaffe's solver_count / solver_rank.
  m.def("solver_count", [] { return mpcaffe::Communicator::World().size(); },
        "Processes of the MPI job this process belongs to (1 outside mpirun).");
  m.def("solver_rank", [] { return mpcaffe::Communicator::World().rank(); },
        "This process's rank in its MPI job (0 outside mpirun).");
  m.def("mpi_built", &mpcaffe::MpiBuilt, "Whether the library was built with MPI support.");
}
