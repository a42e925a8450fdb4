"""Rewrites one field of a checkpoint's octet.meta: tamper_checkpoint.py IN OUT FIELD JSON_TEXT.
The text goes in verbatim (NaN too, which is not JSON); the other entries are copied unchanged."""
import io
import re
import sys
import zipfile

import numpy as np

src, dst, field, text = sys.argv[1:5]
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
    for info in zin.infolist():
        data = zin.read(info.filename)
        if info.filename == "octet.meta.npy":
            meta = np.lib.format.read_array(io.BytesIO(data)).tobytes().decode()
            meta, n = re.subn(r'"%s":[^,}]*' % re.escape(field), '"%s":%s' % (field, text), meta)
            assert n == 1, meta
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.frombuffer(meta.encode(), np.uint8))
            data = buf.getvalue()
        zout.writestr(info, data)
