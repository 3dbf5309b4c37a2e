// libdnn/row_groups.h — the launch default of kernels that walk rows of items (pooling's vector
// max, LRN's forward): work-groups along a row, the rows shared by a fixed number of groups.
#pragma once

#include <string>

namespace mpcaffe::libdnn {

/// Work-groups of `width` work-items along a row (pooling: no wider than the row's vectors), and
/// about `groups` work-groups in all, each walking rows of its columns.
struct RowGroups {
  int width = 8;
  int groups = 1024;
  std::string ToString() const {
    return "width=" + std::to_string(width) + " groups=" + std::to_string(groups);
  }
};

}  // namespace mpcaffe::libdnn
