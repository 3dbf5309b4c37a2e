// libdnn/config_schema.h — one description of a tunable kernel configuration's fields (name,
// member, allowed values, value in records written before the field existed, values the Tuner
// tries around a default), from which its text form is printed and parsed (the config of the
// tuning table's "family:config" records and of MPCAFFE_KERNEL_CONFIG, kernel_config.h;
// MPCAFFE_CONV_TILES, `mpcaffe tune` output), its fields range-checked and compared, and the
// Tuner's variations generated. Every configurable kernel family has one: GemmConfig::Schema,
// ConvConfig::Schema, DepthwiseConfig::Schema, Convolution::PointwiseTile::Schema and the
// row-walking launches' RowGroups::Schema; the registry's choices reach them through their text
// (ChoiceSchema, libdnn/kernel_families.h).
#pragma once

#include <cctype>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace mpcaffe::libdnn {

/// Values lo, lo + 1, …, hi.
inline std::vector<int> ValueRange(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

template <typename Config>
struct ConfigField {
  const char* key;           ///< text key: "tm" in "tm=6", "oc" in "oc4"
  int Config::*member;       ///< the field
  std::vector<int> allowed;  ///< every value the field may take
  /// The value a record without this field means (a field added later, e.g. GEMM kp and lm);
  /// nullopt: the field is required.
  std::optional<int> absent = std::nullopt;
  /// false: printed only when it differs from `absent` (ConvConfig's " k4").
  bool always_printed = true;
  /// Values the Tuner also times around a default (see ConfigSchema::Variations).
  std::vector<int> variations = {};
};

/// Text form "<key><sep><value> …" in field order, words separated by one space.
template <typename Config>
class ConfigSchema {
 public:
  ConfigSchema(std::string separator, std::vector<ConfigField<Config>> fields)
      : separator_(std::move(separator)), fields_(std::move(fields)) {}

  const std::vector<ConfigField<Config>>& fields() const { return fields_; }

  /// The fields' words, e.g. "tm=6 tn=2 …" or "l1 oc4 px3 v8".
  std::string Print(const Config& c) const {
    std::ostringstream s;
    bool first = true;
    for (const auto& f : fields_) {
      const int v = c.*f.member;
      if (!f.always_printed && f.absent && v == *f.absent) continue;
      s << (first ? "" : " ") << f.key << separator_ << v;
      first = false;
    }
    return s.str();
  }

  /// Reads Print()'s words (in any order) into a copy of `base`: every required field once,
  /// optional ones at most once (their `absent` value otherwise), each value an integer in its
  /// allowed set; nothing on an unknown key, a repeated one, or a malformed word, with `why`
  /// (when given) saying which field or word is at fault.
  std::optional<Config> Parse(const std::string& text, Config base = Config{},
                              std::string* why = nullptr) const {
    auto fail = [&](const std::string& what) -> std::optional<Config> {
      if (why) *why = what;
      return std::nullopt;
    };
    std::istringstream in(text);
    std::vector<bool> seen(fields_.size(), false);
    for (std::string word; in >> word;) {
      size_t i = 0;
      for (; i < fields_.size(); ++i) {
        const std::string prefix = std::string(fields_[i].key) + separator_;
        if (word.compare(0, prefix.size(), prefix) != 0) continue;
        // Without a separator ("oc4"), a longer key must not be taken for a shorter one.
        const std::string rest = word.substr(prefix.size());
        if (rest.empty() || !(std::isdigit(static_cast<unsigned char>(rest[0])) || rest[0] == '-'))
          continue;
        break;
      }
      if (i == fields_.size()) {
        // A key with a value that is no number ("tm=x", "pxq"): name that field.
        size_t longest = fields_.size();
        for (size_t k = 0; k < fields_.size(); ++k) {
          const std::string prefix = std::string(fields_[k].key) + separator_;
          if (word.compare(0, prefix.size(), prefix) == 0 &&
              (longest == fields_.size() ||
               prefix.size() > std::string(fields_[longest].key).size() + separator_.size()))
            longest = k;
        }
        if (longest == fields_.size())
          return fail("'" + word + "' is no field (fields: " + Keys() + ")");
        const std::string key = fields_[longest].key;
        return fail("field " + key + ": '" + word.substr(key.size() + separator_.size()) +
                    "' is no integer");
      }
      const std::string key = fields_[i].key;
      if (seen[i]) return fail("field " + key + " given twice");
      const std::string value = word.substr(key.size() + separator_.size());
      size_t used = 0;
      int v = 0;
      try {
        v = std::stoi(value, &used);
      } catch (...) {
        return fail("field " + key + ": '" + value + "' is no integer");
      }
      if (used != value.size()) return fail("field " + key + ": '" + value + "' is no integer");
      if (!Allowed(fields_[i], v))
        return fail("field " + key + ": " + std::to_string(v) + " is not in " +
                    AllowedText(key.c_str()));
      base.*fields_[i].member = v;
      seen[i] = true;
    }
    for (size_t i = 0; i < fields_.size(); ++i) {
      if (seen[i]) continue;
      if (!fields_[i].absent) return fail("field " + std::string(fields_[i].key) + " missing");
      base.*fields_[i].member = *fields_[i].absent;
    }
    return base;
  }

  /// The fields' keys, e.g. "tm, tn, vw".
  std::string Keys() const {
    std::string s;
    for (const auto& f : fields_) s += (s.empty() ? "" : ", ") + std::string(f.key);
    return s;
  }

  /// Every field within its allowed values.
  bool InRange(const Config& c) const {
    for (const auto& f : fields_)
      if (!Allowed(f, c.*f.member)) return false;
    return true;
  }

  bool Equal(const Config& a, const Config& b) const {
    for (const auto& f : fields_)
      if (a.*f.member != b.*f.member) return false;
    return true;
  }

  /// `base` with each of its fields set in turn to each of that field's `variations` other
  /// than the value it has (ku = 2 beside ku = 1, the other work-group order, …).
  std::vector<Config> Variations(const Config& base) const {
    std::vector<Config> out;
    for (const auto& f : fields_)
      for (int v : f.variations) {
        if (v == base.*f.member) continue;
        Config c = base;
        c.*f.member = v;
        out.push_back(c);
      }
    return out;
  }

  /// A covering sample of `candidates`: few of them, yet every value that any candidate gives
  /// a field is taken by at least one chosen configuration, so each branch a generator takes
  /// on one field's value is compiled once. Greedy set cover over the (field, value) pairs: the
  /// candidate covering most pairs not yet covered first, ties to the earlier candidate (the
  /// Tuner lists its default first), so the same candidates give the same sample every run.
  /// The tests compile this sample; `make test-sweep` compiles every candidate.
  std::vector<Config> Covering(const std::vector<Config>& candidates) const {
    std::vector<std::vector<int>> uncovered(fields_.size());  // per field, values still to take
    for (size_t f = 0; f < fields_.size(); ++f)
      for (const Config& c : candidates) {
        const int v = c.*fields_[f].member;
        bool known = false;
        for (int u : uncovered[f]) known = known || u == v;
        if (!known) uncovered[f].push_back(v);
      }
    auto gain = [&](const Config& c) {
      int n = 0;
      for (size_t f = 0; f < fields_.size(); ++f)
        for (int u : uncovered[f]) n += u == c.*fields_[f].member;
      return n;
    };
    std::vector<Config> out;
    for (;;) {
      int best = -1, best_gain = 0;
      for (size_t i = 0; i < candidates.size(); ++i) {
        const int g = gain(candidates[i]);
        if (g > best_gain) best = static_cast<int>(i), best_gain = g;
      }
      if (best < 0) return out;
      const Config& c = candidates[best];
      for (size_t f = 0; f < fields_.size(); ++f) {
        auto& u = uncovered[f];
        for (size_t k = 0; k < u.size(); ++k)
          if (u[k] == c.*fields_[f].member) u.erase(u.begin() + static_cast<long>(k--));
      }
      out.push_back(c);
    }
  }

  /// The allowed values of `key`, e.g. for an error message ("vw 1/2/4/8/16").
  std::string AllowedText(const char* key) const {
    for (const auto& f : fields_) {
      if (std::string(f.key) != key) continue;
      const auto& a = f.allowed;
      bool contiguous = a.size() > 2;
      for (size_t i = 1; i < a.size(); ++i) contiguous = contiguous && a[i] == a[i - 1] + 1;
      if (contiguous) return std::to_string(a.front()) + "…" + std::to_string(a.back());
      std::string s;
      for (size_t i = 0; i < a.size(); ++i) s += (i ? "/" : "") + std::to_string(a[i]);
      return s;
    }
    return "";
  }

 private:
  static bool Allowed(const ConfigField<Config>& f, int v) {
    for (int a : f.allowed)
      if (a == v) return true;
    return false;
  }

  std::string separator_;
  std::vector<ConfigField<Config>> fields_;
};

}  // namespace mpcaffe::libdnn
