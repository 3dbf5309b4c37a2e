// codegen/kernel_writer.cc — the text assembly of KernelWriter (the dialect table is
// codegen/dialect.cc): type blocks, helper functions written once with placeholders, kernels.
#include "codegen/kernel_writer.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "device/host_isa.h"
#include "device/settings.h"

namespace mpcaffe {

namespace {

// Helper functions, written once with placeholders.
const char* kRequantizeText = R"(// Fixed-point requantization with one rounding (quant/fixed_point.h is the host reference).
$device_fn mp_i64 mp_requant64(mp_i64 acc, int mult, int shift) {
  int right = 31 - shift;
  int negative = $negative_i64(acc);
  mp_u64 a = negative ? (mp_u64)0 - (mp_u64)acc : (mp_u64)acc;
  mp_u64 m = (mp_u64)(mp_u32)mult;
  if (right >= 1 && right <= 62 && (a >> 31) == 0) {
    // a < 2^31 and m < 2^32: the product, its nudge (at most 2^61) and their sum fit 64 bits, and
    // the result is below 2^63: the 128-bit steps below give the same (int16q sums of short rows).
    const mp_u64 q = (a * m + ((mp_u64)1 << (right - 1))) >> right;
    return negative ? -(mp_i64)q : (mp_i64)q;
  }
  mp_u64 lo = a * m;
  mp_u64 hi = $mul_hi_u64(a, m);
  mp_u64 r;
  int overflow = 0;
  if (right <= 0) {
    r = lo;
    overflow = hi != 0;
  } else if (right >= 128) {
    r = 0;
  } else {
    if (right - 1 < 64) {
      mp_u64 nudge = (mp_u64)1 << (right - 1);
      mp_u64 sum = lo + nudge;
      hi += sum < lo ? 1 : 0;
      lo = sum;
    } else {
      hi += (mp_u64)1 << (right - 1 - 64);
    }
    if (right < 64) {
      r = (hi << (64 - right)) | (lo >> right);
      overflow = (hi >> right) != 0;
    } else {
      r = hi >> (right - 64);
    }
  }
  const mp_u64 limit = (mp_u64)0x7fffffffffffffffULL;
  if (overflow || r > limit) r = limit;
  return negative ? -(mp_i64)r : (mp_i64)r;
}
$device_fn int mp_requant32(int acc, int mult, int shift) {
  int right = 31 - shift;
  mp_i64 r;
  if (right >= 1 && right <= 62) {
    // |acc|·mult < 2^63 and the nudge ≤ 2^61: the 64-bit sum is exact (the int8 epilogue's
    // usual case, without mp_requant64's 128-bit product).
    mp_i64 p = (mp_i64)acc * (mp_i64)(mp_u32)mult;
    mp_u64 a = p < 0 ? (mp_u64)0 - (mp_u64)p : (mp_u64)p;
    mp_u64 q = (a + ((mp_u64)1 << (right - 1))) >> right;
    r = p < 0 ? -(mp_i64)q : (mp_i64)q;
  } else {
    r = mp_requant64((mp_i64)acc, mult, shift);
  }
  return r > 2147483647 ? 2147483647 : (r < -2147483647 - 1 ? -2147483647 - 1 : (int)r);
}
)";

// $long_of_int where KernelTarget::long_compare_of_int_broken (Mesa 22.3's rusticl): an int
// widened by a cast or convert_long compares wrongly with constants there, the same value
// assembled from its two halves by upsample (OpenCL C: (long)hi << 32 | lo) compares right.
const char* kLongOfIntText = R"(// mp_long_of_int: ints widened so that compares of them come out right.
#define MP_LONG_OF_INT(T, L, U) \
  inline __attribute__((overloadable, always_inline)) L mp_long_of_int(T x) { \
    return upsample(x >> 31, U(x)); \
  }
MP_LONG_OF_INT(int, long, as_uint)
MP_LONG_OF_INT(int2, long2, as_uint2)
MP_LONG_OF_INT(int4, long4, as_uint4)
MP_LONG_OF_INT(int8, long8, as_uint8)
MP_LONG_OF_INT(int16, long16, as_uint16)
#undef MP_LONG_OF_INT
)";

const char* kAtomicAddF32Text = R"(// Float atomic add as a compare-and-swap loop on the word's bits.
$device_fn void mp_atomic_add_f32($global float* p, float v) {
  $global mp_u32* word = ($global mp_u32*)p;
  // The first read is atomic too (CAS of 0 by 0: no change): a plain load races with other
  // work-items' CAS (Oclgrind --data-races).
  mp_u32 expected = $atomic_cas_u32(word, 0u, 0u);
  for (;;) {
    mp_u32 desired = $float_as_uint($uint_as_float(expected) + v);
    mp_u32 seen = $atomic_cas_u32(word, expected, desired);
    if (seen == expected) break;
    expected = seen;
  }
}
)";

const char* kDot4PortableText = R"(// 4-way byte dot products: acc + sum_k a.byte[k] * b.byte[k].
$device_fn int mp_dot4_u8s8(mp_u32 a, mp_u32 b, int acc) {
  for (int k = 0; k < 32; k += 8)
    acc += (int)((a >> k) & 0xffu) * (int)(mp_i8)((b >> k) & 0xffu);
  return acc;
}
$device_fn int mp_dot4_s8s8(mp_u32 a, mp_u32 b, int acc) {
  for (int k = 0; k < 32; k += 8)
    acc += (int)(mp_i8)((a >> k) & 0xffu) * (int)(mp_i8)((b >> k) & 0xffu);
  return acc;
}
$device_fn int mp_dot4_u8u8(mp_u32 a, mp_u32 b, int acc) {
  for (int k = 0; k < 32; k += 8)
    acc += (int)((a >> k) & 0xffu) * (int)((b >> k) & 0xffu);
  return acc;
}
)";

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

KernelTarget KernelTarget::Of(const Device& device) {
  KernelTarget t;
  t.backend = device.backend();
  // MPCAFFE_FP16_ARITH=0: fp16 as storage only, so native half and fp16-in-float can be
  // compared on one device.
  t.fp16_arith = device.info().fp16 && GetSettings().fp16_arith != "0";
  t.dot_product = device.info().dot_product;
  // MPCAFFE_ISA below the CPU's level lowers the x86 branches of the text too. (The OpenCL
  // compilers that take those branches target this CPU; at its own level the text stays as it
  // is without the setting.)
  if (const HostIsa isa = ActiveHostIsa(); isa < CpuHostIsa())
    t.helper_forms = isa == HostIsa::kGeneric ? HelperForms::kPortable : HelperForms::kUpTo256Bit;
  t.long_compare_of_int_broken = device.info().long_compare_of_int_broken;
  t.fma_in_software = device.info().fma_in_software;
  t.vectors_beyond_16_lanes = device.info().vectors_beyond_16_lanes;
  t.vector_builtins = Dialect::For(t.backend).vector_builtins;
  t.work_item_is_thread = UsesCpuVectorDefaults(device.info());
  t.byte_quads_in_helper = ByteQuadsInHelper(device.info());
  t.byte_tiles_in_helper = ByteTilesInHelper(device.info());
  t.software_prefetch = device.info().software_prefetch;
  return t;
}

std::string KernelTarget::Dot4BuildOptions() const {
  return dot_product ? Dialect::For(backend).dot4_build_options : "";
}

KernelTarget KernelTarget::Cuda(int cc) {
  KernelTarget t;
  t.backend = Backend::kCuda;
  t.fp16_arith = cc >= 53;
  t.dot_product = cc >= 61;
  t.vector_builtins = Dialect::For(t.backend).vector_builtins;
  return t;
}

KernelBuilder& KernelBuilder::Value(const std::string& type, const std::string& name) {
  args_.push_back({Kind::kValue, type, name});
  return *this;
}
KernelBuilder& KernelBuilder::In(const std::string& type, const std::string& name) {
  args_.push_back({Kind::kIn, type, name});
  return *this;
}
KernelBuilder& KernelBuilder::Out(const std::string& type, const std::string& name) {
  args_.push_back({Kind::kOut, type, name});
  return *this;
}
KernelBuilder& KernelBuilder::LocalPtr(const std::string& type, const std::string& name) {
  args_.push_back({Kind::kLocal, type, name});
  return *this;
}
KernelBuilder& KernelBuilder::Body(const std::string& text) {
  body_ += text;
  return *this;
}
KernelBuilder& KernelBuilder::VectorWidth(Scalar s, int lanes) {
  if (lanes != 1 && lanes != 2 && lanes != 4 && lanes != 8 && lanes != 16)
    throw std::invalid_argument("kernel " + name_ + ": vector width of " + std::to_string(lanes) +
                                " lanes (1, 2, 4, 8 or 16)");
  width_scalar_ = s;
  width_lanes_ = lanes;
  return *this;
}

KernelWriter::KernelWriter(const KernelTarget& target, std::string family)
    : target_(target), dialect_(Dialect::For(target.backend)), family_(std::move(family)) {
  const bool named = !family_.empty() && std::all_of(family_.begin(), family_.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!named)
    throw std::invalid_argument("kernel family \"" + family_ +
                                "\": a name of lower-case letters, digits and '_'");
}

namespace {
const char kFamilyWord[] = "), kernel family ";

std::mutex& FamiliesMutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& Families() {
  static std::set<std::string> families;
  return families;
}
}  // namespace

std::vector<std::string> KernelWriter::GeneratedFamilies() {
  std::lock_guard<std::mutex> lock(FamiliesMutex());
  return {Families().begin(), Families().end()};
}

std::string KernelWriter::FamilyOf(const std::string& source) {
  const size_t line_end = source.find('\n');
  const size_t at = source.substr(0, line_end).find(kFamilyWord);
  if (at == std::string::npos) return "";
  const size_t from = at + sizeof(kFamilyWord) - 1;
  const size_t to = source.find('.', from);
  return to == std::string::npos || to > line_end ? "" : source.substr(from, to - from);
}

KernelWriter& KernelWriter::AddType(const std::string& a, DataType type) {
  const DataTypeTraits& t = TraitsOf(type);
  const bool cuda = target_.backend == Backend::kCuda;
  std::string block = "// " + a + ": " + t.name + "\n";
  block += std::string("typedef ") + TraitsOf(t.storage).alias + " " + a + ";\n";
  std::string compute, load, store;
  if (type == DataType::kFloat32) {
    compute = "float";
    load = "((p)[i])";
    store = "((p)[i] = (v))";
  } else if (type == DataType::kFloat16) {
    uses_fp16_ = true;
    if (cuda) {
      compute = target_.fp16_arith ? "__half" : "float";
      load = target_.fp16_arith ? "((p)[i])" : "__half2float((p)[i])";
      store = target_.fp16_arith ? "((p)[i] = (v))" : "((p)[i] = __float2half_rn(v))";
    } else if (target_.fp16_arith) {
      compute = "half";
      load = "((p)[i])";
      store = "((p)[i] = (v))";
    } else {
      // No cl_khr_fp16: half is storage only; vload_half/vstore_half are core OpenCL 1.2.
      compute = "float";
      load = "vload_half((i), (p))";
      store = "vstore_half_rte((v), (i), (p))";
    }
  } else {
    compute = "int";
    load = "((int)(p)[i])";
    store = "((p)[i] = (" + a + ")(v))";
  }
  block += "typedef " + compute + " " + a + "_c;\n";
  select_masks_.emplace_back(a, compute == "half" || compute == "__half" ? "short" : "int");
  block += std::string("typedef ") + TraitsOf(t.difftype).alias + " " + a + "_diff;\n";
  block += std::string("typedef ") + TraitsOf(t.acctype).alias + " " + a + "_acc;\n";
  block += std::string("typedef ") + TraitsOf(t.multtype).alias + " " + a + "_mult;\n";
  block += "#define " + a + "_LOAD(p, i) " + load + "\n";
  block += "#define " + a + "_STORE(p, i, v) " + store + "\n";
  if (t.quantized) {
    block += "#define " + a + "_QMIN " + std::to_string(t.qmin) + "\n";
    block += "#define " + a + "_QMAX " + std::to_string(t.qmax) + "\n";
    block += "#define " + a + "_SAT(v) " + a + "_SAT_FROM(v, " + a + "_QMIN)\n";
    block += "#define " + a + "_SAT_FROM(v, lo) ((v) < (lo) ? (lo) : ((v) > " + a + "_QMAX ? " +
             a + "_QMAX : (v)))\n";
  }
  type_blocks_.push_back(block);
  return *this;
}

KernelWriter& KernelWriter::AddVector(const std::string& alias, Scalar s, int lanes,
                                      bool with_max) {
  if (lanes != 2 && lanes != 4 && lanes != 8 && lanes != 16)
    throw std::invalid_argument("vector " + alias + ": " + std::to_string(lanes) +
                                " lanes (2, 4, 8 or 16)");
  const ScalarTraits& t = TraitsOf(s);
  if (s == Scalar::kF16) uses_fp16_ = true;
  std::string text = std::string("// ") + alias + ": " + std::to_string(lanes) + " x " + t.alias +
                     "\n" + dialect_.vector_decl;
  if (t.is_float) text += dialect_.vector_fma;
  if (with_max) text += dialect_.vector_max;
  // Vectors of whole 16-byte words: aligned, with word loads and stores where the dialect has
  // them (Dialect::vector_words).
  const int words = t.bits * lanes % 128 == 0 ? t.bits * lanes / 128 : 0;
  if (words) text += dialect_.vector_words;
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  };
  replace("@A", words && *dialect_.vector_words ? "alignas(16) " : "");
  replace("@W", std::to_string(words));
  replace("@V", alias);
  replace("@S", t.alias);
  replace("@O", t.opencl);
  replace("@N", std::to_string(lanes));
  type_blocks_.push_back(text);
  return *this;
}

KernelWriter& KernelWriter::UseRequant(DataType type) {
  if (!IsQuantized(type))
    throw std::invalid_argument(std::string("MP_REQUANT: ") + Name(type) + " is not quantized");
  UseHelper(KernelHelper::kRequantize);
  const std::string define = "#define MP_REQUANT(acc, m, s) ";
  for (const auto& d : defines_)
    if (d.compare(0, define.size(), define) == 0) return *this;
  // int8q's result is an int widened for the caller's clamps: $long_of_int.
  return Define("MP_REQUANT(acc, m, s)",
                TraitsOf(type).acctype == Scalar::kI64
                    ? "mp_requant64((mp_i64)(acc), m, s)"
                    : Expand("$long_of_int(mp_requant32((int)(acc), m, s))"));
}

KernelWriter& KernelWriter::Define(const std::string& name, const std::string& value) {
  defines_.push_back("#define " + name + " " + Expand(value) + "\n");
  return *this;
}

KernelWriter& KernelWriter::Function(const std::string& text) {
  functions_.push_back(text);
  return *this;
}

KernelWriter& KernelWriter::UseHelper(KernelHelper helper) {
  if (helper == KernelHelper::kByteQuadSlide16) UseHelper(KernelHelper::kByteQuadProduct16);
  if (std::find(helpers_.begin(), helpers_.end(), helper) == helpers_.end())
    helpers_.push_back(helper);
  return *this;
}

KernelBuilder& KernelWriter::Kernel(const std::string& name) {
  kernels_.emplace_back();
  kernels_.back().name_ = name;
  return kernels_.back();
}

std::string KernelWriter::Expand(const std::string& text) const {
  const Dialect& d = dialect_;
  auto dim_word = [&](const std::array<const char*, 3>& words, char digit) -> std::string {
    if (digit < '0' || digit > '2') throw std::invalid_argument("dimension must be 0, 1 or 2");
    return words[digit - '0'];
  };
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '$') {
      out += text[i++];
      continue;
    }
    size_t j = i + 1;
    while (j < text.size() && IsIdentChar(text[j])) ++j;
    const std::string word = text.substr(i + 1, j - i - 1);
    // Parenthesized arguments, if any.
    std::vector<std::string> args;
    size_t end = j;
    if (j < text.size() && text[j] == '(') {
      int depth = 0;
      std::string current;
      for (end = j; end < text.size(); ++end) {
        char c = text[end];
        if (c == '(') {
          if (depth++ > 0) current += c;
        } else if (c == ')') {
          if (--depth == 0) {
            args.push_back(current);
            ++end;
            break;
          }
          current += c;
        } else if (c == ',' && depth == 1) {
          args.push_back(current);
          current.clear();
        } else {
          current += c;
        }
      }
      for (auto& a : args) {
        a.erase(0, a.find_first_not_of(' '));
        a.erase(a.find_last_not_of(' ') + 1);
      }
    }
    auto one_dim = [&](const std::array<const char*, 3>& words) {
      if (args.size() != 1 || args[0].size() != 1)
        throw std::invalid_argument("$" + word + " takes one dimension argument");
      out += dim_word(words, args[0][0]);
      i = end;
    };
    if (word == "global_id") {
      one_dim(d.global_id);
    } else if (word == "local_id") {
      one_dim(d.local_id);
    } else if (word == "group_id") {
      one_dim(d.group_id);
    } else if (word == "local_size") {
      one_dim(d.local_size);
    } else if (word == "num_groups") {
      one_dim(d.num_groups);
    } else if (word == "global_size") {
      one_dim(d.global_size);
    } else if (word == "long_of_int") {
      // KernelTarget::long_compare_of_int_broken: see kLongOfIntText.
      if (args.empty() || args.size() > 2)
        throw std::invalid_argument("$long_of_int takes (x) or (x, lanes)");
      args[0] = Expand(args[0]);
      if (target_.long_compare_of_int_broken)
        out += "mp_long_of_int(" + args[0] + ")";
      else if (args.size() == 1)
        out += "(mp_i64)" + args[0];
      else if (d.vector_builtins)
        out += "convert_long" + args[1] + "(" + args[0] + ")";
      else
        throw std::invalid_argument("$long_of_int(x, lanes): " +
                                    std::string(BackendName(target_.backend)) +
                                    " has no built-in vectors");
      i = end;
    } else if (word == "fma") {
      // KernelTarget::fma_in_software: mad() where fma() would be a software routine.
      if (args.size() != 3) throw std::invalid_argument("$fma takes (a, b, c)");
      out += std::string(target_.fma_in_software ? "mad(" : "fma(") + Expand(args[0]) + ", " +
             Expand(args[1]) + ", " + Expand(args[2]) + ")";
      i = end;
    } else if (word == "prefetch") {
      // KernelTarget::software_prefetch: Clang's builtin (x86 prefetch instructions do not
      // fault), else nothing.
      if (args.size() != 1) throw std::invalid_argument("$prefetch takes (address)");
      out += target_.software_prefetch ? "__builtin_prefetch(" + Expand(args[0]) + ")"
                                       : std::string("(void)0");
      i = end;
    } else if (word == "negative_i64") {
      if (args.size() != 1) throw std::invalid_argument("$negative_i64 takes (x)");
      args[0] = Expand(args[0]);
      out += target_.long_compare_of_int_broken ? "(int)((mp_u64)(" + args[0] + ") >> 63)"
                                                : args[0] + " < 0";
      i = end;
    } else if (word == "loop") {
      if (args.size() != 2) throw std::invalid_argument("$loop takes (index, count)");
      out += "for (int " + args[0] + " = " + d.global_id[0] + "; " + args[0] + " < " + args[1] +
             "; " + args[0] + " += " + d.global_size[0] + ")";
      i = end;
    } else if (word == "vector_loop") {
      if (args.size() != 2) throw std::invalid_argument("$vector_loop takes (index, count)");
      if (target_.work_item_is_thread) {
        // ceil(count / work-items) indices from global_id · that; a range past count is empty.
        const std::string n = "(" + Expand(args[1]) + ")", g = std::string("(int)") +
                              d.global_size[0], per = "((" + n + " + " + g + " - 1) / " + g + ")";
        out += "for (int " + args[0] + " = (int)" + d.global_id[0] + " * " + per + "; " +
               args[0] + " < min(" + n + ", ((int)" + d.global_id[0] + " + 1) * " + per + "); ++" +
               args[0] + ")";
      } else {
        out += "for (int " + args[0] + " = " + d.global_id[0] + "; " + args[0] + " < " +
               Expand(args[1]) + "; " + args[0] + " += " + d.global_size[0] + ")";
      }
      i = end;
    } else {
      std::string replacement;
      if (word == "barrier") replacement = d.barrier;
      else if (word == "global") replacement = d.global_ptr;
      else if (word == "local") replacement = d.local_ptr;
      else if (word == "shared") replacement = d.shared_decl;
      else if (word == "device_fn") replacement = d.device_fn;
      else if (word == "mul_hi_u64") replacement = d.mul_hi_u64;
      else if (word == "atomic_cas_u32") replacement = d.atomic_cas_u32;
      else if (word == "atomic_add_i32") replacement = d.atomic_add_i32;
      else if (word == "float_as_uint") replacement = d.float_as_uint;
      else if (word == "uint_as_float") replacement = d.uint_as_float;
      else if (word == "rint") replacement = d.rint;
      else throw std::invalid_argument("unknown kernel placeholder $" + word);
      out += replacement;
      i = j;
    }
  }
  return out;
}

std::string KernelWriter::Preamble() const {
  const bool cuda = target_.backend == Backend::kCuda;
  std::string p = "// Generated by mpcaffe codegen (" + std::string(BackendName(target_.backend)) +
                  kFamilyWord + family_ + ".\n";
  if (uses_fp16_) {
    if (cuda)
      p += "#include <cuda_fp16.h>\n";
    else if (target_.fp16_arith)
      p += "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n";
  }
  // Portable scalar names from the trait table.
  for (Scalar s : {Scalar::kF16, Scalar::kU8, Scalar::kI8, Scalar::kU16, Scalar::kI16,
                   Scalar::kU32, Scalar::kI64, Scalar::kU64}) {
    if (s == Scalar::kF16 && !uses_fp16_) continue;
    const ScalarTraits& t = TraitsOf(s);
    p += std::string("typedef ") + (cuda ? t.cuda : t.opencl) + " " + t.alias + ";\n";
  }
  if (target_.helper_forms == KernelTarget::HelperForms::kPortable)
    p += "#define MP_PORTABLE_FORMS 1\n";
  if (target_.helper_forms == KernelTarget::HelperForms::kUpTo256Bit)
    p += "#define MP_NO_512BIT_FORMS 1\n";
  if (!target_.vectors_beyond_16_lanes && target_.backend == Backend::kOpenCL)
    p += "#define MP_NO_32_LANE_VECTORS 1\n";
  if (target_.long_compare_of_int_broken && target_.backend == Backend::kOpenCL)
    p += kLongOfIntText;
  for (const auto& block : type_blocks_) p += block;
  for (const auto& define : defines_) p += define;
  // A helper only some dialects have: its row's text, or an error naming the backend.
  auto dialect_row = [&](const char* text, const char* what) {
    if (!text)
      throw std::invalid_argument(std::string(what) + " have no " + BackendName(target_.backend) +
                                  " form");
    return Expand(text);
  };
  for (KernelHelper h : helpers_) {
    switch (h) {
      case KernelHelper::kRequantize: p += Expand(kRequantizeText); break;
      case KernelHelper::kAtomicAddF32: p += Expand(kAtomicAddF32Text); break;
      case KernelHelper::kDot4:
        p += Expand(target_.dot_product ? dialect_.dot4_native : kDot4PortableText);
        break;
      case KernelHelper::kPairProduct16:
        p += dialect_row(dialect_.pair_product16, "16-bit pair products");
        break;
      case KernelHelper::kBytePairProduct16:
        p += Expand(dialect_.byte_pair_product16);
        break;
      case KernelHelper::kByteQuadProduct16:
        // Only texts that use the helper say so: every other text keeps its bytes (cache keys).
        if (target_.byte_quads_in_helper && target_.backend == Backend::kOpenCL)
          p += "#define MP_BYTE_QUADS_VNNI 1\n";
        p += dialect_row(dialect_.byte_quad_product16, "byte quad products");
        break;
      case KernelHelper::kByteTileProduct:
        if (target_.byte_tiles_in_helper && target_.backend == Backend::kOpenCL)
          p += "#define MP_BYTE_TILES_AMX 1\n";
        p += dialect_row(dialect_.byte_tile_product, "byte tile products");
        break;
      case KernelHelper::kByteQuadSlide16:
        p += dialect_row(dialect_.byte_quad_slide16, "sliding byte quads");
        break;
      case KernelHelper::kByteVectorStore:
        p += dialect_row(dialect_.byte_vector_store, "byte-vector stores");
        break;
      case KernelHelper::kSelect:
        p += dialect_.select;
        for (const auto& [alias, mask] : select_masks_)
          p += "#define " + alias + "_SELECT(a, b, c) MP_SELECT((a), (b), (" + mask + ")(c))\n";
        break;
    }
  }
  return p;
}

std::string KernelWriter::KernelText(const KernelBuilder& k) const {
  const Dialect& d = dialect_;
  const bool opencl = target_.backend == Backend::kOpenCL;
  std::string params, prologue;
  bool has_local = false;
  for (const auto& a : k.args_) {
    if (!params.empty()) params += ",\n    ";
    switch (a.kind) {
      case KernelBuilder::Kind::kValue:
        params += "const " + a.type + " " + a.name;
        break;
      case KernelBuilder::Kind::kIn:
      case KernelBuilder::Kind::kOut: {
        const std::string cq = a.kind == KernelBuilder::Kind::kIn ? "const " : "";
        const std::string ptr = std::string(d.global_ptr) + cq + a.type + "* " + d.restrict_kw;
        if (opencl) {
          params += ptr + " " + a.name + "_base, const ulong " + a.name + "_off";
          prologue += "  " + ptr + " " + a.name + " = " + a.name + "_base + " + a.name + "_off;\n";
        } else {
          params += ptr + " " + a.name;
        }
        break;
      }
      case KernelBuilder::Kind::kLocal:
        if (opencl) {
          params += std::string(d.local_ptr) + a.type + "* " + a.name;
        } else {
          has_local = true;
          params += "const unsigned int " + a.name + "_off";
          prologue += "  " + a.type + "* " + a.name + " = (" + a.type + "*)(mp_dyn_smem + " +
                      a.name + "_off);\n";
        }
        break;
    }
  }
  if (has_local)
    prologue = "  extern __shared__ __align__(16) unsigned char mp_dyn_smem[];\n" + prologue;
  std::string qualifier = d.kernel;
  if (k.width_lanes_ > 1) {
    qualifier = d.kernel_vector_width;
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"@O", TraitsOf(k.width_scalar_).opencl},
                                   {"@N", std::to_string(k.width_lanes_)}})
      for (size_t at; (at = qualifier.find(from)) != std::string::npos;)
        qualifier.replace(at, from.size(), to);
  }
  return qualifier + " " + k.name_ + "(\n    " + params + ") {\n" + prologue +
         Expand(k.body_) + "}\n";
}

std::string KernelWriter::Source() const {
  {
    std::lock_guard<std::mutex> lock(FamiliesMutex());
    Families().insert(family_);
  }
  std::string s = Preamble();
  for (const auto& f : functions_) s += "\n" + Expand(f);
  for (const auto& k : kernels_) s += "\n" + KernelText(k);
  return s;
}

}  // namespace mpcaffe
