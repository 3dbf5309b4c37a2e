// device/program_store.h — the hook through which Device::BuildProgram keeps compiled program
// binaries (implemented by cache/ProgramCache; the device layer itself stores nothing). The key
// (ProgramKey) is in device/device.h.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "device/device.h"

namespace mpcaffe {

/// A persistent map ProgramKey -> binary. Implementations must be thread-safe and must never
/// throw: a store that cannot read or write simply misses.
class ProgramBinaryStore {
 public:
  virtual ~ProgramBinaryStore() = default;
  /// The binary stored for exactly this key, or nothing.
  virtual std::optional<std::string> Load(const ProgramKey& key) = 0;
  /// Stores (or replaces) the binary for the key.
  virtual void Save(const ProgramKey& key, const std::string& binary) = 0;
  /// The driver rejected a binary Load() returned: forget it.
  virtual void Reject(const ProgramKey& key, const std::string& reason) = 0;
  /// Whether NoteBuilt recorded this key before, in this process or another: a text built
  /// before is built again, so its binary is worth storing where fetching one costs compiles
  /// (DeviceInfo::binary_costs_compiles). A store that keeps no such record says false.
  virtual bool WasBuilt(const ProgramKey& key) {
    (void)key;
    return false;
  }
  /// Records that the key was compiled without its binary being stored.
  virtual void NoteBuilt(const ProgramKey& key) { (void)key; }
  /// Seconds spent compiling from source / creating a program from a stored binary.
  virtual void RecordCompile(double seconds) = 0;
  virtual void RecordLoad(double seconds) = 0;
};

/// The store Device::BuildProgram goes through; null (the default) means none.
void SetProgramBinaryStore(std::shared_ptr<ProgramBinaryStore> store);
std::shared_ptr<ProgramBinaryStore> GetProgramBinaryStore();

}  // namespace mpcaffe
