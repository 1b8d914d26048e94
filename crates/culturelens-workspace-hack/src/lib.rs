//! No code. This crate's manifest asks for the features that the workspace's test build gives
//! some third-party crates, so that maturin's builds of the Python wheels (culturelens-py alone)
//! reuse the test build's compiled dependencies; `scripts/workspace_hack.py` writes the list.
