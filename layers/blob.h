// layers/blob.h — Blob: an N-d tensor of one runtime DataType whose data and diff live in host
// and device memory kept in sync (the side written last is the newest; copies only when needed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codegen/datatype.h"
#include "device/device.h"

namespace mpcaffe {

/// A Blob's shape, index or size request is invalid (negative dimension, count overflow, axis
/// out of range, ...). The message names the blob and the shapes involved.
class BlobError : public Error {
 public:
  using Error::Error;
};

/// "2 3 4 (24)" — a shape as BVLC's shape_string() prints it.
std::string ShapeString(const std::vector<int>& shape);

/// std::allocator whose value-less construction leaves the elements uninitialised, so that
/// `resize` does not zero an array about to be overwritten (a copy from the device); values
/// given explicitly (`assign(n, 0)`) are still written.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// One array (data or diff) mirrored between a host vector and a device allocation.
/// Memory of either side is allocated on first use; copies happen only when the other side
/// was written last.
class SyncedMemory {
 public:
  enum class Head { kUninitialized, kHost, kDevice, kSynced };

  SyncedMemory(Device* device, size_t bytes) : device_(device), bytes_(bytes) {}
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  size_t bytes() const { return bytes_; }
  Head head() const { return head_; }
  /// Counts the mutable accesses (host or device): a changed version means the contents may
  /// have changed since it was read.
  uint64_t version() const { return version_; }

  /// Host side, copied from the device first when the device is newer. Fresh memory is zero.
  const void* host_data();
  /// As host_data(), and marks the host side newest.
  void* mutable_host_data();
  /// Device side, copied from the host first when the host is newer. Fresh memory is zero.
  DeviceMemory* device_data();
  /// As device_data(), and marks the device side newest.
  DeviceMemory* mutable_device_data();
  /// The shared allocation (for sharing device memory between blobs).
  const std::shared_ptr<DeviceMemory>& device_memory() const { return device_mem_; }

  /// A view for writing the first `bytes` bytes on the device side (HostView kOverwrite): the
  /// caller writes every one of them through it; from then on the device side is the newest (no
  /// host copy is made, and on a device that computes on host memory the bytes are written once,
  /// in place). A host array that exists stays allocated, stale until the next host read. The
  /// device side is allocated if needed.
  std::unique_ptr<HostView> OverwriteOnDevice(size_t bytes);
  /// The newest contents for reading: the host side unless the device side is newer, else a
  /// view of the device side held in `view` (HostView kRead: mapped where the device computes on
  /// host memory), so no host copy is made or kept. Valid while `view` lives.
  const void* ReadNewest(std::unique_ptr<HostView>* view);

  /// Keeps only the first `bytes` bytes (a blob whose shape shrank, moving into memory sized
  /// for the new shape).
  void Shrink(size_t bytes);

  /// Marks the device side newest without copying anything to it (the device memory was
  /// written through another object: a view of it, or a blob sharing it). Allocates the device
  /// side when it has none.
  void DeviceWritten();

  /// Keeps the contents on the host only (copied there first when the device was newer) and
  /// frees the device side; the next device access uploads them again.
  void ReleaseDevice();

  /// Uses `memory` (at least bytes() long, possibly shared with other blobs) as the device side.
  /// The current contents are kept when the device side was the newest (copied over) and the
  /// host side is dropped from being newest, so later reads come from the new memory.
  void SetDeviceMemory(std::shared_ptr<DeviceMemory> memory);

  /// Bytes this array holds on the host and on the device (shared device memory counts fully).
  size_t host_bytes() const { return host_.size(); }
  size_t device_bytes() const { return device_mem_ ? device_mem_->bytes() : 0; }

 private:
  void ToHost();
  void ToDevice();

  Device* device_;
  size_t bytes_;
  std::vector<uint8_t, UninitializedAllocator<uint8_t>> host_;
  std::shared_ptr<DeviceMemory> device_mem_;
  Head head_ = Head::kUninitialized;
  uint64_t version_ = 0;
};

/// A count that advances with every Blob::Reshape in the process (every shape a blob takes,
/// a new blob's too): what is derived from blob shapes alone — whether a Net's views still
/// apply (Net::UpdateViews) — holds while it stands still.
uint64_t BlobShapeGeneration();

/// An N-d tensor of one data type. Shapes follow Caffe: a list of non-negative dimensions; a
/// Reshape that needs more elements than the capacity reallocates, one that needs fewer keeps
/// the memory. Data and diff are separate SyncedMemory arrays (diff is created on first use).
/// Storage is the data type's storage (float, half bits, uint16, uint8).
class Blob {
 public:
  Blob(Device& device, DataType type, const std::vector<int>& shape = {}, std::string name = "");

  Device& device() const { return *device_; }
  DataType type() const { return type_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  /// Changes the shape. Throws BlobError naming the blob for a negative dimension or a count
  /// beyond INT32_MAX elements.
  void Reshape(const std::vector<int>& shape);
  void ReshapeLike(const Blob& other) { Reshape(other.shape()); }

  const std::vector<int>& shape() const { return shape_; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  /// Dimension `axis`; negative axes count from the end. Throws BlobError when out of range.
  int shape(int axis) const { return shape_[CanonicalAxisIndex(axis)]; }
  /// Maps a possibly negative axis to [0, num_axes()); throws BlobError naming the blob.
  int CanonicalAxisIndex(int axis) const;
  int count() const { return count_; }
  /// Product of dimensions [start, end).
  int count(int start, int end) const;
  int count(int start) const { return count(start, num_axes()); }
  /// Legacy 4-d accessors (dimensions beyond the blob's axes are 1).
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;
  std::string shape_string() const { return ShapeString(shape_); }
  /// Bytes of data in the blob's storage type (count · element size).
  size_t bytes() const { return static_cast<size_t>(count_) * SizeOf(type_); }

  /// Host views of the storage (float*, uint16_t*, uint8_t* as the type says).
  const void* host_data() const;
  /// Whether the host side of the data was written last (the device side is stale or absent): an
  /// input set on the host before a pass, not yet copied to the device.
  bool host_newest() const;
  void* mutable_host_data();
  const void* host_diff() const;
  void* mutable_host_diff();
  /// Device views. The pointer is the start of this blob's storage in its allocation.
  DeviceMemory* device_data() const;
  DeviceMemory* mutable_device_data();
  DeviceMemory* device_diff() const;
  DeviceMemory* mutable_device_diff();
  /// Typed device pointers; T must have the storage's element size.
  template <typename T>
  vptr<T> data_ptr() const {
    CheckElement(sizeof(T));
    device_data();
    return vptr<T>(data_->device_memory());
  }
  template <typename T>
  vptr<T> mutable_data_ptr() {
    CheckElement(sizeof(T));
    mutable_device_data();
    return vptr<T>(data_->device_memory());
  }

  /// SyncedMemory::version() of the data: layers re-derive what they keep from a parameter
  /// (packed weights, weight sums, accumulator bias) when it changed.
  uint64_t data_version() const { return data_ ? data_->version() : 0; }

  /// Writes the data through a host view of its device side (SyncedMemory::OverwriteOnDevice):
  /// the caller writes all bytes() bytes before the view ends; no host copy is kept. Parameter
  /// blobs filled or loaded once take this way (no zero-filled host array, no second copy).
  std::unique_ptr<HostView> OverwriteData();
  /// The data for reading without making a host copy (SyncedMemory::ReadNewest); the pointer is
  /// valid while `view` lives.
  const void* ReadData(std::unique_ptr<HostView>* view) const;

  /// Host values as floats (quantized types: raw integer values, not dequantized) and back.
  std::vector<float> ToFloat() const;
  /// Writes `values` (count() of them) converted to the storage type (fp16 rounds to nearest
  /// even; quantized types round and saturate the given integer values).
  void FromFloat(const std::vector<float>& values);

  /// SyncedMemory::ReleaseDevice of the data: for parameters a layer keeps in a derived form
  /// (repacked convolution weights) under reduced memory.
  void ReleaseDeviceData();

  /// Uses `memory` as the device side of the data (reduced-memory sharing). It must hold at
  /// least bytes().
  void SetDataMemory(std::shared_ptr<DeviceMemory> memory);
  /// The data's device allocation (null before first device use).
  std::shared_ptr<DeviceMemory> data_memory() const { return data_ ? data_->device_memory() : nullptr; }

  /// Makes this blob's data the same array as `other`'s (host and device sides, kept in sync
  /// together), as BVLC's Blob::ShareData: the net's inference views (a Split or Dropout top
  /// that is its bottom). The blob's own data is kept aside for UnshareData. The shapes must
  /// have the same count.
  void ShareData(const Blob& other);
  /// Returns to the blob's own data after ShareData (its contents are whatever it last held).
  void UnshareData();
  bool shares_data() const { return own_data_ != nullptr; }
  /// Whether the data is the same array as `other`'s.
  bool same_data(const Blob& other) const { return data_ && data_ == other.data_; }
  /// The device side of the data was written through a view of its memory: mark it newest.
  void DeviceDataWritten() { data().DeviceWritten(); }

  /// Bytes held on host / device by data and diff.
  size_t host_bytes() const;
  size_t device_bytes() const;
  size_t capacity_bytes() const { return capacity_ * SizeOf(type_); }

 private:
  void CheckElement(size_t bytes) const;
  SyncedMemory& data() const;
  SyncedMemory& diff() const;

  Device* device_;
  DataType type_;
  std::string name_;
  std::vector<int> shape_;
  int count_ = 0;
  size_t capacity_ = 0;
  mutable std::shared_ptr<SyncedMemory> data_, diff_;
  std::shared_ptr<SyncedMemory> own_data_;  // set while the data is shared (ShareData)
};

}  // namespace mpcaffe
