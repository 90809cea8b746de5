#!/usr/bin/env python3
"""st.py: safetensors files for the command-line tests, with Python's standard library only.

  st.py list FILE                  every tensor as "name dtype [shape]", then "meta key=value" lines
  st.py same A B [bf16]            A's weights (not adam.*) equal B's tensors of the same names bit for bit
                                   (bf16: B holds A's values rounded to bfloat16, to nearest even), same shapes
  st.py rows A NAME_A B NAME_B N   B's NAME_B is the first N rows of A's NAME_A
  st.py perhead CKPT HF LAYER HEADS  HF's c_attn weight of LAYER holds CKPT's q, k, v head by head
  st.py drop FILE NAME             rewrites FILE without tensor NAME
  st.py add FILE NAME              rewrites FILE with one more F32 tensor NAME of shape [2]
  st.py rename FILE NAME NEW       rewrites FILE with tensor NAME (and its checksum) named NEW
  st.py cut FILE NAME ROWS         rewrites FILE with tensor NAME cut to its first ROWS rows
  st.py flip FILE NAME             flips the lowest bit of tensor NAME's first byte in place (metadata as it was)
  st.py nan FILE NAME INDEX        sets element INDEX of F32 tensor NAME to NaN in place (metadata as it was)
  st.py fill FILE NAME VALUE       sets every element of F32 tensor NAME to VALUE in place (metadata as it was)
  st.py meta FILE KEY [VALUE]      rewrites FILE with metadata KEY set to VALUE, or without KEY
  st.py unsum FILE                 rewrites FILE without its checksums, as plait wrote files before them
  st.py digest FILE NAME           the SHA-256 of tensor NAME's bytes (two files hold it alike or not)
"""
import hashlib
import json
import signal
import struct
import sys


def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {name: (t["dtype"], t["shape"], data[t["data_offsets"][0]:t["data_offsets"][1]])
               for name, t in header.items()}
    return tensors, meta


def write(path, tensors, meta):
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, blob = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def floats(dtype, blob):
    if dtype == "F32":
        return struct.unpack("<%df" % (len(blob) // 4), blob)
    if dtype == "BF16":
        halves = struct.unpack("<%dH" % (len(blob) // 2), blob)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    raise SystemExit("st.py: %s is not read here" % dtype)


def bf16_round(blob):
    """F32 bytes rounded to bfloat16 (to nearest, ties to even) and widened back to F32 bytes."""
    words = struct.unpack("<%dI" % (len(blob) // 4), blob)
    rounded = [((w + 0x7FFF + ((w >> 16) & 1)) & 0xFFFF0000) for w in words]
    return struct.pack("<%dI" % len(rounded), *rounded)


def same(a_path, b_path, mode=None):
    a, _ = read(a_path)
    b, _ = read(b_path)
    weights = {k: v for k, v in a.items() if not k.startswith("adam.")}
    if set(weights) != set(b):
        raise SystemExit("st.py: names differ: %s" % sorted(set(weights) ^ set(b))[:5])
    for name, (dtype, shape, blob) in weights.items():
        want = bf16_round(blob) if mode == "bf16" else blob
        if b[name][1] != shape or b[name][2] != want:
            raise SystemExit("st.py: %s differs (shape %s against %s)" % (name, b[name][1], shape))
    print("same: %d tensors" % len(weights))


def rows(a_path, a_name, b_path, b_name, n):
    a, _ = read(a_path)
    b, _ = read(b_path)
    row_bytes = len(a[a_name][2]) // a[a_name][1][0]
    if b[b_name][2] != a[a_name][2][:int(n) * row_bytes]:
        raise SystemExit("st.py: %s is not the first %s rows of %s" % (b_name, n, a_name))
    print("rows: the first %s" % n)


def perhead(ckpt_path, hf_path, layer, heads):
    """c_attn.weight is [in, 3·out] (Conv1D); column block h holds q, k and v of head h, each head_dim wide."""
    ck, _ = read(ckpt_path)
    hf, _ = read(hf_path)
    layer, heads = int(layer), int(heads)
    q, k, v = (ck["layers.%d.attn.%s.weight" % (layer, p)] for p in "qkv")
    out, width = q[1]  # [out, in]
    dim = out // heads
    dtype, shape, blob = hf["transformer.h.%d.attn.c_attn.weight" % layer]
    h_values = floats(dtype, blob)
    for part, (_, _, pblob) in enumerate((q, k, v)):
        p_values = floats("F32", pblob)
        for row in range(out):
            column = row // dim * 3 * dim + part * dim + row % dim
            for i in range(width):
                if h_values[i * shape[1] + column] != p_values[row * width + i]:
                    raise SystemExit("st.py: part %d row %d is not at column %d" % (part, row, column))
    print("perhead: %d heads of %d" % (heads, dim))


def flip(path, name):
    raw = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    at = 8 + n + json.loads(raw[8:8 + n])[name]["data_offsets"][0]
    raw[at] ^= 1
    open(path, "wb").write(raw)


def set_floats(path, name, value, index=None):
    raw = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    tensor = json.loads(raw[8:8 + n])[name]
    assert tensor["dtype"] == "F32", tensor["dtype"]
    begin, end = (8 + n + offset for offset in tensor["data_offsets"])
    places = range(begin, end, 4) if index is None else [begin + 4 * int(index)]
    for at in places:
        raw[at:at + 4] = struct.pack("<f", value)
    open(path, "wb").write(raw)


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "list":
        tensors, meta = read(args[0])
        for name in sorted(tensors):
            print("%s %s %s" % (name, tensors[name][0], json.dumps(tensors[name][1])))
        for key in sorted(meta):
            print("meta %s=%s" % (key, meta[key]))
    elif command == "same":
        same(*args)
    elif command == "rows":
        rows(*args)
    elif command == "perhead":
        perhead(*args)
    elif command == "flip":
        flip(*args)
    elif command == "nan":
        set_floats(args[0], args[1], float("nan"), args[2])
    elif command == "fill":
        set_floats(args[0], args[1], float(args[2]))
    elif command == "digest":
        print(hashlib.sha256(read(args[0])[0][args[1]][2]).hexdigest())
    elif command == "unsum":
        tensors, meta = read(args[0])
        write(args[0], tensors, {k: v for k, v in meta.items() if not k.startswith("checksum.")})
    else:
        tensors, meta = read(args[0])
        name = args[1]
        if command == "drop":
            del tensors[name]
        elif command == "rename":
            tensors[args[2]] = tensors.pop(name)
            if "checksum." + name in meta:
                meta["checksum." + args[2]] = meta.pop("checksum." + name)
        elif command == "add":
            tensors[name] = ("F32", [2], struct.pack("<2f", 1.0, 2.0))
        elif command == "meta":
            meta.pop(name, None)
            if len(args) > 2:
                meta[name] = args[2]
        elif command == "cut":
            dtype, shape, blob = tensors[name]
            keep = int(args[2])
            tensors[name] = (dtype, [keep] + shape[1:], blob[:len(blob) // shape[0] * keep])
        else:
            raise SystemExit(__doc__)
        write(args[0], tensors, meta)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a reader that stops early (grep -q) ends a listing quietly
    main(sys.argv)
