"""`culturelens.demo()` is the table `culturelens demo --write` writes, to the last bit."""

import numpy as np

import culturelens


def test_demo_is_the_cli_demo_table(demo):
    _, cli_embeddings, cli_meta = demo
    embeddings, meta = culturelens.demo()
    assert embeddings.dtype == np.float32 and embeddings.shape == (2160, 64)
    assert np.array_equal(embeddings.view(np.uint32), cli_embeddings.astype(np.float32).view(np.uint32))
    assert list(meta.columns) == list(cli_meta.columns)
    for name in meta.columns:
        assert meta[name].tolist() == cli_meta[name].tolist(), name
    print(f"demo: {embeddings.shape[0]} rows, {len(meta.columns)} columns, bit-identical to `culturelens demo --write`")
