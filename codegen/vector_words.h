// codegen/vector_words.h — the dialect's words for expressions over vectors of 2 to 16 lanes
// (loads, stores, conversions, selects, lane halves) and the vector requantization built from
// them, so that generators in libdnn/ and layers/ spell no dialect themselves.
#pragma once

#include <string>

#include "codegen/kernel_writer.h"

namespace mpcaffe {

/// A residual input of VectorWords::RequantClamp: its int<lanes> value (x − z_res) and the
/// scalar multiplier and shift taking it to the output's scale.
struct VectorResidual {
  std::string value, mult, shift;
  /// A scalar condition under which every |value| < 2^16 (x − z of 8- or 16-bit storage with
  /// the zero point z in its range), so that RequantResidual's 32-bit form applies; empty:
  /// not known (Requant's long lanes).
  std::string below_2_16_if;
  /// The caller checked on the host that the 32-bit form applies (below_2_16_if holds,
  /// 17 ≤ 31 − shift ≤ 47, the multiplier ≥ 0): RequantResidual's text is that form alone.
  bool split_known = false;
};

/// Vector expressions in a target's dialect (the Dialect rows vector_load … vector_odd). Types
/// are named by scalar and lanes ("int", 8); pointers are expressions of the lane type's
/// storage. A dialect without a row for a word (CUDA: its vectors are KernelWriter::AddVector's
/// structs, with their own _LOAD and _STORE) makes the word throw std::invalid_argument naming
/// it: a generator asks KernelTarget::vector_builtins before taking such a form.
class VectorWords {
 public:
  explicit VectorWords(const KernelTarget& target);
  explicit VectorWords(const Dialect& dialect) : dialect_(dialect) {}

  /// The vector type of `lanes` lanes of `scalar` ("int", 8 → OpenCL's int8).
  std::string Type(const std::string& scalar, int lanes) const;
  /// `lanes` values p[0 … lanes − 1] (any element alignment), and from fp16 storage into float.
  std::string Load(int lanes, const std::string& p) const;
  std::string LoadHalf(int lanes, const std::string& p) const;
  /// KernelHelper::kByteVectorStore's moves of `lanes` `scalar`s (uchar, ushort; float loads of
  /// 16) from or to any address, one instruction each: MP_LOAD_<SCALAR><n>, MP_STORE_<SCALAR><n>.
  std::string MoveLoad(const std::string& scalar, int lanes, const std::string& p) const;
  std::string MoveStore(const std::string& scalar, int lanes, const std::string& x,
                        const std::string& p) const;
  /// Statement text storing the first `count` lanes of the vector x of `lanes` `scalar`s
  /// (uchar, ushort at any address; int, uint, float at their own) to
  /// p[0 … count − 1], count a runtime value in 0 … lanes − 1 (a row's last, partial vector):
  /// one move of each power of two in count (8, 4, 2, 1 for 16 lanes) instead of a store per
  /// lane, the lanes taken in registers. `lanes` a power of two up to 16; each line indented by
  /// `indent` spaces.
  std::string MoveStoreFirst(const std::string& scalar, int lanes, const std::string& x,
                             const std::string& p, const std::string& count, int indent = 0) const;
  /// Stores the vector x to p[0 … lanes − 1] (statement text without the ';'); StoreHalf rounds
  /// float lanes to the nearest fp16.
  std::string Store(int lanes, const std::string& x, const std::string& p) const;
  std::string StoreHalf(int lanes, const std::string& x, const std::string& p) const;
  /// x converted lane by lane to `type` (a Type(): values, not bits; OpenCL's convert_<type>).
  std::string Convert(const std::string& type, const std::string& x) const;
  /// x's bits as `type` (a Type() of the same size).
  std::string As(const std::string& type, const std::string& x) const;
  /// c ? b : a lane by lane (c a comparison of vectors of the lanes' size).
  std::string Select(const std::string& a, const std::string& b, const std::string& c) const;
  /// x clamped to [lo, hi] lane by lane, and |x|.
  std::string Clamp(const std::string& x, const std::string& lo, const std::string& hi) const;
  std::string Abs(const std::string& x) const;
  /// The even-numbered and odd-numbered lanes of x (half as many).
  std::string Even(const std::string& x) const;
  std::string Odd(const std::string& x) const;
  /// The even-numbered of the 2·lanes values `scalar` p[0 … 2·lanes − 1] (lanes ≤ 16): one
  /// load of 2·lanes where that is a vector type (at most 16 lanes), else two loads of 16 whose
  /// even lanes are joined (16 floats at stride 2 from 32).
  std::string LoadEven(const std::string& scalar, int lanes, const std::string& p) const;
  /// The scalar x in every lane of `type`.
  std::string Splat(const std::string& type, const std::string& x) const;
  /// The vector of `type` whose lanes are the comma-separated `lanes`, in order.
  std::string Of(const std::string& type, const std::string& lanes) const;
  /// Lane `i` (0 … 15) of x, and its `count` lanes from `first` (a vector of that many).
  std::string Lane(const std::string& x, int i) const;
  std::string Lanes(const std::string& x, int first, int count) const;

  /// Statement text declaring `long<lanes> out`: mp_requant32 (KernelHelper::kRequantize)
  /// lane by lane of the int<lanes> `val` with the int<lanes> multipliers `mult` and shifts
  /// `shift` (the same integers, saturated to int32; the product of an int32 accumulator fits
  /// 64 bits, so mp_requant64's 128-bit steps reduce to one rounding shift). Temporaries are
  /// named `out` + "_…"; each line is indented by `indent` spaces. Uses $long_of_int (the
  /// writer's Expand spells it).
  std::string Requant(int lanes, const std::string& out, const std::string& val,
                      const std::string& mult, const std::string& shift, int indent = 0) const;
  /// Statement text declaring `int<lanes> out`: the int<lanes> `val` requantized lane by lane
  /// with the int<lanes> multipliers `mult` and shifts `shift` in int32 lanes (one high
  /// multiply, RequantClamp's fast path with a multiplier per lane) — the same integers as
  /// Requant where every lane's 31 − shift is 34 … 62, which the caller must know (the results
  /// are then at most 2^29 in magnitude). Temporaries and indent as Requant's.
  std::string RequantHigh(int lanes, const std::string& out, const std::string& val,
                          const std::string& mult, const std::string& shift,
                          int indent = 0) const;
  /// Statement text declaring `int<lanes> out`: as RequantHigh, but in 64-bit products (the
  /// even and odd lanes' own) for every right shift 31 − shift in 1 … 62, the result's magnitude
  /// saturated at 2^30: Requant's value clamped to ±2^30, which clamps the same way as Requant's
  /// once a zero point below 2^16 is added and the sum clamped into ±2^16 (no residual).
  std::string RequantWide(int lanes, const std::string& out, const std::string& val,
                          const std::string& mult, const std::string& shift,
                          int indent = 0) const;
  /// Statement text declaring `int<lanes> out`: Requant's value of the int<lanes> `val` with
  /// one scalar multiplier and shift, clamped to ±2^30 (what RequantClamp's int32 path adds).
  /// In 32-bit lanes — the multiplier split into 16-bit halves — where the scalar condition
  /// `below_2_16_if` (every |val| < 2^16: a residual x − z of 8- or 16-bit storage) holds,
  /// 17 ≤ 31 − shift ≤ 47 and the multiplier is below 2^31 (a residual's scale ratio near 1 has
  /// 30 … 33), else through Requant's long lanes. Temporaries and indent as Requant's.
  /// `split_known`: the caller checked those conditions on the host; the text is the 32-bit
  /// form alone, without the long lanes it would never take (RequantClamp's high_known says
  /// what that saves).
  std::string RequantResidual(int lanes, const std::string& out, const std::string& val,
                              const std::string& mult, const std::string& shift,
                              const std::string& below_2_16_if, int indent = 0,
                              bool split_known = false) const;
  /// Statement text declaring `int<lanes> out`: the int<lanes> `val` requantized with one
  /// scalar multiplier and shift for every lane (a channel's), plus `zero`, plus the
  /// requantized residual when `res` is given, clamped to [lo, hi] — the same integers as
  /// Requant's long lanes summed and clamped, but in int32 lanes (a high multiply) when the
  /// shift allows it, which is every calibrated layer of the zoo nets.
  /// `lo` spelled as `zero` without a residual (a ReLU's clamp at the zero point): the int32
  /// path takes max(val, 0) for |val| and clamps above only — the same integers, since every
  /// value ≤ 0 then clamps to the zero point.
  /// `setup`, when given, names a RequantSetup of the same lanes, multiplier and shift declared
  /// before (the int32-lane path then takes its constants from there instead of deriving them
  /// again: once per channel, not once per vector).
  /// `high_known`: the caller checked on the host that every channel's 31 − shift is 34 … 62;
  /// the text is the int32-lane path alone. The long lanes beside it, never taken there, were
  /// most of the program: ResNet-50's c64 → c256 1×1 kernel with its residual compiled in 0.44
  /// instead of 0.99 s on Intel's runtime and 0.16 instead of 0.66 s on PoCL (AVX2), and its
  /// layers ran 1–2 % faster (docs/BENCHMARKS.md).
  /// `pre_shift` (with high_known, no residual): the host checked instead that every 31 − shift
  /// + pre_shift is 34 … 62 and that every value past ±2^(31 − pre_shift) saturates into [lo, hi]
  /// (quant::RequantPreShift); the value is clamped into that range and shifted left first.
  /// Expression: the int<lanes> `val` clamped into ±2^(31 − pre_shift) and multiplied by
  /// 2^pre_shift (quant::RequantPreShift's left shift, exact below the clamp); `val` itself for
  /// 0. Requantizing it with shift − pre_shift gives Requant's value wherever the host checked
  /// that every value past the clamp saturates the output.
  std::string PreShifted(int lanes, const std::string& val, int pre_shift) const;
  std::string RequantClamp(int lanes, const std::string& out, const std::string& val,
                           const std::string& mult, const std::string& shift,
                           const std::string& zero, const VectorResidual* res,
                           const std::string& lo, const std::string& hi, int indent = 0,
                           const std::string& setup = "", bool high_known = false,
                           int pre_shift = 0) const;
  /// Statement text declaring what RequantClamp's int32-lane path derives from one scalar
  /// multiplier and shift, for every vector requantized with them (`name` + "_…"): whether the
  /// path applies, its rounding addend and right shift as uint<lanes>, the multiplier in 64-bit
  /// lanes. `pre_shift`: RequantClamp's, for the same text.
  std::string RequantSetup(int lanes, const std::string& name, const std::string& mult,
                           const std::string& shift, int indent = 0, int pre_shift = 0) const;

 private:
  const Dialect& dialect_;
};

/// Preprocessor text defining `macro` (one parameter named p: "MP_APAIR_P(p)"): the pair
/// (p[0], p[1]) of an 8-bit operand as KernelHelper::kPairProduct16's MP_PAIR16 gives it, 8
/// times — on AVX2 one 16-bit broadcast load and one byte shuffle (Clang vector built-ins behind
/// the compiler's own __AVX2__, so every other target, CUDA's NVRTC included, takes `portable`,
/// as every target does under KernelTarget::helper_forms = kPortable). `is_signed`: the bytes are
/// signed (shuffled into the high halves, then an arithmetic >> 8).
std::string PairBroadcast16Define(const std::string& macro, const std::string& portable,
                                  bool is_signed);

}  // namespace mpcaffe
