// device/settings.h — every environment variable mpcaffe reads, read in one place: the process
// environment is read once, at the first GetSettings(), into a Settings value; the code that
// acts on a variable (device selection, the kernel cache, the GEMM chooser, …) reads that value,
// never the environment. Values are kept as written: the code using one parses it and names the
// variable in its error (e.g. "MPCAFFE_BLAS=foo: expected libdnn, clblast, cublas or auto").
// Tests change them for a scope with ScopedSettings.
#pragma once

#include <functional>
#include <string>

namespace mpcaffe {

struct Settings {
  std::string device;            ///< MPCAFFE_DEVICE: the default device's selector (FindDevice)
  std::string max_device_bytes;  ///< MPCAFFE_MAX_DEVICE_BYTES: an artificial device memory cap
  std::string dump_kernels;      ///< MPCAFFE_DUMP_KERNELS: a folder for every program's source
  std::string compile_log;       ///< MPCAFFE_COMPILE_LOG: a file each program event is appended to
  std::string cuda_include;      ///< MPCAFFE_CUDA_INCLUDE: CUDA headers for NVRTC
  std::string fp16_arith;        ///< MPCAFFE_FP16_ARITH: "0" keeps fp16 as storage only
  std::string blas;              ///< MPCAFFE_BLAS: libdnn | clblast | cublas | auto
  std::string conv_gemm;         ///< MPCAFFE_CONV_GEMM: "0"/"1" force the im2col + GEMM path
  std::string conv_depthwise;    ///< MPCAFFE_CONV_DEPTHWISE: "0" turns the depthwise kernel off
  /// MPCAFFE_KERNEL_CONFIG: "family:config[;family:config…]" forces kernel configurations
  /// (libdnn/kernel_config.h), e.g. "conv_pw:oc4 px2 v8", "conv_pw:off", "gemm:outer tm=4 …"
  std::string kernel_config;
  /// MPCAFFE_DEPTHWISE_PER_CHANNEL: "0" gives int8 depthwise weights one scale per layer
  std::string depthwise_per_channel;
  /// MPCAFFE_PER_CHANNEL_WEIGHTS: "0" gives the int8 Convolution and InnerProduct weight blobs
  /// other than depthwise ones one scale per layer (by default: a symmetric scale per output
  /// channel)
  std::string per_channel_weights;
  std::string fuse;              ///< MPCAFFE_FUSE: "0" turns the Net's ReLU fusion off
  std::string optimize;          ///< MPCAFFE_OPTIMIZE: "0" turns the inference graph optimizer off
  std::string moe_queues;        ///< MPCAFFE_MOE_QUEUES: queues the MOE experts spread over
  std::string isa;               ///< MPCAFFE_ISA: generic | avx2 | avx512 (host_isa.h)
  std::string image_codec;       ///< MPCAFFE_IMAGE_CODEC: the image codec plugin's file
  std::string cache;             ///< MPCAFFE_CACHE: the kernel-cache file, or "off"
  /// MPCAFFE_BINARIES: "always" stores every program's binary at its first build; "auto" (or
  /// unset) waits for the second build where a binary costs compiles (binary_costs_compiles)
  std::string binaries;
  std::string xdg_cache_home;    ///< XDG_CACHE_HOME (the cache's default folder)
  std::string home;              ///< HOME (the cache's fallback folder)
  /// The launcher's description of an MPI job (Open MPI's OMPI_COMM_WORLD_SIZE /
  /// OMPI_COMM_WORLD_LOCAL_RANK, else MPICH/Hydra's PMI_SIZE / MPI_LOCALRANKID, else Slurm's
  /// SLURM_NTASKS / SLURM_LOCALID when SLURM_PROCID is set): "" when not started by one.
  std::string mpi_world_size;
  std::string mpi_local_rank;
  std::string mpi_timeout;       ///< MPCAFFE_MPI_TIMEOUT: seconds a collective may wait (300)

  /// The values of the process environment now (unset variables are "").
  static Settings FromEnvironment();
};

/// The settings of this process: the environment at the first call, unless a ScopedSettings
/// replaced them.
const Settings& GetSettings();

/// Changes the settings for its lifetime and restores the previous ones after (tests; not
/// thread-safe against concurrent GetSettings users):
///   ScopedSettings env;  env->blas = "clblast";  …  // restored at the end of the scope
class ScopedSettings {
 public:
  ScopedSettings();
  explicit ScopedSettings(const std::function<void(Settings&)>& change);
  ~ScopedSettings();
  /// The process's settings, to change while this scope lives.
  Settings& operator*();
  Settings* operator->() { return &**this; }
  ScopedSettings(const ScopedSettings&) = delete;
  ScopedSettings& operator=(const ScopedSettings&) = delete;

 private:
  Settings saved_;
};

}  // namespace mpcaffe
