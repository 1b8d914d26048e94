//! culturelens core
