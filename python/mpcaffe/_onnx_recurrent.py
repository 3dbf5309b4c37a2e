"""_onnx_recurrent.py — the ONNX forms of BVLC's recurrent layers for mpcaffe.onnx: LSTM as ONNX's
LSTM, RNN as ONNX's RNN followed by the output transform tanh(W_ho·h + b_o), LSTMUnit as its
element-wise operators.

Caffe's gates are i, f, o, g; ONNX's are i, o, f, c: the weight rows are reordered. A static input
x_static is appended to every step's features (its weights beside W_xc / W_xh), exposed initial
and final states are the operators' initial_h / initial_c and Y_h / Y_c inputs and outputs (their
layout, 1 × N × H, is Caffe's), the initial states times the first step's cont flags. ONNX's
operators have no sequence-continuation input beyond that: the export computes what the layer
computes when cont is 1 at every later step, from the exposed initial states or, without them, from
a zero state (the layer's first pass, or cont 0 at the first step). A net whose sequences restart
inside a pass, or that carries its state from one pass to the next, needs the layer itself.
"""

import numpy as np


def _gates_onnx(m, hidden):
    """Rows of Caffe's gate blocks i, f, o, g in ONNX's order i, o, f, c."""
    h = hidden
    return np.concatenate([m[0:h], m[2 * h:3 * h], m[h:2 * h], m[3 * h:4 * h]])


def _sequence(b, x, shape, name):
    """x as T × N × features (a Reshape when it has more axes)."""
    if len(shape) == 3:
        return x
    flat = np.array([shape[0], shape[1], int(np.prod(shape[2:]))], np.int64)
    return b.node("Reshape", [x, b.constant(name + "_seq_shape", flat)], base=name + "_seq")


def _layout(layer):
    """(T, N, static input, expose_hidden, index of the first exposed state bottom)."""
    p = layer.param.recurrent_param
    states = 2 if layer.type == "LSTM" else 1
    static = len(layer.bottoms) > 2 + (states if p.expose_hidden else 0)
    shape = layer.net_bottom_shapes[0]
    return shape[0], shape[1], static, p.expose_hidden, 3 if static else 2


def _with_static(b, layer, x, x_static, w, w_static, name):
    """x (T × N × D) with x_static (N × S) appended to every step, and W with W_static beside."""
    T, N = layer.net_bottom_shapes[0][:2]
    s_shape = layer.net_bottom_shapes[2]
    S = int(np.prod(s_shape[1:]))
    xs = b.node("Reshape", [x_static,
                            b.constant(name + "_static_shape", np.array([1, N, S], np.int64))],
                base=name + "_static")
    xs = b.node("Expand", [xs, b.constant(name + "_static_steps", np.array([T, N, S], np.int64))],
                base=name + "_static_steps")
    x = b.node("Concat", [x, xs], base=name + "_with_static", axis=2)
    return x, np.concatenate([w, w_static.reshape(w.shape[0], S)], axis=1)


def export_recurrent(b, layer, inputs, shapes):
    """The float ONNX operators of an LSTM, RNN or LSTMUnit layer on float `inputs`; returns one
    float tensor per top."""
    name = layer.name
    if layer.type == "LSTMUnit":
        return _lstm_unit(b, inputs, name)
    H = layer.param.recurrent_param.num_output
    T, N, static, exposed, first_state = _layout(layer)
    x_shape = layer.net_bottom_shapes[0]
    D = int(np.prod(x_shape[2:]))
    x = _sequence(b, inputs[0], x_shape, name)
    lstm = layer.type == "LSTM"
    rows = 4 * H if lstm else H
    w = np.asarray(layer.param_float(0), np.float32).reshape(rows, D)
    bias = np.asarray(layer.param_float(1), np.float32)
    nxt = 2
    if static:
        x, w = _with_static(b, layer, x, inputs[2], w, np.asarray(layer.param_float(2), np.float32),
                            name)
        nxt = 3
    r = np.asarray(layer.param_float(nxt), np.float32).reshape(rows, H)
    states = []
    if exposed:  # cont at the first step flushes the given states: h_0·cont_1, c_0·cont_1
        first = b.node("Gather", [inputs[1], b.constant(name + "_step0", np.array(0, np.int64))],
                       base=name + "_cont_1", axis=0)
        keep = b.node("Reshape", [first, b.constant(name + "_state_cont_shape",
                                                    np.array([1, N, 1], np.int64))],
                      base=name + "_cont_1_state")
        states = [b.node("Mul", [inputs[first_state + k], keep], base=f"{name}_state{k}")
                  for k in range(2 if lstm else 1)]
    if lstm:
        w, r, bias = _gates_onnx(w, H), _gates_onnx(r, H), _gates_onnx(bias, H)
    args = [x, b.constant(name + "_W", w[None]), b.constant(name + "_R", r[None]),
            b.constant(name + "_B", np.concatenate([bias, np.zeros_like(bias)])[None]), ""]
    args += states
    outs = [b.unique(name + "_Y"), b.unique(name + "_Y_h")] + ([b.unique(name + "_Y_c")] if lstm else [])
    b.node("LSTM" if lstm else "RNN", args, outs, hidden_size=H)
    h = b.node("Squeeze", [outs[0], b.constant(name + "_dir_axis", np.array([1], np.int64))],
               base=name + "_h")
    if lstm:
        return [h] + (outs[1:] if exposed else [])
    # RNN: o_t = tanh(W_ho·h_t + b_o) on every step.
    w_ho = np.asarray(layer.param_float(nxt + 1), np.float32).reshape(H, H)
    b_o = np.asarray(layer.param_float(nxt + 2), np.float32)
    o = b.node("MatMul", [h, b.constant(name + "_W_ho_t", np.ascontiguousarray(w_ho.T))],
               base=name + "_W_ho_h")
    o = b.node("Add", [o, b.constant(name + "_b_o", b_o)], base=name + "_W_ho_h_b")
    return [b.node("Tanh", [o], base=name)] + ([outs[1]] if exposed else [])


def _lstm_unit(b, inputs, name):
    """c = cont·σ(f)·c_prev + σ(i)·tanh(g), h = σ(o)·tanh(c) on x's gate blocks i, f, o, g."""
    c_prev, x, cont = inputs
    gates = [b.unique(f"{name}_{g}") for g in "ifog"]
    b.node("Split", [x], gates, axis=2, num_outputs=4)
    keep = b.node("Unsqueeze", [cont, b.constant(name + "_cell_axis", np.array([2], np.int64))],
                  base=name + "_cont")
    i = b.node("Sigmoid", [gates[0]], base=name + "_i_act")
    f = b.node("Mul", [b.node("Sigmoid", [gates[1]], base=name + "_f_act"), keep],
               base=name + "_f_kept")
    o = b.node("Sigmoid", [gates[2]], base=name + "_o_act")
    g = b.node("Tanh", [gates[3]], base=name + "_g_act")
    c = b.node("Add", [b.node("Mul", [f, c_prev], base=name + "_fc"),
                       b.node("Mul", [i, g], base=name + "_ig")], base=name + "_c")
    h = b.node("Mul", [o, b.node("Tanh", [c], base=name + "_tanh_c")], base=name + "_h")
    # The exporter renames the node writing a top; c is read above, so its top is a copy.
    return [b.node("Identity", [c], base=name + "_c_top"), h]
