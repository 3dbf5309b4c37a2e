// tests/layers/hdf5_test.cc — the HDF5Data and HDF5Output layers on files this test writes:
// BVLC's row and file order (with and without shuffle), the float types, appended output, and
// errors that name the layer, the file and the dataset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "layers/blob.h"
#include "layers/hdf5_file.h"
#include "layers/layer_registry.h"
#include "proto/model_io.h"

namespace mpcaffe {
namespace {

namespace fs = std::filesystem;

/// A fresh directory for one test's files, removed after it.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / ("hdf5_test_" + tag + "_" + std::to_string(getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

/// An HDF5 file of `rows` rows: "data" [rows, 2, 3] with row r's values first + r (× 6 + k),
/// "label" [rows] = first + r.
void WriteRows(const std::string& path, int rows, int first) {
  Hdf5Writer w(path);
  std::vector<float> data, label;
  for (int r = 0; r < rows; ++r) {
    label.push_back(float(first + r));
    for (int k = 0; k < 6; ++k) data.push_back(float((first + r) * 6 + k));
  }
  w.Append("data", {rows, 2, 3}, data.data());
  w.Append("label", {rows}, label.data());
}

struct H5Run {
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> store;
  std::vector<Blob*> bottom, top;
};

H5Run MakeLayer(const std::string& text, DataType t, const std::vector<std::vector<int>>& bottoms,
              int tops) {
  caffe::LayerParameter p;
  ParseProtoFromText(text, "<test>", &p);
  p.set_bottom_data_type(DataTypeToProto(t));
  p.set_compute_data_type(DataTypeToProto(t));
  p.set_top_data_type(DataTypeToProto(t));
  p.set_phase(caffe::TEST);
  H5Run r;
  r.layer = CreateLayer(p, DefaultDevice());
  for (const auto& s : bottoms) {
    r.store.push_back(std::make_unique<Blob>(DefaultDevice(), t, s));
    r.bottom.push_back(r.store.back().get());
  }
  for (int i = 0; i < tops; ++i) {
    r.store.push_back(std::make_unique<Blob>(DefaultDevice(), t));
    r.top.push_back(r.store.back().get());
  }
  r.layer->SetUp(r.bottom, r.top);
  return r;
}

std::string DataLayer(const std::string& source, int batch, bool shuffle) {
  return "name: 'h5' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" +
         source + "' batch_size: " + std::to_string(batch) + (shuffle ? " shuffle: true" : "") + " }";
}

// Two files of 5 and 3 rows, batches of 4: a0–a3, a4 b0–b2, a0–a3 (round the list).
TEST(HDF5Data, ReadsRowsFileAfterFileInBothFloatTypes) {
  TempDir dir("order");
  WriteRows(dir / "a.h5", 5, 0);
  WriteRows(dir / "b.h5", 3, 100);
  std::ofstream(dir / "list.txt") << dir / "a.h5" << "\n" << dir / "b.h5" << "\n";
  for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
    H5Run r = MakeLayer(DataLayer(dir / "list.txt", 4, false), t, {}, 2);
    ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{4, 2, 3}));
    ASSERT_EQ(r.top[1]->shape(), (std::vector<int>{4}));
    const std::vector<std::vector<float>> want = {{0, 1, 2, 3}, {4, 100, 101, 102}, {0, 1, 2, 3}};
    for (const auto& labels : want) {
      r.layer->Forward(r.bottom, r.top);
      EXPECT_EQ(r.top[1]->ToFloat(), labels) << Name(t);
      const auto data = r.top[0]->ToFloat();
      for (int i = 0; i < 4; ++i)
        for (int k = 0; k < 6; ++k) EXPECT_EQ(data[i * 6 + k], labels[i] * 6 + k) << Name(t);
    }
  }
}

// shuffle: every row of both files once per pass, a file's rows together.
TEST(HDF5Data, ShuffleVisitsEveryRowOncePerPass) {
  TempDir dir("shuffle");
  WriteRows(dir / "a.h5", 5, 0);
  WriteRows(dir / "b.h5", 3, 100);
  std::ofstream(dir / "list.txt") << dir / "a.h5" << " " << dir / "b.h5";
  H5Run r = MakeLayer(DataLayer(dir / "list.txt", 8, true), DataType::kFloat32, {}, 2);
  for (int pass = 0; pass < 3; ++pass) {
    r.layer->Forward(r.bottom, r.top);
    const auto labels = r.top[1]->ToFloat();
    EXPECT_EQ(std::set<float>(labels.begin(), labels.end()),
              (std::set<float>{0, 1, 2, 3, 4, 100, 101, 102}));
    const bool a_first = labels[0] < 100;
    for (int i = 0; i < 8; ++i) EXPECT_EQ(labels[i] < 100, (i < (a_first ? 5 : 3)) == a_first) << i;
    const auto data = r.top[0]->ToFloat();
    for (int i = 0; i < 8; ++i) EXPECT_EQ(data[i * 6 + 5], labels[i] * 6 + 5);
  }
}

TEST(HDF5Data, BadFilesNameTheLayerTheFileAndTheDataset) {
  TempDir dir("errors");
  WriteRows(dir / "good.h5", 2, 0);
  std::ofstream(dir / "corrupt.h5") << "not an HDF5 file at all";
  {
    Hdf5Writer w(dir / "nolabel.h5");
    const float v[6] = {};
    w.Append("data", {1, 2, 3}, v);
  }
  {
    Hdf5Writer w(dir / "short.h5");
    const float v[12] = {}, l[1] = {};
    w.Append("data", {2, 2, 3}, v);
    w.Append("label", {1}, l);
  }
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {dir / "absent.txt", {"absent.txt", "cannot be opened"}},
      {"missing", {"missing.h5", "cannot be opened"}},
      {"corrupt", {"corrupt.h5", "not an HDF5 file"}},
      {"nolabel", {"nolabel.h5", "dataset 'label'", "no such dataset"}},
      {"short", {"short.h5", "'label' has 1 rows"}},
  };
  for (const auto& [what, expected] : cases) {
    std::string list = what;
    if (what.find('/') == std::string::npos) {
      list = dir / (what + ".txt");
      std::ofstream(list) << dir / (what + ".h5") << "\n";
    }
    try {
      MakeLayer(DataLayer(list, 2, false), DataType::kFloat32, {}, 2);
      ADD_FAILURE() << what;
    } catch (const LayerError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'h5' (HDF5Data)"), std::string::npos) << m;
      for (const auto& s : expected) EXPECT_NE(m.find(s), std::string::npos) << s << " in " << m;
    }
  }
  try {
    MakeLayer("name: 'q' type: 'HDF5Data' top: 'data' hdf5_data_param { source: 'x' batch_size: 1 }",
              DataType::kInt8Q, {}, 1);
    ADD_FAILURE() << "HDF5Data accepted int8";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("'q' (HDF5Data): does not compute in"), std::string::npos)
        << e.what();
  }
}

// Each Forward appends its batch: "data" and "label" in BVLC's 4-d legacy shape.
TEST(HDF5Output, AppendsDataAndLabelRows) {
  TempDir dir("output");
  const std::string file = dir / "out.h5";
  {
    H5Run r = MakeLayer("name: 'out' type: 'HDF5Output' bottom: 'x' bottom: 'y' hdf5_output_param "
                      "{ file_name: '" + file + "' }",
                      DataType::kFloat32, {{2, 3}, {2}}, 0);
    for (int pass = 0; pass < 2; ++pass) {
      r.bottom[0]->FromFloat({1.f + pass, 2, 3, 4, 5, 6.5f});
      r.bottom[1]->FromFloat({7.f, 8.f + pass});
      r.layer->Forward(r.bottom, r.top);
    }
    // Flushed after each Forward: readable before the layer goes.
    EXPECT_EQ(ReadHdf5Dataset(file, "label").values, (std::vector<float>{7, 8, 7, 9}));
  }
  const Hdf5Array data = ReadHdf5Dataset(file, "data");
  EXPECT_EQ(data.dims, (std::vector<int64_t>{4, 3, 1, 1}));
  EXPECT_EQ(data.values, (std::vector<float>{1, 2, 3, 4, 5, 6.5f, 2, 2, 3, 4, 5, 6.5f}));
  EXPECT_EQ(ReadHdf5Dataset(file, "label").dims, (std::vector<int64_t>{4, 1, 1, 1}));
  // The file HDF5Data reads back.
  std::ofstream(dir / "list.txt") << file;
  H5Run back = MakeLayer("name: 'in' type: 'HDF5Data' top: 'data' hdf5_data_param { source: '" +
                           (dir / "list.txt") + "' batch_size: 4 }",
                       DataType::kFloat32, {}, 1);
  back.layer->Forward(back.bottom, back.top);
  EXPECT_EQ(back.top[0]->shape(), (std::vector<int>{4, 3, 1, 1}));
  EXPECT_EQ(back.top[0]->ToFloat(), data.values);
  try {
    MakeLayer("name: 'bad' type: 'HDF5Output' bottom: 'x' bottom: 'y' hdf5_output_param "
              "{ file_name: '" + (dir / "no/such/dir/out.h5") + "' }",
              DataType::kFloat32, {{2, 3}, {2}}, 0);
    ADD_FAILURE() << "an HDF5 file in a missing directory";
  } catch (const LayerError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'bad' (HDF5Output)"), std::string::npos) << m;
    EXPECT_NE(m.find("no/such/dir/out.h5"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace mpcaffe
