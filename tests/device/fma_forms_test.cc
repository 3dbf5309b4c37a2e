// tests/device/fma_forms_test.cc — the writer's $fma on the entry's device in both of its forms:
// `fma()` (every device whose fma() is an instruction) must round once, as OpenCL requires, and
// `mad()` (KernelTarget::fma_in_software: rusticl on llvmpipe, whose fma() is libclc's software
// routine) must be a·b + c within one rounding of the product and one of the sum. Each form runs
// on every device, whichever the device's own target picks, so a device flagged by mistake (or
// one whose mad() is wrong) fails here rather than in a GEMM's tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"

namespace mpcaffe {
namespace {

/// a, b, c triples: products whose low bits a separate rounding loses (1 + 2^-12 squared minus
/// 1), signs, zeros and magnitudes far apart.
struct Triple {
  float a, b, c;
};
std::vector<Triple> Triples() {
  const float e = std::ldexp(1.0f, -12);
  std::vector<Triple> t = {{1 + e, 1 + e, -1},     {1 + e, 1 - e, -1},   {-1, 0, 0},
                           {3.5f, -2.25f, 7.875f}, {1e-20f, 1e-20f, 1},  {1e20f, 1e-20f, -1},
                           {0.1f, 10.0f, -1.0f},   {-0.0f, 5.0f, -0.0f}, {65504.0f, 2.0f, 1.0f}};
  while (t.size() % 8) t.push_back({float(t.size()) * 0.37f, -1.5f, 0.25f});
  return t;
}

TEST(FmaForms, BothFormsMultiplyAddOnTheEntrysDevice) {
  Device& d = DefaultDevice();
  if (d.backend() != Backend::kOpenCL)
    GTEST_SKIP() << "mad() is OpenCL C's; CUDA's $fma is always fma() (" << d.Describe() << ")";
  const std::vector<Triple> t = Triples();
  const size_t n = t.size();
  std::vector<float> a(n), b(n), c(n);
  for (size_t i = 0; i < n; ++i) a[i] = t[i].a, b[i] = t[i].b, c[i] = t[i].c;
  auto da = d.Alloc<float>(n), db = d.Alloc<float>(n), dc = d.Alloc<float>(n);
  auto dy = d.Alloc<float>(2 * n);
  d.Write(da, a.data(), n), d.Write(db, b.data(), n), d.Write(dc, c.data(), n);
  for (const bool software : {false, true}) {
    SCOPED_TRACE(std::string(software ? "mad()" : "fma()") + " form on " + d.Describe());
    KernelTarget target = KernelTarget::Of(d);
    target.fma_in_software = software;
    KernelWriter w(target, "test_device");
    // Scalar lanes in y[0, n), the same through float8 in y[n, 2n).
    w.Kernel("fma_forms").Value("int", "n").In("float", "a").In("float", "b").In("float", "c")
        .Out("float", "y")
        .Body(R"(  const int i = $global_id(0);
  if (i >= n / 8) return;
  for (int j = 0; j < 8; ++j) y[i * 8 + j] = $fma(a[i * 8 + j], b[i * 8 + j], c[i * 8 + j]);
  vstore8($fma(vload8(i, a), vload8(i, b), vload8(i, c)), i, y + n);
)");
    ASSERT_NE(w.Source().find(software ? "mad(" : "fma("), std::string::npos);
    auto program = d.BuildProgram(w.Source());
    program->GetKernel("fma_forms").Arg(int32_t(n)).Arg(da).Arg(db).Arg(dc).Arg(dy)
        .Launch({n / 8, 1, 1});
    std::vector<float> got(2 * n);
    d.Read(dy, got.data(), 2 * n);
    for (size_t i = 0; i < 2 * n; ++i) {
      const size_t k = i % n;
      const double exact = double(a[k]) * double(b[k]) + double(c[k]);
      const float fused = std::fma(a[k], b[k], c[k]);
      if (!software) {
        // One rounding: the host's fma, by value (a zero's sign aside).
        EXPECT_EQ(got[i], fused) << a[k] << " * " << b[k] << " + " << c[k] << ", lane " << i;
      } else {
        const double tolerance =
            std::ldexp(std::fabs(double(a[k]) * double(b[k])) + std::fabs(exact), -23);
        EXPECT_LE(std::fabs(double(got[i]) - exact), tolerance)
            << a[k] << " * " << b[k] << " + " << c[k] << ", lane " << i;
      }
    }
  }
}

}  // namespace
}  // namespace mpcaffe
