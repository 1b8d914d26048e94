"""GPT-2's byte-to-symbol map, the base alphabet of byte-level BPE (CLIP's tokenizer and others).

transformers ships it as a private helper whose module moves between releases
(`transformers.models.clip.tokenization_clip` in 4.x, `transformers.convert_slow_tokenizer` in
5.23, neither promised),
so the scripts that build byte-level BPE tokenizers (scripts/bench/bench_generate_cpu.py,
scripts/fixtures/make_diffusion_tiny_sd*.py) take it from here instead. Standard library only;
scripts/check_requirements.py checks it against transformers' own.
"""


def bytes_to_unicode() -> dict[int, str]:
    """Every byte 0..255 -> one printable character: the printable Latin-1 bytes map to
    themselves, the others (control characters, space, 0x7F-0xA0, 0xAD) to U+0100 onwards in
    byte order. Insertion order is transformers' (the printable ones first)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))
