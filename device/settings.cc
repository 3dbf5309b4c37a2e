// device/settings.cc — the one reader of the process environment (see settings.h).
#include "device/settings.h"

#include <cstdlib>

namespace mpcaffe {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A function-local static: built at the first use, also from other files' static
// initialisers (tests/testing/enable_cache.cc), whatever the order of initialisation.
Settings& Current() {
  static Settings settings = Settings::FromEnvironment();
  return settings;
}

}  // namespace

Settings Settings::FromEnvironment() {
  Settings s;
  s.device = Env("MPCAFFE_DEVICE");
  s.max_device_bytes = Env("MPCAFFE_MAX_DEVICE_BYTES");
  s.dump_kernels = Env("MPCAFFE_DUMP_KERNELS");
  s.compile_log = Env("MPCAFFE_COMPILE_LOG");
  s.cuda_include = Env("MPCAFFE_CUDA_INCLUDE");
  s.fp16_arith = Env("MPCAFFE_FP16_ARITH");
  s.blas = Env("MPCAFFE_BLAS");
  s.conv_gemm = Env("MPCAFFE_CONV_GEMM");
  s.conv_depthwise = Env("MPCAFFE_CONV_DEPTHWISE");
  s.kernel_config = Env("MPCAFFE_KERNEL_CONFIG");
  s.depthwise_per_channel = Env("MPCAFFE_DEPTHWISE_PER_CHANNEL");
  s.per_channel_weights = Env("MPCAFFE_PER_CHANNEL_WEIGHTS");
  s.fuse = Env("MPCAFFE_FUSE");
  s.optimize = Env("MPCAFFE_OPTIMIZE");
  s.moe_queues = Env("MPCAFFE_MOE_QUEUES");
  s.isa = Env("MPCAFFE_ISA");
  s.image_codec = Env("MPCAFFE_IMAGE_CODEC");
  s.cache = Env("MPCAFFE_CACHE");
  s.binaries = Env("MPCAFFE_BINARIES");
  s.xdg_cache_home = Env("XDG_CACHE_HOME");
  s.home = Env("HOME");
  if (!Env("OMPI_COMM_WORLD_SIZE").empty()) {
    s.mpi_world_size = Env("OMPI_COMM_WORLD_SIZE");
    s.mpi_local_rank = Env("OMPI_COMM_WORLD_LOCAL_RANK");
  } else if (!Env("PMI_SIZE").empty()) {
    s.mpi_world_size = Env("PMI_SIZE");
    s.mpi_local_rank = Env("MPI_LOCALRANKID");
  } else if (!Env("SLURM_PROCID").empty()) {
    s.mpi_world_size = Env("SLURM_NTASKS");
    s.mpi_local_rank = Env("SLURM_LOCALID");
  }
  s.mpi_timeout = Env("MPCAFFE_MPI_TIMEOUT");
  return s;
}

const Settings& GetSettings() { return Current(); }

ScopedSettings::ScopedSettings() : saved_(Current()) {}

ScopedSettings::ScopedSettings(const std::function<void(Settings&)>& change) : saved_(Current()) {
  change(Current());
}

Settings& ScopedSettings::operator*() { return Current(); }

ScopedSettings::~ScopedSettings() { Current() = saved_; }

}  // namespace mpcaffe
