"""Checks that a caffemodel written by mpcaffe parses with the Python protobuf package.

Run by tests/proto/caffe_proto_test.cc as
    python3 caffemodel_pb2_check.py <dir holding caffe_pb2.py> <caffemodel in> <caffemodel out>
It parses the file with the module protoc generated from our caffe.proto, checks the values the
C++ test wrote, prints a one-line summary, and writes the message back re-serialized by Python so
the C++ side can compare bytes.
"""

import struct
import sys


def fail(message):
    print("caffemodel_pb2_check: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 4:
        fail("usage: caffemodel_pb2_check.py <module dir> <in.caffemodel> <out.caffemodel>")
    module_dir, source, target = sys.argv[1:]
    sys.path.insert(0, module_dir)
    import caffe_pb2  # noqa: E402  (generated at test time)
    import google.protobuf

    net = caffe_pb2.NetParameter()
    with open(source, "rb") as f:
        net.ParseFromString(f.read())

    if net.name != "python_check":
        fail("name is %r" % net.name)
    if [layer.name for layer in net.layer] != ["data", "ip1"]:
        fail("layer names are %r" % [layer.name for layer in net.layer])
    ip = net.layer[1]
    if caffe_pb2.DataType.Name(ip.compute_data_type) != "CAFFE_INT8_QUANTIZED":
        fail("compute_data_type is %d" % ip.compute_data_type)
    weights, packed = ip.blobs[0], ip.blobs[1]
    if list(weights.shape.dim) != [2, 3]:
        fail("weight shape is %r" % list(weights.shape.dim))
    expected = [0.5 * i - 1.25 for i in range(6)]
    if list(weights.data) != expected:
        fail("weights are %r" % list(weights.data))
    if packed.data_type != caffe_pb2.CAFFE_INT8_QUANTIZED:
        fail("packed blob data_type is %d" % packed.data_type)
    # int8 blobs are uint8 with a zero point: the bytes must read back unsigned.
    values = list(struct.unpack("<%dB" % len(packed.packed_data), packed.packed_data))
    if values != [0, 1, 127, 128, 255]:
        fail("packed values are %r" % values)
    q = net.quantizer[0]
    if (q.name, q.observed_min, q.observed_max) != ("ip1_top", -1.5, 2.75):
        fail("quantizer is %r" % q)
    if q.mode != caffe_pb2.CAFFE_QUANT_OBSERVE:
        fail("quantizer mode is %d" % q.mode)
    if net.layer[0].input_param.shape[0].dim[1] != 3:
        fail("input shape is %r" % net.layer[0].input_param.shape[0])

    with open(target, "wb") as f:
        f.write(net.SerializeToString())
    print("python protobuf %s parsed %d layers, %d quantizers" %
          (google.protobuf.__version__, len(net.layer), len(net.quantizer)))


if __name__ == "__main__":
    main()
