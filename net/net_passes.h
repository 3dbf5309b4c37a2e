// net/net_passes.h — the NetParameter passes Net::Build runs before creating layers (internal to
// net/; FilterNet, WithDataType and NestedNetParameters are public in net/net.h).
#pragma once

#include <set>
#include <string>

#include "net/net.h"

namespace mpcaffe {

/// Unset data-type fields of a layer take the net's data_type.
void ApplyNetDataType(caffe::NetParameter* net);

/// Replaces data layers (Data, ImageData, MemoryData, WindowData) by Input layers of the same
/// tops (data: N×C×H×W, label: N), adding their names to `replaced`.
void ReplaceDataLayers(caffe::NetParameter* net, const NetOptions& options,
                       std::set<std::string>* replaced);

/// Inserts a Quantizer layer wherever a bottom is consumed in another type than its producer
/// writes, and after regular layers whose top_data_type differs from their compute type; adds
/// the inserted layers' names to `inserted`.
caffe::NetParameter InsertConversions(const caffe::NetParameter& in,
                                      std::set<std::string>* inserted);

/// BVLC's split insertion (a Split layer for each blob consumed by several layers); adds the
/// inserted layers' names to `inserted`. With `share_float` (inference), a float blob none of
/// whose consumers writes it in place gets no Split: the consumers read it directly.
caffe::NetParameter InsertSplits(const caffe::NetParameter& in, std::set<std::string>* inserted,
                                 bool share_float = false);

}  // namespace mpcaffe
