//! Long runs over a list of items (images to embed; later, prompts to generate), with the
//! semantics every such command shares:
//!
//! - [`shard`]: `--shard K/N` gives this process a deterministic, contiguous slice of the
//!   items, so the N shards' outputs concatenated in order are the whole run's output;
//! - [`resume`]: finished items are appended to `OUT.resume` as they complete, and a rerun
//!   skips them; an item whose record is not whole in the log (the process died while writing
//!   it) is never taken as finished. A command whose items are files writes each file
//!   atomically first and logs it after, so a logged item's file is always complete;
//! - [`part`]: a sharded run's part file (`OUT.part.json`), which `culturelens merge` reads to
//!   join the shards into exactly the one-run output and to refuse shards that do not belong
//!   together;
//! - [`progress`]: the bar with the items' rate and ETA, counting resumed items as done.

pub mod part;
pub mod progress;
pub mod resume;
pub mod shard;
