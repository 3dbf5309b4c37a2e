// tests/testing/defaults_tables.h — the check every defaults table's test makes of its rows:
// a device class in words and the measurement (or the reason there is none) behind each row.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace mpcaffe::testing {

template <typename Table>
void ExpectRowsWithProvenance(const Table& table, const char* name) {
  ASSERT_FALSE(table.empty()) << name;
  for (const auto& row : table) {
    EXPECT_GT(std::string(row.device_class).size(), 5u) << name;
    EXPECT_GT(std::string(row.provenance).size(), 10u) << name << ": " << row.device_class;
  }
}

}  // namespace mpcaffe::testing
