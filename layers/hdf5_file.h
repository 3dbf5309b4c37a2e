// layers/hdf5_file.h — numeric HDF5 datasets as float arrays (the HDF5 C library behind it), for
// the HDF5Data and HDF5Output layers and their tests; errors name the file and the dataset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpcaffe {

/// A dataset's dimensions (outermost first) and its values in row-major order.
struct Hdf5Array {
  std::vector<int64_t> dims;
  std::vector<float> values;
};

/// Dataset `name` of the HDF5 file `path`, any integer or floating-point type converted to float
/// by the library. Throws mpcaffe::Error naming the file (and the dataset) when the file cannot
/// be opened or is not HDF5, the dataset is missing, not numeric, or cannot be read.
Hdf5Array ReadHdf5Dataset(const std::string& path, const std::string& name);

/// An HDF5 file created (truncated) at construction, closed at destruction, whose float
/// datasets grow along their first dimension: Append writes rows at the end of dataset `name`
/// (creating it, chunked and extensible along dimension 0, at its first rows) and flushes the
/// file. Throws mpcaffe::Error naming the file and the dataset.
class Hdf5Writer {
 public:
  explicit Hdf5Writer(const std::string& path);
  ~Hdf5Writer();
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;

  /// `dims` [rows, ...]: later appends to the same dataset must give the same inner dims.
  void Append(const std::string& name, const std::vector<int64_t>& dims, const float* values);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int64_t file_ = -1;  // hid_t
};

}  // namespace mpcaffe
