"""Builds the fonts committed in this folder from Debian's Noto packages (run once; CI never runs it).

Inputs: fonts-noto-core 20201225-1 and fonts-noto-cjk 1:20220127+repack1-1 (bookworm), unpacked with
`dpkg-deb -x` into SRC (default /tmp/fx). The Latin/Greek/Cyrillic, Arabic, Hebrew, Devanagari and
Ethiopic faces are copied whole. Noto Sans CJK (the SC face of the .ttc) is subset, with fontTools, to
every Han, kana and Hangul character found in the upstream prompt sets (UPSTREAM, the pinned mirror)
plus all hiragana, katakana and the 2,350 Hangul syllables of KS X 1001, so that every prompt-set
label renders; other CJK characters need `culturelens figures --font FILE`.
Usage: python subset_fonts.py [SRC] [UPSTREAM]
"""

import pathlib
import shutil
import sys

from fontTools import subset
from fontTools.ttLib import TTCollection

HERE = pathlib.Path(__file__).parent
SRC = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/fx")
UPSTREAM = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "/work/shared/data/upstream")
WHOLE = [
    "NotoSans-Regular.ttf",
    "NotoSansArabic-Regular.ttf",
    "NotoSansHebrew-Regular.ttf",
    "NotoSansDevanagari-Regular.ttf",
    "NotoSansEthiopic-Regular.ttf",
]


def is_cjk(cp):
    return (
        0x3000 <= cp <= 0x30FF
        or 0x3400 <= cp <= 0x9FFF
        or 0xAC00 <= cp <= 0xD7A3
        or 0x1100 <= cp <= 0x11FF
        or 0x3130 <= cp <= 0x318F
        or 0xFF00 <= cp <= 0xFFEF
    )


def ksx1001_hangul():
    out = set()
    for lead in range(0xB0, 0xC9):
        for trail in range(0xA1, 0xFF):
            try:
                out.add(ord(bytes([lead, trail]).decode("euc_kr")))
            except UnicodeDecodeError:
                pass
    return out


def main():
    for name in WHOLE:
        shutil.copyfile(SRC / "usr/share/fonts/truetype/noto" / name, HERE / name)
    chars = set(range(0x3040, 0x3100)) | ksx1001_hangul() | set(range(0x3000, 0x3040)) | set(range(0xFF01, 0xFF5F))
    for path in sorted(UPSTREAM.rglob("*")):
        if path.is_file() and path.suffix in {".csv", ".json", ".txt", ".tsv", ".md"}:
            chars |= {ord(c) for c in path.read_text(encoding="utf-8", errors="ignore") if is_cjk(ord(c))}
    collection = TTCollection(SRC / "usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
    font = next(f for f in collection.fonts if "SC" in f["name"].getDebugName(1))
    options = subset.Options()
    options.name_IDs = ["*"]
    options.layout_features = ["*"]
    sub = subset.Subsetter(options)
    sub.populate(unicodes=sorted(chars))
    sub.subset(font)
    font.save(HERE / "NotoSansCJKsc-Subset.otf")
    print(len(chars), "CJK code points")


main()
