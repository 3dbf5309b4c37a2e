// codegen/vector_words.cc — VectorWords: vector expressions filled in from the dialect's rows,
// and the vector requantization written once in those words.
#include "codegen/vector_words.h"

#include <cctype>
#include <initializer_list>
#include <stdexcept>
#include <utility>

namespace mpcaffe {

namespace {

/// `form` with each @<letter> replaced by its value (the letters a row uses).
std::string Fill(const char* form, const char* word, Backend backend,
                 std::initializer_list<std::pair<char, const std::string*>> values) {
  if (form == nullptr)
    throw std::invalid_argument(std::string("codegen: the ") + BackendName(backend) +
                                " dialect has no vector word '" + word +
                                "' (ask KernelTarget::vector_builtins first)");
  std::string out;
  for (const char* c = form; *c; ++c) {
    if (*c == '@' && c[1] != '\0') {
      bool found = false;
      for (const auto& [key, value] : values)
        if (key == c[1]) {
          out += *value;
          found = true;
          break;
        }
      if (found) {
        ++c;
        continue;
      }
    }
    out += *c;
  }
  return out;
}

}  // namespace

VectorWords::VectorWords(const KernelTarget& target) : dialect_(Dialect::For(target.backend)) {}

std::string VectorWords::Type(const std::string& scalar, int lanes) const {
  const std::string n = std::to_string(lanes);
  return Fill(dialect_.vector_type, "type", dialect_.backend, {{'S', &scalar}, {'N', &n}});
}
std::string VectorWords::Load(int lanes, const std::string& p) const {
  const std::string n = std::to_string(lanes);
  return Fill(dialect_.vector_load, "load", dialect_.backend, {{'N', &n}, {'P', &p}});
}
namespace {
std::string MoveName(const char* what, const std::string& scalar, int lanes) {
  std::string upper;
  for (char c : scalar) upper += char(std::toupper(static_cast<unsigned char>(c)));
  return std::string("MP_") + what + "_" + upper + std::to_string(lanes);
}
}  // namespace
std::string VectorWords::MoveLoad(const std::string& scalar, int lanes,
                                  const std::string& p) const {
  return MoveName("LOAD", scalar, lanes) + "(" + p + ")";
}
std::string VectorWords::MoveStore(const std::string& scalar, int lanes, const std::string& x,
                                   const std::string& p) const {
  return MoveName("STORE", scalar, lanes) + "(" + x + ", " + p + ")";
}
std::string VectorWords::MoveStoreFirst(const std::string& scalar, int lanes, const std::string& x,
                                        const std::string& p, const std::string& count,
                                        int indent) const {
  if (lanes < 2 || lanes > 16 || (lanes & (lanes - 1)) != 0)
    throw std::invalid_argument("VectorWords::MoveStoreFirst: " + std::to_string(lanes) +
                                " lanes is not a power of two from 2 to 16");
  // In registers: at each power of two n the lower n lanes of what is left are stored where
  // count has that bit, and the upper n lanes are what is left then, else the lower (a
  // private array spilled lane by lane and read back wider stalls on its store forwarding).
  const std::string in(indent, ' ');
  // 32-bit lanes at their own alignment take the dialect's vector store (the moves are for
  // byte and 16-bit lanes at any address).
  const bool word_lanes = scalar == "int" || scalar == "uint" || scalar == "float";
  std::string s = in + "{\n" + in + "  int mp_at = 0;\n";
  std::string left = x;
  for (int n = lanes / 2; n >= 1; n /= 2) {
    const std::string half = "mp_left" + std::to_string(n), bit = std::to_string(n);
    const std::string lower = Lanes(left, 0, n), upper = Lanes(left, n, n);
    const std::string at = "(" + p + ") + mp_at";
    s += in + "  if ((" + count + ") & " + bit + ") {\n" + in + "    " +
         (n == 1 ? "(" + at + ")[0] = " + lower
                 : word_lanes ? Store(n, lower, at) : MoveStore(scalar, n, lower, at)) +
         ";\n";
    if (n > 1) s += in + "    mp_at += " + bit + ";\n";
    s += in + "  }\n";
    if (n > 1) {
      s += in + "  const " + Type(scalar, n) + " " + half + " = ((" + count + ") & " + bit +
           ") ? " + upper + " : " + lower + ";\n";
      left = half;
    }
  }
  return s + in + "}\n";
}
std::string VectorWords::LoadHalf(int lanes, const std::string& p) const {
  const std::string n = std::to_string(lanes);
  return Fill(dialect_.vector_load_half, "load_half", dialect_.backend, {{'N', &n}, {'P', &p}});
}
std::string VectorWords::Store(int lanes, const std::string& x, const std::string& p) const {
  const std::string n = std::to_string(lanes);
  return Fill(dialect_.vector_store, "store", dialect_.backend, {{'N', &n}, {'X', &x}, {'P', &p}});
}
std::string VectorWords::StoreHalf(int lanes, const std::string& x, const std::string& p) const {
  const std::string n = std::to_string(lanes);
  return Fill(dialect_.vector_store_half, "store_half", dialect_.backend,
              {{'N', &n}, {'X', &x}, {'P', &p}});
}
std::string VectorWords::Convert(const std::string& type, const std::string& x) const {
  return Fill(dialect_.vector_convert, "convert", dialect_.backend, {{'T', &type}, {'X', &x}});
}
std::string VectorWords::As(const std::string& type, const std::string& x) const {
  return Fill(dialect_.vector_as, "as", dialect_.backend, {{'T', &type}, {'X', &x}});
}
std::string VectorWords::Select(const std::string& a, const std::string& b,
                                const std::string& c) const {
  return Fill(dialect_.vector_select, "select", dialect_.backend, {{'A', &a}, {'B', &b}, {'C', &c}});
}
std::string VectorWords::Clamp(const std::string& x, const std::string& lo,
                               const std::string& hi) const {
  return Fill(dialect_.vector_clamp, "clamp", dialect_.backend, {{'X', &x}, {'A', &lo}, {'B', &hi}});
}
std::string VectorWords::Abs(const std::string& x) const {
  return Fill(dialect_.vector_abs, "abs", dialect_.backend, {{'X', &x}});
}
std::string VectorWords::Even(const std::string& x) const {
  return Fill(dialect_.vector_even, "even", dialect_.backend, {{'X', &x}});
}
std::string VectorWords::Odd(const std::string& x) const {
  return Fill(dialect_.vector_odd, "odd", dialect_.backend, {{'X', &x}});
}
std::string VectorWords::LoadEven(const std::string& scalar, int lanes,
                                  const std::string& p) const {
  if (lanes < 1 || lanes > 16)
    throw std::invalid_argument("vector words: LoadEven of " + std::to_string(lanes) +
                                " lanes (1 to 16)");
  if (2 * lanes <= 16) return Even(Load(2 * lanes, p));
  const std::string high = "(" + p + ") + " + std::to_string(lanes);
  return Of(Type(scalar, lanes), Even(Load(lanes, p)) + ", " + Even(Load(lanes, high)));
}
std::string VectorWords::Splat(const std::string& type, const std::string& x) const {
  return Fill(dialect_.vector_splat, "splat", dialect_.backend, {{'T', &type}, {'X', &x}});
}
std::string VectorWords::Of(const std::string& type, const std::string& lanes) const {
  return Fill(dialect_.vector_of, "of", dialect_.backend, {{'T', &type}, {'X', &lanes}});
}
std::string VectorWords::Lane(const std::string& x, int i) const { return Lanes(x, i, 1); }
std::string VectorWords::Lanes(const std::string& x, int first, int count) const {
  if (first < 0 || count < 1 || first + count > 16)
    throw std::invalid_argument("codegen: lanes " + std::to_string(first) + " … " +
                                std::to_string(first + count - 1) + " (0 … 15)");
  std::string n;
  for (int i = first; i < first + count; ++i) n += "0123456789abcdef"[i];
  return Fill(dialect_.vector_lane, "lane", dialect_.backend, {{'X', &x}, {'N', &n}});
}

std::string VectorWords::Requant(int lanes, const std::string& out, const std::string& val,
                                 const std::string& mult, const std::string& shift,
                                 int indent) const {
  const std::string n = std::to_string(lanes), l = Type("long", lanes),
                    u = Type("ulong", lanes), pad(indent, ' ');
  const std::string rr = out + "_rr", p = out + "_p", sh = out + "_sh", r1 = out + "_r1",
                    ru = out + "_ru";
  std::string s;
  // The ints are widened with $long_of_int: compared with constants below (see
  // KernelTarget::long_compare_of_int_broken).
  s += pad + "const " + l + " " + rr + " = $long_of_int(31 - (" + shift + "), " + n + ");\n";
  s += pad + "const " + u + " " + p + " = " + Convert(u, Abs(val)) + " * " +
       Convert(u, As(Type("uint", lanes), mult)) + ";\n";
  s += pad + "const " + u + " " + sh + " = " +
       Convert(u, Clamp(rr, Splat(l, "1"), Splat(l, "63"))) + ";\n";
  s += pad + "const " + u + " " + r1 + " = (" + p + " + (" + Splat(u, "1") + " << (" + sh +
       " - 1))) >> " + sh + ";\n";
  s += pad + "const " + u + " " + ru + " = " +
       Select(Select(Splat(u, "0"), r1, rr + " < 64"), p, rr + " <= 0") + ";\n";
  s += pad + l + " " + out + " = " +
       Select(Convert(l, ru), "-" + Convert(l, ru), "$long_of_int(" + val + ", " + n + ") < 0") +
       ";\n";
  s += pad + out + " = " +
       Clamp(out, Splat(l, "-2147483647L - 1"), Splat(l, "2147483647L")) + ";\n";
  return s;
}

std::string VectorWords::RequantHigh(int lanes, const std::string& out, const std::string& val,
                                     const std::string& mult, const std::string& shift,
                                     int indent) const {
  // RequantClamp's fast path (its comments say why it is exact and why it is spelled so), each
  // lane with its own multiplier: the even and odd lanes of |v| meet the even and odd lanes of
  // the multipliers where both lie in their 64-bit words. Lanes < 4 widen to 64-bit lanes.
  const std::string I = Type("int", lanes), U = Type("uint", lanes), UL = Type("ulong", lanes),
                    pad(indent, ' ');
  const std::string v = out + "_v", rr = out + "_rr", h = out + "_h", q = out + "_q";
  std::string s;
  s += pad + "const " + I + " " + v + " = " + val + ";\n";
  s += pad + "const " + U + " " + rr + " = " + As(U, Splat(I, "31") + " - (" + shift + ")") +
       ";\n";
  if (lanes >= 4) {
    const std::string W = Type("ulong", lanes / 2), a = out + "_a", m = out + "_m";
    s += pad + "const " + W + " " + a + " = " +
         As(W, Select(As(U, v), Splat(U, "0") + " - " + As(U, v), v + " < 0")) + ", " + m +
         " = " + As(W, mult) + ";\n";
    s += pad + "const " + U + " " + h + " = " +
         As(U, "(((" + a + " & 0xffffffffUL) * (" + m + " & 0xffffffffUL)) >> 32) | (((" + a +
                   " >> 32) * (" + m + " >> 32)) & 0xffffffff00000000UL)") +
         ";\n";
  } else {
    s += pad + "const " + U + " " + h + " = " +
         Convert(U, "(" + Convert(UL, Abs(v)) + " * " + Convert(UL, As(U, mult)) + ") >> 32") +
         ";\n";
  }
  s += pad + "const " + I + " " + q + " = " +
       As(I, "(" + h + " + (" + Splat(U, "1u") + " << (" + rr + " - " + Splat(U, "33u") +
                 "))) >> (" + rr + " - " + Splat(U, "32u") + ")") +
       ";\n";
  s += pad + I + " " + out + " = " + Select(q, "-" + q, v + " < 0") + ";\n";
  return s;
}

std::string VectorWords::RequantWide(int lanes, const std::string& out, const std::string& val,
                                     const std::string& mult, const std::string& shift,
                                     int indent) const {
  // |v|·mult < 2^62 and the nudge 2^(right − 1) ≤ 2^61: the 64-bit sum is exact, as in
  // mp_requant32. The even and odd lanes are multiplied and shifted where they lie in the 64-bit
  // words (RequantHigh says why), then put back as 32-bit lanes after the saturation.
  const std::string I = Type("int", lanes), U = Type("uint", lanes), UL = Type("ulong", lanes),
                    pad(indent, ' ');
  const std::string v = out + "_v", rr = out + "_rr", q = out + "_q";
  std::string s;
  s += pad + "const " + I + " " + v + " = " + val + ";\n";
  s += pad + "const " + U + " " + rr + " = " + As(U, Splat(I, "31") + " - (" + shift + ")") +
       ";\n";
  const std::string abs_v = Select(As(U, v), Splat(U, "0") + " - " + As(U, v), v + " < 0");
  if (lanes >= 4) {
    const std::string W = Type("ulong", lanes / 2), a = out + "_a", m = out + "_m",
                      r = out + "_r", lo = out + "_lo", hi = out + "_hi";
    const std::string mask = Splat(W, "0xffffffffUL"), cap = Splat(W, "1073741824UL");
    s += pad + "const " + W + " " + a + " = " + As(W, abs_v) + ", " + m + " = " + As(W, mult) +
         ", " + r + " = " + As(W, rr) + ";\n";
    // Each half: (p + 2^(right − 1)) >> right, at most 2^30.
    auto half = [&](const std::string& name, const std::string& pa, const std::string& pm,
                    const std::string& pr) {
      return pad + "const " + W + " " + name + " = " +
             Clamp("(" + pa + " * " + pm + " + (" + Splat(W, "1UL") + " << (" + pr + " - " +
                       Splat(W, "1UL") + "))) >> " + pr,
                   Splat(W, "0UL"), cap) +
             ";\n";
    };
    s += half(lo, "(" + a + " & " + mask + ")", "(" + m + " & " + mask + ")",
              "(" + r + " & " + mask + ")");
    s += half(hi, "(" + a + " >> 32)", "(" + m + " >> 32)", "(" + r + " >> 32)");
    s += pad + "const " + I + " " + q + " = " + As(I, lo + " | (" + hi + " << 32)") + ";\n";
  } else {
    const std::string p = out + "_p", r64 = Convert(UL, rr);
    s += pad + "const " + UL + " " + p + " = " + Convert(UL, abs_v) + " * " +
         Convert(UL, As(U, mult)) + ";\n";
    s += pad + "const " + I + " " + q + " = " +
         Convert(I, Clamp("(" + p + " + (" + Splat(UL, "1UL") + " << (" + r64 + " - " +
                              Splat(UL, "1UL") + "))) >> " + r64,
                          Splat(UL, "0UL"), Splat(UL, "1073741824UL"))) +
         ";\n";
  }
  s += pad + I + " " + out + " = " + Select(q, "-" + q, v + " < 0") + ";\n";
  return s;
}

std::string VectorWords::RequantResidual(int lanes, const std::string& out,
                                         const std::string& val, const std::string& mult,
                                         const std::string& shift,
                                         const std::string& below_2_16_if, int indent,
                                         bool split_known) const {
  // With a = |val| < 2^16, m = mh·2^16 + ml < 2^31 and right = 31 − shift:
  // (a·m + 2^(right−1)) >> right = (a·mh + 2^(right−17) + (a·ml >> 16)) >> (right − 16) for
  // right ≥ 17 (the low 16 bits of a·ml cannot carry past 2^right), and the sum stays below
  // 2^31 + 2^30 + 2^16 < 2^32 for right ≤ 47: three 32-bit multiplies per lane instead of
  // Requant's 64-bit lanes, which were most of a fused residual's cost (ResNet-50's
  // c64 → c256 1×1 layers ran 0.79 ms with the residual, 0.40–0.48 without).
  const std::string I = Type("int", lanes), U = Type("uint", lanes), pad(indent, ' '),
                    in = pad + "  ";
  const std::string rr = out + "_rr", a = out + "_a", t = out + "_t", q = out + "_q";
  const std::string L = Type("long", lanes);
  // Requant's long lanes, clamped: what the 32-bit form gives where it applies.
  auto wide = [&](const std::string& indent_text) {
    return Requant(lanes, out + "_l", val, Splat(I, mult), Splat(I, shift),
                   int(indent_text.size())) +
           indent_text + out + " = " +
           Convert(I, Clamp(out + "_l", Splat(L, "-1073741824L"), Splat(L, "1073741824L"))) +
           ";\n";
  };
  std::string s = pad + I + " " + out + ";\n" + pad + "{\n";
  if (below_2_16_if.empty() && !split_known) return s + wide(in) + pad + "}\n";
  s += in + "const int " + rr + " = 31 - (" + shift + ");\n";
  const std::string in2 = split_known ? in : in + "  ";
  if (!split_known)
    s += in + "if ((" + below_2_16_if + ") && " + rr + " >= 17 && " + rr + " <= 47 && (" + mult +
         ") >= 0) {\n";
  s += in2 + "const " + U + " " + a + " = " +
       Select(As(U, val), Splat(U, "0") + " - " + As(U, val), "(" + val + ") < 0") + ";\n";
  s += in2 + "const " + U + " " + t + " = " + a + " * " + Splat(U, "(uint)(" + mult + ") >> 16") +
       " + " + Splat(U, "1u << (" + rr + " - 17)") + " + ((" + a + " * " +
       Splat(U, "(uint)(" + mult + ") & 0xffffu") + ") >> " + Splat(U, "16u") + ");\n";
  s += in2 + "const " + U + " " + q + " = " +
       Clamp(t + " >> " + Splat(U, "(uint)(" + rr + " - 16)"), Splat(U, "0u"),
             Splat(U, "1073741824u")) +
       ";\n";
  s += in2 + out + " = " + Select(As(I, q), "-" + As(I, q), "(" + val + ") < 0") + ";\n";
  if (!split_known) s += in + "} else {\n" + wide(in + "  ") + in + "}\n";
  return s + pad + "}\n";
}

std::string VectorWords::RequantClamp(int lanes, const std::string& out, const std::string& val,
                                      const std::string& mult, const std::string& shift,
                                      const std::string& zero, const VectorResidual* res,
                                      const std::string& lo, const std::string& hi,
                                      int indent, const std::string& setup,
                                      bool high_known, int pre_shift) const {
  // With high_known the int32-lane path is the whole text, one level in.
  const std::string I = Type("int", lanes), U = Type("uint", lanes), L = Type("long", lanes),
                    UL = Type("ulong", lanes), pad(indent, ' '), in = pad + "  ",
                    in2 = high_known ? in : in + "  ";
  const std::string v = out + "_v", rr = out + "_rr", h = out + "_h", q = out + "_q";
  // The residual's term, as Requant's (saturated) long lanes `<out>_s`.
  auto residual = [&] {
    return Requant(lanes, out + "_s", out + "_rv", Splat(I, res->mult), Splat(I, res->shift),
                   int(in2.size()));
  };
  std::string s;
  s += pad + I + " " + out + ";\n" + pad + "{\n";
  if (pre_shift > 0 && (!high_known || res))
    throw std::invalid_argument("RequantClamp: a pre-shift needs high_known, no residual");
  s += in + "const " + I + " " + v + " = " + PreShifted(lanes, val, pre_shift) + ";\n";
  if (res) s += in + "const " + I + " " + out + "_rv = " + res->value + ";\n";
  if (setup.empty())
    s += in + "const int " + rr + " = " + std::to_string(31 + pre_shift) + " - (" + shift + ");\n";
  // 34 ≤ right ≤ 62, mp_requant32's 64-bit case: with p = |v|·mult = h·2^32 + l (< 2^63) and
  // t = right − 32 ≥ 2, (p + 2^(right−1)) >> right = (h + 2^(t−1)) >> t exactly (l < 2^32 does
  // not reach the next multiple of 2^right), so one 32-bit high multiply replaces the 64-bit
  // lanes; the result is at most 2^29 in magnitude, so adding the zero point and the residual
  // (its long lanes first clamped to ±2^30: any value past that clamps the sum the same way)
  // cannot overflow int32.
  if (!high_known)
    s += in + (setup.empty() ? "if (" + rr + " >= 34 && " + rr + " <= 62) {\n"
                             : "if (" + setup + "_fast) {\n");
  // The high words through 64-bit lanes, not mul_hi: PoCL 3.1 made mul_hi of uint vectors
  // lane-by-lane scalar code. The even and odd lanes of |v| are multiplied where they lie in
  // the 64-bit words (masked, shifted: one vpmuludq each), and the high words put back in
  // place: converting |v| to 64-bit lanes and back (the first form) became 128-bit pieces and
  // shuffles in PoCL, most of the int8 depthwise kernel's epilogue. |v| is taken in unsigned
  // arithmetic: with abs() here PoCL gave wrong results for v = INT_MIN
  // (VectorRequantClamp.MatchesTheHostReferenceWithAndWithoutResidual).
  // Clamped below at the zero point itself, with no residual to add: a value ≤ 0 requantizes to
  // at most 0 and so clamps to the zero point whatever its magnitude, as 0 does. The value is
  // taken as max(v, 0) (|v| where it counts) and the sign's negation and the lower clamp drop
  // out: 3 of the 14 vector instructions per 16 outputs, in every ReLU-fused epilogue.
  const bool floor_at_zero = !res && lo == zero;
  const std::string magnitude =
      floor_at_zero ? As(U, Select(v, Splat(I, "0"), v + " < 0"))
                    : Select(As(U, v), Splat(U, "0") + " - " + As(U, v), v + " < 0");
  if (lanes >= 4) {
    const std::string W = Type("ulong", lanes / 2), a = out + "_a", m = out + "_m";
    s += in2 + "const " + W + " " + a + " = " + As(W, magnitude) + ", " + m + " = " +
         (setup.empty() ? Splat(W, "(ulong)(uint)(" + mult + ")") : setup + "_m") + ";\n";
    s += in2 + "const " + U + " " + h + " = " +
         As(U, "(((" + a + " & 0xffffffffUL) * " + m + ") >> 32) | (((" + a + " >> 32) * " + m +
                   ") & 0xffffffff00000000UL)") +
         ";\n";
  } else {
    s += in2 + "const " + U + " " + h + " = " +
         Convert(U, "(" + Convert(UL, floor_at_zero ? magnitude : Abs(v)) + " * " +
                        Splat(UL, "(uint)(" + mult + ")") + ") >> 32") +
         ";\n";
  }
  s += in2 + "const " + I + " " + q + " = " +
       As(I, setup.empty() ? "(" + h + " + " + Splat(U, "1u << (" + rr + " - 33)") + ") >> " +
                                 Splat(U, rr + " - 32")
                           : "(" + h + " + " + setup + "_round) >> " + setup + "_sh") +
       ";\n";
  if (floor_at_zero) {
    s += in2 + out + " = " + q + " + (" + zero + ");\n";
    s += in2 + out + " = " + Select(out, Splat(I, hi), out + " > " + Splat(I, hi)) + ";\n";
  } else {
    s += in2 + out + " = " + Select(q, "-" + q, v + " < 0") + " + (" + zero + ");\n";
    if (res) {
      s += RequantResidual(lanes, out + "_s", out + "_rv", res->mult, res->shift,
                           res->below_2_16_if, int(in2.size()), res->split_known);
      s += in2 + out + " += " + out + "_s;\n";
    }
    s += in2 + out + " = " + Clamp(out, Splat(I, lo), Splat(I, hi)) + ";\n";
  }
  if (high_known) return s + pad + "}\n";
  s += in + "} else {\n";
  s += Requant(lanes, out + "_l", v, Splat(I, mult), Splat(I, shift), int(in2.size()));
  s += in2 + out + "_l += (" + zero + ");\n";
  if (res) {
    s += residual();
    s += in2 + out + "_l += " + out + "_s;\n";
  }
  s += in2 + out + "_l = " + Clamp(out + "_l", Splat(L, lo), Splat(L, hi)) + ";\n";
  s += in2 + out + " = " + Convert(I, out + "_l") + ";\n";
  s += in + "}\n" + pad + "}\n";
  return s;
}

std::string VectorWords::PreShifted(int lanes, const std::string& val, int pre_shift) const {
  if (pre_shift == 0) return val;
  if (pre_shift < 0 || pre_shift > 30)
    throw std::invalid_argument("PreShifted: a left shift of 1 … 30, not " +
                                std::to_string(pre_shift));
  // Below the clamp (v·2^pre + 2^(right + pre − 1)) >> (right + pre) is the value's own
  // rounding; past it the output saturates (the caller's check).
  const std::string I = Type("int", lanes), top = std::to_string(0x7fffffffu >> pre_shift);
  return Clamp(val, Splat(I, "-" + top + " - 1"), Splat(I, top)) + " * " +
         Splat(I, std::to_string(1u << pre_shift));
}

std::string VectorWords::RequantSetup(int lanes, const std::string& name,
                                      const std::string& mult, const std::string& shift,
                                      int indent, int pre_shift) const {
  const std::string U = Type("uint", lanes), pad(indent, ' '), rr = name + "_rr";
  std::string s;
  s += pad + "const int " + rr + " = " + std::to_string(31 + pre_shift) + " - (" + shift + ");\n";
  s += pad + "const int " + name + "_fast = " + rr + " >= 34 && " + rr + " <= 62;\n";
  // Masked to 0 … 31: defined shifts where the path does not apply (and the values unused).
  s += pad + "const " + U + " " + name + "_round = " +
       Splat(U, "1u << ((" + rr + " - 33) & 31)") + ";\n";
  s += pad + "const " + U + " " + name + "_sh = " + Splat(U, "(uint)((" + rr + " - 32) & 31)") +
       ";\n";
  if (lanes >= 4) {
    const std::string W = Type("ulong", lanes / 2);
    s += pad + "const " + W + " " + name + "_m = " + Splat(W, "(ulong)(uint)(" + mult + ")") +
         ";\n";
  }
  return s;
}

namespace {

/// pshufb control that copies bytes 0 and 1 of each 32-bit lane into its two 16-bit halves:
/// zero-extended, or (signed) into the high bytes, for an arithmetic >> 8.
std::string PairShuffleMask(bool is_signed) {
  std::string m;
  for (int half = 0; half < 16; ++half) {
    const std::string byte = std::to_string(half % 2);
    m += std::string(m.empty() ? "" : ", ") + (is_signed ? "-128, " + byte : byte + ", -128");
  }
  return m;
}

}  // namespace

std::string PairBroadcast16Define(const std::string& macro, const std::string& portable,
                                  bool is_signed) {
  return "#if defined(__AVX2__) && !defined(MP_PORTABLE_FORMS)\n"
         "typedef char mp_char32 __attribute__((ext_vector_type(32)));\n"
         "#define " + macro + " (__builtin_astype(__builtin_ia32_pshufb256(__builtin_astype("
         "(short16)(__builtin_astype(vload2(0, (p)), short)), mp_char32), (mp_char32)(" +
         PairShuffleMask(is_signed) + ")), short16)" + (is_signed ? " >> (short16)(8)" : "") +
         ")\n#else\n#define " + macro + " " + portable + "\n#endif\n";
}

}  // namespace mpcaffe
