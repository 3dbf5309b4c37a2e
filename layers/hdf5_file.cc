// layers/hdf5_file.cc — HDF5 datasets read and appended through the HDF5 C library, every handle
// closed on every path, the library's own error printing off while we call it (our errors say
// what failed instead).
#include "layers/hdf5_file.h"

#include <hdf5.h>

#include <cstdio>
#include <type_traits>

#include "device/error.h"

namespace mpcaffe {
namespace {

static_assert(std::is_same_v<hid_t, int64_t>, "Hdf5Writer stores a hid_t as int64_t");

/// Turns off HDF5's automatic error stack printing for its lifetime (restored after).
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

/// An HDF5 handle closed by `close` at scope exit (negative: none).
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

std::string Where(const std::string& path, const std::string& name) {
  return "HDF5 file '" + path + "', dataset '" + name + "'";
}

}  // namespace

Hdf5Array ReadHdf5Dataset(const std::string& path, const std::string& name) {
  QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw Error("HDF5 file '" + path + "' cannot be opened (dataset '" + name + "' wanted)");
    std::fclose(f);
    throw Error("'" + path + "' is not an HDF5 file (dataset '" + name + "' wanted)");
  }
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) throw Error("HDF5 file '" + path + "' cannot be opened (corrupt?)");
  if (H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) <= 0)
    throw Error(Where(path, name) + ": no such dataset");
  Handle set(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!set.ok()) throw Error(Where(path, name) + ": cannot be opened (not a dataset?)");
  Handle type(H5Dget_type(set.get()), H5Tclose);
  const H5T_class_t cls = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    throw Error(Where(path, name) + ": not numeric (integer or floating-point values expected)");
  Handle space(H5Dget_space(set.get()), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 1) throw Error(Where(path, name) + ": needs at least one dimension");
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  Hdf5Array a;
  size_t count = 1;
  for (hsize_t d : dims) {
    a.dims.push_back(static_cast<int64_t>(d));
    count *= static_cast<size_t>(d);
  }
  a.values.resize(count);
  if (count && H5Dread(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.values.data()) < 0)
    throw Error(Where(path, name) + ": cannot be read (corrupt?)");
  return a;
}

Hdf5Writer::Hdf5Writer(const std::string& path) : path_(path) {
  QuietErrors quiet;
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) throw Error("HDF5 file '" + path + "' cannot be created");
}

Hdf5Writer::~Hdf5Writer() {
  if (file_ >= 0) H5Fclose(file_);
}

void Hdf5Writer::Append(const std::string& name, const std::vector<int64_t>& dims,
                        const float* values) {
  QuietErrors quiet;
  if (dims.empty()) throw Error(Where(path_, name) + ": no dimensions to write");
  const int rank = static_cast<int>(dims.size());
  std::vector<hsize_t> add(dims.begin(), dims.end());
  std::vector<hsize_t> start(rank, 0), total = add;
  hid_t set_id = -1;
  if (H5Lexists(file_, name.c_str(), H5P_DEFAULT) > 0) {
    set_id = H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
    Handle space(set_id >= 0 ? H5Dget_space(set_id) : -1, H5Sclose);
    std::vector<hsize_t> have(rank);
    if (!space.ok() || H5Sget_simple_extent_ndims(space.get()) != rank) {
      if (set_id >= 0) H5Dclose(set_id);
      throw Error(Where(path_, name) + ": rows of another rank appended");
    }
    H5Sget_simple_extent_dims(space.get(), have.data(), nullptr);
    for (int i = 1; i < rank; ++i)
      if (have[i] != add[i]) {
        H5Dclose(set_id);
        throw Error(Where(path_, name) + ": rows of another shape appended");
      }
    start[0] = have[0];
    total[0] = have[0] + add[0];
    if (H5Dset_extent(set_id, total.data()) < 0) {
      H5Dclose(set_id);
      throw Error(Where(path_, name) + ": cannot be extended");
    }
  } else {
    std::vector<hsize_t> max = add, chunk = add;
    max[0] = H5S_UNLIMITED;
    if (chunk[0] == 0) chunk[0] = 1;
    for (hsize_t& c : chunk)
      if (c == 0) c = 1;
    Handle space(H5Screate_simple(rank, add.data(), max.data()), H5Sclose);
    Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (!space.ok() || !props.ok() || H5Pset_chunk(props.get(), rank, chunk.data()) < 0)
      throw Error(Where(path_, name) + ": cannot be created");
    set_id = H5Dcreate2(file_, name.c_str(), H5T_NATIVE_FLOAT, space.get(), H5P_DEFAULT,
                        props.get(), H5P_DEFAULT);
    if (set_id < 0) throw Error(Where(path_, name) + ": cannot be created");
  }
  Handle set(set_id, H5Dclose);
  if (add[0] == 0) return;
  Handle file_space(H5Dget_space(set.get()), H5Sclose);
  Handle mem_space(H5Screate_simple(rank, add.data(), nullptr), H5Sclose);
  if (!file_space.ok() || !mem_space.ok() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, add.data(),
                          nullptr) < 0 ||
      H5Dwrite(set.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(), H5P_DEFAULT,
               values) < 0 ||
      H5Fflush(file_, H5F_SCOPE_LOCAL) < 0)
    throw Error(Where(path_, name) + ": cannot be written");
}

}  // namespace mpcaffe
