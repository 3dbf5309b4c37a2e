// layers/blob.cc — Blob shapes, Caffe's reshape rules and host/device synchronization.
#include "layers/blob.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <sstream>

#include "codegen/typed_buffer.h"

namespace mpcaffe {

std::string ShapeString(const std::vector<int>& shape) {
  std::ostringstream os;
  int64_t count = 1;
  bool overflow = false;
  for (int d : shape) {
    os << d << " ";
    if (d == 0)
      count = 0;
    else if (overflow || std::abs(count) > INT64_MAX / std::abs(static_cast<int64_t>(d)))
      overflow = true;
    else
      count *= d;
  }
  if (overflow && count != 0)
    os << "(overflow)";
  else
    os << "(" << count << ")";
  return os.str();
}

// ---- SyncedMemory --------------------------------------------------------------------------

void SyncedMemory::ToHost() {
  switch (head_) {
    case Head::kUninitialized:
      host_.assign(bytes_, 0);
      head_ = Head::kHost;
      break;
    case Head::kDevice:
      host_.resize(bytes_);
      if (bytes_) device_->CopyToHost(device_mem_.get(), 0, host_.data(), bytes_);
      head_ = Head::kSynced;
      break;
    case Head::kHost:
    case Head::kSynced:
      host_.resize(bytes_);
      break;
  }
}

void SyncedMemory::ToDevice() {
  if (!device_mem_ || device_mem_->bytes() < bytes_)
    device_mem_ = device_->Allocate(std::max<size_t>(bytes_, 4));
  switch (head_) {
    case Head::kUninitialized:
      device_->Zero(device_mem_.get(), 0, bytes_);
      head_ = Head::kDevice;
      break;
    case Head::kHost:
      if (bytes_) device_->CopyToDevice(host_.data(), device_mem_.get(), 0, bytes_);
      head_ = Head::kSynced;
      break;
    case Head::kDevice:
    case Head::kSynced:
      break;
  }
}

const void* SyncedMemory::host_data() {
  ToHost();
  return host_.data();
}

void* SyncedMemory::mutable_host_data() {
  ToHost();
  head_ = Head::kHost;
  ++version_;
  return host_.data();
}

DeviceMemory* SyncedMemory::device_data() {
  ToDevice();
  return device_mem_.get();
}

DeviceMemory* SyncedMemory::mutable_device_data() {
  ToDevice();
  head_ = Head::kDevice;
  ++version_;
  return device_mem_.get();
}

std::unique_ptr<HostView> SyncedMemory::OverwriteOnDevice(size_t bytes) {
  bytes = std::min(bytes, bytes_);
  if (!device_mem_ || device_mem_->bytes() < bytes_)
    device_mem_ = device_->Allocate(std::max<size_t>(bytes_, 4));
  auto view = std::make_unique<HostView>(*device_, device_mem_.get(), 0, bytes,
                                         HostView::Access::kOverwrite);
  // A host array that exists is kept (stale until the next host read copies into it in place):
  // pointers into it, such as pycaffe's NumPy views, stay valid. None is made.
  head_ = Head::kDevice;
  ++version_;
  return view;
}

const void* SyncedMemory::ReadNewest(std::unique_ptr<HostView>* view) {
  if (head_ != Head::kDevice || !bytes_) return host_data();
  *view = std::make_unique<HostView>(*device_, device_mem_.get(), 0, bytes_,
                                     HostView::Access::kRead);
  return (*view)->data();
}

void SyncedMemory::Shrink(size_t bytes) {
  bytes_ = std::min(bytes_, bytes);
  if (host_.size() > bytes_) host_.resize(bytes_);
}

void SyncedMemory::DeviceWritten() {
  if (!device_mem_ || device_mem_->bytes() < bytes_)
    device_mem_ = device_->Allocate(std::max<size_t>(bytes_, 4));
  head_ = Head::kDevice;
  ++version_;
}

void SyncedMemory::ReleaseDevice() {
  if (!device_mem_) return;
  ToHost();
  device_mem_.reset();
  head_ = Head::kHost;
}

void SyncedMemory::SetDeviceMemory(std::shared_ptr<DeviceMemory> memory) {
  if (memory == device_mem_) return;
  if (head_ == Head::kDevice && device_mem_ && bytes_)
    device_->CopyOnDevice(device_mem_.get(), 0, memory.get(), 0, bytes_);
  device_mem_ = std::move(memory);
  if (head_ == Head::kSynced) head_ = Head::kHost;  // the new memory holds nothing yet
  if (head_ == Head::kHost) ToDevice();
}

// ---- Blob ----------------------------------------------------------------------------------

Blob::Blob(Device& device, DataType type, const std::vector<int>& shape, std::string name)
    : device_(&device), type_(type), name_(std::move(name)) {
  Reshape(shape);
}

namespace {
std::atomic<uint64_t> g_shape_generation{0};
}  // namespace

uint64_t BlobShapeGeneration() { return g_shape_generation.load(std::memory_order_relaxed); }

void Blob::Reshape(const std::vector<int>& shape) {
  UnshareData();  // a view ends with a new shape (the net makes it again)
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      throw BlobError("blob '" + name_ + "': dimension " + std::to_string(i) + " of shape " +
                      ShapeString(shape) + " is negative");
    count *= shape[i];
    if (count > INT32_MAX)
      throw BlobError("blob '" + name_ + "': shape " + ShapeString(shape) +
                      " has more than INT32_MAX elements");
  }
  // Refused before any state changes or memory is allocated: a shape that could never fit.
  const uint64_t bytes = static_cast<uint64_t>(count) * SizeOf(type_);
  const uint64_t limit = device_->max_bytes();
  if (limit && bytes > limit)
    throw BlobError("blob '" + name_ + "': shape " + ShapeString(shape) + " needs " +
                    std::to_string(bytes) + " bytes, more than device " + device_->Describe() +
                    " can hold (" + std::to_string(limit) + " bytes)");
  shape_ = shape;
  count_ = static_cast<int>(count);
  g_shape_generation.fetch_add(1, std::memory_order_relaxed);
  // Memory never used (e.g. its allocation failed) follows the shape down as well as up, so a
  // net stays usable at a smaller size after an out-of-memory error.
  if (data_ && data_.use_count() == 1 && data_->head() == SyncedMemory::Head::kUninitialized &&
      !data_->device_memory() && static_cast<size_t>(count_) < capacity_) {
    capacity_ = count_;
    data_.reset();
  }
  if (static_cast<size_t>(count_) > capacity_ || !data_) {
    capacity_ = std::max<size_t>(capacity_, count_);
    data_ = std::make_shared<SyncedMemory>(device_, capacity_ * SizeOf(type_));
    diff_.reset();
  }
}

int Blob::CanonicalAxisIndex(int axis) const {
  const int n = num_axes();
  if (axis < -n || axis >= n)
    throw BlobError("blob '" + name_ + "': axis " + std::to_string(axis) +
                    " out of range for a " + std::to_string(n) + "-axis blob of shape " +
                    shape_string());
  return axis < 0 ? axis + n : axis;
}

int Blob::count(int start, int end) const {
  if (start < 0 || end > num_axes() || start > end)
    throw BlobError("blob '" + name_ + "': axes [" + std::to_string(start) + ", " +
                    std::to_string(end) + ") out of range for shape " + shape_string());
  int c = 1;
  for (int i = start; i < end; ++i) c *= shape_[i];
  return c;
}

int Blob::LegacyShape(int index) const {
  if (num_axes() > 4)
    throw BlobError("blob '" + name_ + "': legacy 4-d accessor on a " +
                    std::to_string(num_axes()) + "-axis blob of shape " + shape_string());
  if (index >= num_axes() || index < -num_axes()) return 1;
  return shape(index);
}

SyncedMemory& Blob::data() const {
  if (!data_) data_ = std::make_shared<SyncedMemory>(device_, capacity_ * SizeOf(type_));
  return *data_;
}

SyncedMemory& Blob::diff() const {
  if (!diff_) diff_ = std::make_shared<SyncedMemory>(device_, capacity_ * SizeOf(type_));
  return *diff_;
}

void Blob::CheckElement(size_t bytes) const {
  if (bytes != SizeOf(type_))
    throw BlobError("blob '" + name_ + "': a " + std::to_string(bytes) +
                    "-byte element pointer asked of a " + Name(type_) + " blob");
}

const void* Blob::host_data() const { return data().host_data(); }
bool Blob::host_newest() const { return data_ && data_->head() == SyncedMemory::Head::kHost; }
void* Blob::mutable_host_data() { return data().mutable_host_data(); }
const void* Blob::host_diff() const { return diff().host_data(); }
void* Blob::mutable_host_diff() { return diff().mutable_host_data(); }
DeviceMemory* Blob::device_data() const { return data().device_data(); }
DeviceMemory* Blob::mutable_device_data() { return data().mutable_device_data(); }
DeviceMemory* Blob::device_diff() const { return diff().device_data(); }
DeviceMemory* Blob::mutable_device_diff() { return diff().mutable_device_data(); }

std::unique_ptr<HostView> Blob::OverwriteData() { return data().OverwriteOnDevice(bytes()); }

const void* Blob::ReadData(std::unique_ptr<HostView>* view) const {
  return data().ReadNewest(view);
}

std::vector<float> Blob::ToFloat() const {
  std::vector<float> out(count_);
  const void* p = host_data();
  for (int i = 0; i < count_; ++i) out[i] = LoadAsFloat(type_, p, i);
  return out;
}

void Blob::FromFloat(const std::vector<float>& values) {
  if (values.size() != static_cast<size_t>(count_))
    throw BlobError("blob '" + name_ + "': FromFloat given " + std::to_string(values.size()) +
                    " values for shape " + shape_string());
  void* p = mutable_host_data();
  const auto& tr = TraitsOf(type_);
  for (int i = 0; i < count_; ++i) {
    const float v = values[i];
    if (!tr.quantized) {
      StoreF(type_, p, i, v);
    } else {
      // Rounded, and brought into the storage range before the conversion to an integer.
      const double r = std::isnan(v) ? 0.0 : std::nearbyint(v);
      StoreQ(type_, p, i, static_cast<int64_t>(std::clamp<double>(r, tr.qmin, tr.qmax)));
    }
  }
}

void Blob::ShareData(const Blob& other) {
  if (other.count() != count_)
    throw BlobError("blob '" + name_ + "' (" + shape_string() + ") cannot share the data of '" +
                    other.name() + "' (" + other.shape_string() + ")");
  if (same_data(other)) return;
  if (!own_data_) own_data_ = data_ ? data_ : std::make_shared<SyncedMemory>(device_, capacity_ * SizeOf(type_));
  data_ = other.data_ ? other.data_ : (other.data_ = std::make_shared<SyncedMemory>(
                                           other.device_, other.capacity_ * SizeOf(other.type_)));
}

void Blob::UnshareData() {
  if (!own_data_) return;
  data_ = std::move(own_data_);
  own_data_.reset();
}

void Blob::ReleaseDeviceData() {
  if (data_) data_->ReleaseDevice();
}

void Blob::SetDataMemory(std::shared_ptr<DeviceMemory> memory) {
  if (!memory || memory->bytes() < bytes())
    throw BlobError("blob '" + name_ + "': shared device memory of " +
                    std::to_string(memory ? memory->bytes() : 0) + " bytes is smaller than its " +
                    std::to_string(bytes()) + " bytes (" + shape_string() + ")");
  // Memory sized for the current shape: the capacity follows the shape down (else the array
  // would copy, and later reallocate, its whole capacity).
  if (memory->bytes() < capacity_bytes()) {
    data().Shrink(bytes());
    capacity_ = count_;
  }
  data().SetDeviceMemory(std::move(memory));
}

size_t Blob::host_bytes() const {
  return (data_ ? data_->host_bytes() : 0) + (diff_ ? diff_->host_bytes() : 0);
}

size_t Blob::device_bytes() const {
  return (data_ ? data_->device_bytes() : 0) + (diff_ ? diff_->device_bytes() : 0);
}

}  // namespace mpcaffe
