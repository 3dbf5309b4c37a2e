// tests/codegen/kernel_writer_test.cc — code generation without a device: golden texts (a GEMM,
// a convolution and quantized epilogues) in both dialects, dialect-only differences,
// determinism, placeholder errors, traits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/elementwise.h"
#include "codegen/kernel_writer.h"
#include "codegen/typed_buffer.h"
#include "libdnn/conv.h"
#include "libdnn/gemm.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace {

std::string GoldenPath(const std::string& name) {
  return (mpcaffe::test_support::SourceDir() / "tests/codegen/golden" / name).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Compares with a golden file; MPCAFFE_UPDATE_GOLDEN=1 rewrites it instead.
void ExpectGolden(const std::string& text, const std::string& name) {
  const std::string path = GoldenPath(name);
  if (std::getenv("MPCAFFE_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  const std::string golden = ReadFile(path);
  ASSERT_FALSE(golden.empty()) << "missing golden file " << path;
  EXPECT_EQ(text, golden) << "generated text differs from " << path
                          << " (MPCAFFE_UPDATE_GOLDEN=1 rewrites it after review)";
}

TEST(KernelWriter, GoldenReluInBothDialects) {
  ExpectGolden(ReluSource(KernelTarget{Backend::kOpenCL}, DataType::kInt8Q), "relu_int8q.cl");
  ExpectGolden(ReluSource(KernelTarget::Cuda(80), DataType::kInt8Q), "relu_int8q.cu");
  ExpectGolden(ReluSource(KernelTarget{Backend::kOpenCL}, DataType::kFloat16), "relu_fp16.cl");
  ExpectGolden(ReluSource(KernelTarget::Cuda(80), DataType::kFloat16), "relu_fp16.cu");
}

TEST(KernelWriter, GoldenGemmAndConvolutionInBothDialects) {
  // One vector GEMM (fp32, vectors of 4: OpenCL float4, the CUDA struct) and one int8
  // convolution with the quantized epilogue (requantization, clamp to the type's range).
  libdnn::GemmDesc g;
  g.type = g.out_type = DataType::kFloat32;
  g.M = 16, g.N = 16, g.K = 16, g.bias = true;
  libdnn::GemmConfig gc;
  gc.tm = 2, gc.tn = 1, gc.vw = 4, gc.wg = 1;
  ExpectGolden(libdnn::Gemm::Source(KernelTarget{Backend::kOpenCL}, g, gc), "gemm_fp32_vw4.cl");
  ExpectGolden(libdnn::Gemm::Source(KernelTarget::Cuda(80), g, gc), "gemm_fp32_vw4.cu");
  libdnn::ConvDesc d;
  d.type = DataType::kInt8Q;
  d.channels = 4, d.height = d.width = 5, d.out_channels = 4;
  d.kernel_h = d.kernel_w = 3;
  const libdnn::ConvConfig cc{1, 1, 2, 1};  // lanes, oc, px, vw: one channel, two pixels
  ExpectGolden(libdnn::Convolution::ForwardSource(KernelTarget{Backend::kOpenCL}, d, cc),
               "conv_int8q.cl");
  ExpectGolden(libdnn::Convolution::ForwardSource(KernelTarget::Cuda(80), d, cc), "conv_int8q.cu");
}

TEST(KernelWriter, GoldenQuantizedPairProductGemmInBothDialects) {
  // An int8 GEMM with 16-bit pair products (kp = 2: MP_MADD16 over OpenCL's short16 or the CUDA
  // struct) and the quantized epilogue (requantization, clamp, fused ReLU; OpenCL's 8-lane form
  // where the dialect has vector built-ins, lane by lane on CUDA).
  libdnn::GemmDesc g;
  g.type = g.out_type = DataType::kInt8Q;
  g.M = 8, g.N = 16, g.K = 16, g.bias = true, g.relu = true;
  g.weights_signed = true, g.per_channel = true;
  libdnn::GemmConfig gc;
  gc.tm = 1, gc.tn = 1, gc.vw = 8, gc.wg = 1, gc.kp = libdnn::GemmConfig::kPairs;
  ExpectGolden(libdnn::Gemm::Source(KernelTarget{Backend::kOpenCL}, g, gc), "gemm_int8q_pairs.cl");
  ExpectGolden(libdnn::Gemm::Source(KernelTarget::Cuda(80), g, gc), "gemm_int8q_pairs.cu");
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

/// Replaces every word of the dialect table (and the scalar spellings) by a neutral token, so
/// two dialects' texts of one kernel become comparable.
std::string Neutralize(std::string line, Backend backend) {
  const Dialect& d = Dialect::For(backend);
  std::vector<std::pair<std::string, std::string>> words = {
      {d.kernel, "<kernel>"},        {d.device_fn, "<device_fn>"},   {d.barrier, "<barrier>"},
      {d.mul_hi_u64, "<mul_hi>"},    {d.atomic_cas_u32, "<cas>"},    {d.atomic_add_i32, "<atomic_add>"},
      {d.float_as_uint, "<f2u>"},    {d.uint_as_float, "<u2f>"},     {d.restrict_kw, "<restrict>"}};
  for (int i = 0; i < 3; ++i) {
    words.push_back({d.global_size[i], "<global_size>"});
    words.push_back({d.global_id[i], "<global_id>"});
    words.push_back({d.local_id[i], "<local_id>"});
    words.push_back({d.group_id[i], "<group_id>"});
    words.push_back({d.local_size[i], "<local_size>"});
    words.push_back({d.num_groups[i], "<num_groups>"});
  }
  for (Scalar s : {Scalar::kF16, Scalar::kU8, Scalar::kI8, Scalar::kU16, Scalar::kI16, Scalar::kU32,
                   Scalar::kI64, Scalar::kU64}) {
    const auto& t = TraitsOf(s);
    words.push_back({std::string("typedef ") + (backend == Backend::kCuda ? t.cuda : t.opencl) + " ",
                     "typedef <scalar> "});
  }
  for (const auto& [from, to] : words) {
    if (from.empty()) continue;
    for (size_t p = line.find(from); p != std::string::npos; p = line.find(from, p + to.size()))
      line.replace(p, from.size(), to);
  }
  for (const char* q : {"__global ", "__local "})
    for (size_t p = line.find(q); p != std::string::npos; p = line.find(q)) line.erase(p, std::strlen(q));
  return line;
}

/// The kernel text minus what only a dialect has: the generated-by line, headers and pragmas,
/// the dialect row's helper definitions (Dialect::select), parameter lists, and OpenCL's
/// buffer + offset prologue lines.
std::vector<std::string> Comparable(const std::string& text, Backend backend) {
  std::vector<std::string> out;
  bool in_params = false;
  for (const auto& raw : Lines(text)) {
    if (raw.rfind("// Generated", 0) == 0 || raw.rfind("#include", 0) == 0 ||
        raw.rfind("#pragma", 0) == 0 || raw + "\n" == Dialect::For(backend).select)
      continue;
    if (raw.find(Dialect::For(backend).kernel) == 0) in_params = true;
    if (in_params) {
      if (raw.find(") {") != std::string::npos) in_params = false;
      continue;
    }
    if (raw.find("_base + ") != std::string::npos && raw.find("_off;") != std::string::npos)
      continue;
    out.push_back(Neutralize(raw, backend));
  }
  return out;
}

/// The text before its vector form ("<name>_v8", a kernel of OpenCL's vector built-ins alone:
/// HasVectorRelu), which follows the scalar kernel after a blank line; the whole text without
/// one.
std::string WithoutVectorForm(const std::string& text) {
  const size_t at = text.find("_v8(");
  if (at == std::string::npos) return text;
  size_t end = text.rfind('\n', at);  // the vector kernel's line starts after it
  while (end > 0 && text[end - 1] == '\n') --end;
  return text.substr(0, end + 1);
}

TEST(KernelWriter, DialectsDifferOnlyInDialectWords) {
  for (DataType t : kAllDataTypes) {
    for (const auto& make : {ReluSource, ScaleSource, AxpbySource}) {
      // Same fp16 capability on both sides so the compute type is the same.
      KernelTarget cl{Backend::kOpenCL, /*fp16_arith=*/true};
      KernelTarget cu = KernelTarget::Cuda(80);
      const std::string cuda = make(cu, t);
      EXPECT_EQ(cuda.find("_v8("), std::string::npos) << Name(t);
      const auto a = Comparable(WithoutVectorForm(make(cl, t)), Backend::kOpenCL);
      const auto b = Comparable(cuda, Backend::kCuda);
      ASSERT_EQ(a.size(), b.size()) << Name(t);
      for (size_t i = 0; i < a.size(); ++i) {
        // fp16 storage/compute spellings are data-type words of the trait table.
        if (a[i].find("half") != std::string::npos) continue;
        EXPECT_EQ(a[i], b[i]) << Name(t) << " line " << i;
      }
    }
  }
}

TEST(KernelWriter, GeneratedTextIsDeterministic) {
  for (DataType from : kAllDataTypes)
    for (DataType to : kAllDataTypes)
      for (Backend b : {Backend::kOpenCL, Backend::kCuda}) {
        KernelTarget t{b};
        EXPECT_EQ(ConvertSource(t, from, to), ConvertSource(t, from, to));
      }
}

TEST(KernelWriter, UnknownPlaceholderIsAnError) {
  KernelWriter w(KernelTarget{Backend::kOpenCL}, "test_placeholders");
  EXPECT_THROW(w.Expand("$no_such_word"), std::invalid_argument);
  EXPECT_THROW(w.Expand("$global_id(3)"), std::invalid_argument);
  EXPECT_EQ(w.Expand("$global_id(1)"), "get_global_id(1)");
  EXPECT_EQ(KernelWriter(KernelTarget{Backend::kCuda}, "test_placeholders").Expand("$barrier"),
            "__syncthreads()");
}

// $vector_loop: the grid stride of $loop, except on a target whose work-items are threads
// (work_item_is_thread), where each work-item takes one contiguous range of ceil(n / size)
// indices (the conversions that use it check every index on the devices: ElementwiseTest).
TEST(KernelWriter, VectorLoopIsContiguousWhereWorkItemsAreThreads) {
  KernelTarget gpu{Backend::kOpenCL};
  EXPECT_EQ(KernelWriter(gpu, "test_placeholders").Expand("$vector_loop(v, n8)"),
            KernelWriter(gpu, "test_placeholders").Expand("$loop(v, n8)"));
  KernelTarget cpu = gpu;
  cpu.work_item_is_thread = true;
  const std::string text = KernelWriter(cpu, "test_placeholders").Expand("$vector_loop(v, n8)");
  EXPECT_EQ(text,
            "for (int v = (int)get_global_id(0) * (((n8) + (int)get_global_size(0) - 1) / "
            "(int)get_global_size(0)); v < min((n8), ((int)get_global_id(0) + 1) * (((n8) + "
            "(int)get_global_size(0) - 1) / (int)get_global_size(0))); ++v)");
  EXPECT_THROW(KernelWriter(cpu, "test_placeholders").Expand("$vector_loop(v)"),
               std::invalid_argument);
}

// $fma: fma() everywhere except where fma() is a software routine (fma_in_software: rusticl on
// llvmpipe), where the text multiply-adds with mad(); in kernel bodies and in Define's values
// (the GEMM's MAC). The values on each device: every fp32 GEMM and pointwise test.
TEST(KernelWriter, FmaIsMadWhereFmaIsSoftware) {
  KernelTarget hw{Backend::kOpenCL};
  EXPECT_EQ(KernelWriter(hw, "test_placeholders").Expand("$fma(w[$global_id(0)], v, a)"),
            "fma(w[get_global_id(0)], v, a)");
  KernelTarget sw = hw;
  sw.fma_in_software = true;
  KernelWriter w(sw, "test_placeholders");
  EXPECT_EQ(w.Expand("$fma((a), (b), (c))"), "mad((a), (b), (c))");
  w.Define("MAC(a, b, c)", "$fma((a), (b), (c))");
  w.Kernel("k").Out("float", "y").Body("  y[0] = MAC(1.0f, 2.0f, y[0]);\n");
  EXPECT_NE(w.Source().find("#define MAC(a, b, c) mad((a), (b), (c))"), std::string::npos);
  EXPECT_THROW(w.Expand("$fma(a, b)"), std::invalid_argument);
}

// $prefetch: Clang's builtin where the compiler takes it to the CPU's prefetch instruction
// (software_prefetch: PoCL, Intel's CPU runtime), nothing elsewhere (rusticl's SPIR-V translator
// rejects it; CUDA). That the instruction is emitted and the results unchanged: the pointwise
// tests' pf tile on each device.
TEST(KernelWriter, PrefetchIsTheBuiltinOnlyWhereTheCompilerTakesIt) {
  KernelTarget cpu{Backend::kOpenCL};
  cpu.software_prefetch = true;
  KernelWriter w(cpu, "test_placeholders");
  EXPECT_EQ(w.Expand("$prefetch(x + $global_id(0))"), "__builtin_prefetch(x + get_global_id(0))");
  EXPECT_THROW(w.Expand("$prefetch(a, b)"), std::invalid_argument);
  for (Backend b : {Backend::kOpenCL, Backend::kCuda})
    EXPECT_EQ(KernelWriter(KernelTarget{b}, "test_placeholders").Expand("$prefetch(x + 4);"),
              "(void)0;");
}

// Byte-vector stores are OpenCL's (its device test: Kernel.ByteVectorStoresReachAnyAlignment);
// asking for them on CUDA is an error naming the backend, not text that fails in NVRTC.
TEST(KernelWriter, ByteVectorStoresAreOpenClOnly) {
  KernelWriter cl(KernelTarget{Backend::kOpenCL}, "test_placeholders");
  cl.UseHelper(KernelHelper::kByteVectorStore);
  EXPECT_NE(cl.Source().find("#define MP_STORE_UCHAR16(x, p)"), std::string::npos);
  KernelWriter cu(KernelTarget{Backend::kCuda}, "test_placeholders");
  cu.UseHelper(KernelHelper::kByteVectorStore);
  try {
    cu.Source();
    ADD_FAILURE() << "a CUDA text with byte-vector stores";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

// A kernel whose work-items compute in explicit vectors says so to OpenCL compilers
// (vec_type_hint: Intel's CPU compiler then does not pack work-items on top); CUDA has no such
// hint. One lane, or none given, leaves the plain qualifier.
TEST(KernelWriter, VectorWidthIsOpenClsTypeHint) {
  for (const Backend b : {Backend::kOpenCL, Backend::kCuda}) {
    KernelWriter w(KernelTarget{b}, "test_placeholders");
    w.Kernel("wide").VectorWidth(Scalar::kF32, 16).Out("float", "y").Body("  y[0] = 1.0f;\n");
    w.Kernel("narrow").VectorWidth(Scalar::kI32, 1).Out("float", "y").Body("  y[0] = 2.0f;\n");
    w.Kernel("plain").Out("float", "y").Body("  y[0] = 3.0f;\n");
    const std::string text = w.Source();
    const size_t hints = b == Backend::kOpenCL ? 1 : 0;
    size_t found = 0;
    for (size_t at = 0; (at = text.find("vec_type_hint", at)) != std::string::npos; ++at) ++found;
    EXPECT_EQ(found, hints) << text;
    if (b == Backend::kOpenCL) {
      EXPECT_NE(text.find("__kernel __attribute__((vec_type_hint(float16))) void wide("),
                std::string::npos) << text;
      EXPECT_NE(text.find("__kernel void narrow("), std::string::npos) << text;
    }
  }
  KernelWriter w(KernelTarget{Backend::kOpenCL}, "test_placeholders");
  EXPECT_THROW(w.Kernel("odd").VectorWidth(Scalar::kF32, 3), std::invalid_argument);
}

TEST(KernelWriter, Fp16WithoutDeviceSupportStoresHalfAndComputesInFloat) {
  const std::string text = ReluSource(KernelTarget{Backend::kOpenCL, false}, DataType::kFloat16);
  EXPECT_EQ(text.find("cl_khr_fp16"), std::string::npos);
  EXPECT_NE(text.find("vload_half"), std::string::npos);
  EXPECT_NE(text.find("vstore_half_rte"), std::string::npos);
  EXPECT_NE(text.find("typedef float Dtype_c;"), std::string::npos);
  const std::string native = ReluSource(KernelTarget{Backend::kOpenCL, true}, DataType::kFloat16);
  EXPECT_NE(native.find("#pragma OPENCL EXTENSION cl_khr_fp16 : enable"), std::string::npos);
  EXPECT_NE(native.find("typedef half Dtype_c;"), std::string::npos);
}

TEST(KernelWriter, Dot4HelperHasOneRowPerDialect) {
  auto text = [](const KernelTarget& t) {
    KernelWriter w(t, "test_dot4");
    w.UseHelper(KernelHelper::kDot4);
    return w.Source();
  };
  // Without a native dot product: the portable byte loops, no build options.
  const KernelTarget portable{Backend::kOpenCL, false, false};
  const std::string p = text(portable);
  EXPECT_NE(p.find("(a >> k) & 0xffu"), std::string::npos);
  EXPECT_EQ(p.find("dot_4x8packed"), std::string::npos);
  EXPECT_EQ(portable.Dot4BuildOptions(), "");
  // OpenCL with cl_khr_integer_dot_product: the packed built-ins (first operand unsigned in
  // us), non-saturating, guarded by the feature macro, built as OpenCL C 3.0.
  const KernelTarget cl{Backend::kOpenCL, false, true};
  const std::string o = text(cl);
  for (const char* want :
       {"dot_4x8packed_us_int(a, b)", "dot_4x8packed_ss_int(a, b)", "dot_4x8packed_uu_uint(a, b)",
        "#ifndef __opencl_c_integer_dot_product_input_4x8bit_packed"})
    EXPECT_NE(o.find(want), std::string::npos) << want;
  EXPECT_EQ(o.find("dot_acc_sat"), std::string::npos);
  EXPECT_EQ(o.find("(a >> k)"), std::string::npos);
  EXPECT_EQ(cl.Dot4BuildOptions(), "-cl-std=CL3.0");
  // CUDA sm_61+: dp4a; below: the portable row.
  const std::string c = text(KernelTarget::Cuda(61));
  EXPECT_NE(c.find("dp4a.u32.s32"), std::string::npos);
  EXPECT_NE(c.find("__dp4a"), std::string::npos);
  EXPECT_EQ(KernelTarget::Cuda(61).Dot4BuildOptions(), "");
  EXPECT_NE(text(KernelTarget::Cuda(60)).find("(a >> k) & 0xffu"), std::string::npos);
}

TEST(DataTypeTraits, MatchTheDesign) {
  EXPECT_EQ(TraitsOf(DataType::kInt8Q).storage, Scalar::kU8);
  EXPECT_EQ(TraitsOf(DataType::kInt8Q).difftype, Scalar::kI16);
  EXPECT_EQ(TraitsOf(DataType::kInt8Q).acctype, Scalar::kI32);
  EXPECT_EQ(TraitsOf(DataType::kInt16Q).storage, Scalar::kU16);
  EXPECT_EQ(TraitsOf(DataType::kInt16Q).difftype, Scalar::kI32);
  EXPECT_EQ(TraitsOf(DataType::kInt16Q).acctype, Scalar::kI64);
  EXPECT_EQ(TraitsOf(DataType::kFloat16).acctype, Scalar::kF32);
  EXPECT_EQ(SizeOf(DataType::kFloat16), 2u);
  EXPECT_STREQ(TraitsOf(Scalar::kI8).cuda, "signed char");  // never plain char on CUDA
  EXPECT_EQ(ParseDataType("int8"), DataType::kInt8Q);
  EXPECT_THROW(ParseDataType("int4"), std::invalid_argument);
}

TEST(DataTypeTraits, AccumulatorAndSignedStorageColumns) {
  EXPECT_EQ(TraitsOf(DataType::kFloat32).acc_bytes(), 4u);
  EXPECT_EQ(TraitsOf(DataType::kFloat16).acc_bytes(), 4u);
  EXPECT_EQ(TraitsOf(DataType::kInt16Q).acc_bytes(), 8u);
  EXPECT_EQ(TraitsOf(DataType::kInt8Q).acc_bytes(), 4u);
  EXPECT_STREQ(TraitsOf(DataType::kFloat16).acc_alias(), "float");
  EXPECT_STREQ(TraitsOf(DataType::kInt16Q).acc_alias(), "mp_i64");
  EXPECT_STREQ(TraitsOf(DataType::kInt8Q).acc_alias(), "int");
  EXPECT_STREQ(TraitsOf(DataType::kInt16Q).signed_alias(), "mp_i16");
  EXPECT_STREQ(TraitsOf(DataType::kInt8Q).signed_alias(), "mp_i8");
}

TEST(TypedBuffer, LoadsAndStoresEveryType) {
  const float f32[] = {1.5f, -2.25f};
  EXPECT_EQ(LoadF(DataType::kFloat32, f32, 1), -2.25f);
  uint16_t f16[2] = {};
  StoreF(DataType::kFloat16, f16, 1, -2.25f);
  EXPECT_EQ(f16[1], FloatToHalf(-2.25f));
  EXPECT_EQ(LoadF(DataType::kFloat16, f16, 1), -2.25f);
  EXPECT_EQ(LoadAsFloat(DataType::kFloat16, f16, 1), -2.25f);

  uint8_t u8[12] = {};  // (as large as 3 floats: LoadAsFloat has a float branch)
  StoreQ(DataType::kInt8Q, u8, 0, 300);     // saturates to qmax
  StoreQ(DataType::kInt8Q, u8, 1, -7);      // and to qmin
  StoreQ(DataType::kInt8Q, u8, 2, 20, 40);  // and to a raised floor (a ReLU's zero point)
  EXPECT_EQ(u8[0], 255);
  EXPECT_EQ(u8[1], 0);
  EXPECT_EQ(u8[2], 40);
  EXPECT_EQ(LoadQ(DataType::kInt8Q, u8, 0), 255);
  EXPECT_EQ(LoadQ(DataType::kInt8Q, u8, 0, /*is_signed=*/true), -1);
  EXPECT_EQ(LoadAsFloat(DataType::kInt8Q, u8, 2), 40.0f);

  uint16_t u16[2] = {};
  StoreQ(DataType::kInt16Q, u16, 0, 70000);
  StoreQ(DataType::kInt16Q, u16, 1, 40000);
  EXPECT_EQ(u16[0], 65535);
  EXPECT_EQ(LoadQ(DataType::kInt16Q, u16, 1), 40000);
  EXPECT_EQ(LoadQ(DataType::kInt16Q, u16, 1, /*is_signed=*/true), 40000 - 65536);
}

TEST(KernelWriter, RequantizationAndClampAreDefinedOnce) {
  for (Backend b : {Backend::kOpenCL, Backend::kCuda}) {
    KernelWriter w(b == Backend::kCuda ? KernelTarget::Cuda(80) : KernelTarget{b}, "test_requant");
    w.AddType("Dtype", DataType::kInt16Q).AddType("Ftype", DataType::kFloat32);
    w.UseRequant(DataType::kInt16Q).UseRequant(DataType::kInt16Q);
    const std::string text = w.Source();
    auto count = [&](const std::string& what) {
      size_t n = 0;
      for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("#define MP_REQUANT(acc, m, s) mp_requant64((mp_i64)(acc), m, s)\n"), 1u);
    EXPECT_EQ(count("mp_i64 mp_requant64("), 1u);
    EXPECT_EQ(count("#define Dtype_SAT(v) Dtype_SAT_FROM(v, Dtype_QMIN)\n"), 1u);
    EXPECT_EQ(count("#define Dtype_SAT_FROM(v, lo) "), 1u);
    EXPECT_EQ(count("Ftype_SAT"), 0u);  // float types have no integer range
  }
  KernelWriter w8(KernelTarget{Backend::kOpenCL}, "test_requant");
  w8.UseRequant(DataType::kInt8Q);
  EXPECT_NE(w8.Source().find("#define MP_REQUANT(acc, m, s) (mp_i64)mp_requant32((int)(acc), m, s)"),
            std::string::npos);
  KernelWriter wf(KernelTarget{Backend::kOpenCL}, "test_requant");
  EXPECT_THROW(wf.UseRequant(DataType::kFloat16), std::invalid_argument);
}

TEST(Half, ConversionsRoundToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);     // ties to even: overflow to infinity
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // exact tie rounds to even
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_EQ(FloatToHalf(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(2.98023223876953125e-08f), 0x0000);  // half of it: tie to even (0)
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
    }
  }
}

}  // namespace
}  // namespace mpcaffe
