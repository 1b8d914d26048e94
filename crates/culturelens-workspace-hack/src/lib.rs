//! No code. This crate's manifest asks for the features that the workspace's test build gives
//! some third-party crates, so that maturin's build of the Python wheel (culturelens-py alone)
//! reuses the test build's compiled dependencies; `scripts/workspace_hack.py` writes the list.
