// libdnn/kernel_config.h — the one text form of a kernel configuration, "family:config", used by
// the tuning table's records, the MPCAFFE_KERNEL_CONFIG override, `mpcaffe tune` and
// `mpcaffe time --explain`; `config` is the family's schema text (ConfigSchema), or "off": the
// family is not used where it would apply (the next family that applies runs).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "device/error.h"
#include "libdnn/config_schema.h"

namespace mpcaffe::libdnn {

/// The families whose configuration has a text form (the configurable choice names of
/// libdnn/kernel_families.h's registry, in its order), each with its schema: "gemm" (GemmConfig),
/// "conv" (the direct convolution kernel's ConvConfig), "conv_dw" (the depthwise kernel's
/// DepthwiseConfig), "conv_pw" (the pointwise kernel's Convolution::PointwiseTile),
/// "pool_walk_max", "pool_plane_max", "pool_vector_max", "lrn_vector16", "lrn_vector", "lrn"
/// (their launch, RowGroups).
const std::vector<std::string>& ConfigurableFamilies();

/// Where a kernel's configuration came from: its family's default, the tuning table, or
/// MPCAFFE_KERNEL_CONFIG.
enum class ConfigSource { kDefault, kTuned, kOverride };
/// "default", "tuned", "override".
const char* ConfigSourceName(ConfigSource source);

/// One kernel choice, as `mpcaffe time --explain` prints it.
struct KernelChoice {
  std::string family;       ///< "gemm", "conv", "conv_dw", "conv_pw", "conv_gemm", "pool", …
  std::string config;       ///< the configuration's text ("" where the family has none)
  ConfigSource source = ConfigSource::kDefault;
  std::string description;  ///< the problem it was chosen for (GemmDesc::ToString(), …)
};

/// While alive, collects every kernel choice the library notes (NoteKernelChoice), in order,
/// from any thread. One log at a time.
class KernelChoiceLog {
 public:
  KernelChoiceLog();
  ~KernelChoiceLog();
  KernelChoiceLog(const KernelChoiceLog&) = delete;
  KernelChoiceLog& operator=(const KernelChoiceLog&) = delete;
  /// The choices noted since construction or the previous Take (which are then forgotten).
  std::vector<KernelChoice> Take();
};
/// Whether a KernelChoiceLog is alive (the choosers build the text of a choice only then).
bool KernelChoiceLogActive();
/// Adds `choice` to the live KernelChoiceLog, if any.
void NoteKernelChoice(KernelChoice choice);

/// Every kernel family a KernelChoice names (every choice name of the registry): the
/// configurable ones (ConfigurableFamilies) and "conv_gemm" (im2col + GEMM convolution), "pool"
/// (the scalar pooling kernel, in the 1-D launch).
const std::vector<std::string>& KernelFamilies();

/// "family:config" split at its first ':'.
struct KernelConfigText {
  std::string family;
  std::string config;
  /// "off": the family is not to be chosen.
  bool off() const { return config == "off"; }
  std::string ToString() const { return family + ":" + config; }
};

/// Splits `text` into family and config; nothing without a ':', with an empty family or config.
std::optional<KernelConfigText> SplitKernelConfig(const std::string& text);

/// The config text MPCAFFE_KERNEL_CONFIG ("family:config[;family:config…]") sets for `family`,
/// nothing when it names none. Every entry is checked at each call: an entry without ':' or of
/// an unknown family throws an Error naming the setting and the entry. (The config text itself
/// is checked by the family, which knows its schema: ParseFamilyConfig.)
std::optional<KernelConfigText> KernelConfigOverride(const std::string& family);

/// `text` read with `schema` (and `base` for fields it may leave out); on a malformed text an
/// Error "<where>: <family>:<text>: <what is wrong>" naming the field when one is at fault.
template <typename Config>
Config ParseFamilyConfig(const ConfigSchema<Config>& schema, const std::string& family,
                         const std::string& text, const std::string& where, Config base = Config{}) {
  std::string why;
  const std::optional<Config> c = schema.Parse(text, base, &why);
  if (!c) throw Error(where + ": " + family + ":" + text + ": " + why);
  return *c;
}

}  // namespace mpcaffe::libdnn
