"""Helper for examples/tool.py (not a flow): `wordcount.py TEXT OUT.json` writes word statistics."""

import json
import sys

text, out = sys.argv[1], sys.argv[2]
words = text.split()
stats = {"words": len(words), "chars": len(text), "longest": max(words, key=len) if words else ""}
with open(out, "w", encoding="utf-8") as fh:
    json.dump(stats, fh)
