"""Writes a plan (docs/PLAN.md) with one float32 parameter `w` [1000000, 1000000] stored as a zero
splat, returned by an Identity: host-memory.test's plan too large for any host."""
import json
import struct
import sys
import zlib

header = json.dumps({
    "format": "octet-plan", "version": 1, "producer": "host-memory.test",
    "values": [{"name": "w", "dtype": "float32", "shape": [1000000, 1000000]},
               {"name": "y", "dtype": "float32", "shape": [1000000, 1000000]}],
    "outputs": [1],
    "constants": [{"value": 0, "offset": 0, "bytes": 4, "kind": "param", "splat": True}],
    "ops": [{"type": "Identity", "name": "id", "in": [0], "out": [1]}],
}).encode()
data = b"\0" * 4
offset = (48 + len(header) + 63) // 64 * 64
crc = zlib.crc32(data, zlib.crc32(header))
fixed = b"OCTPLAN\0" + struct.pack("<I", 1) + b"\0" * 4 + struct.pack("<QQQI", len(header), offset, len(data), crc)
fixed += b"\0" * (48 - len(fixed))
with open(sys.argv[1], "wb") as f:
    f.write(fixed + header + b"\0" * (offset - 48 - len(header)) + data)
