//! `--shard K/N`: shard K (1-based) of N owns a contiguous range of the items, so the shards'
//! outputs concatenated in order `1/N, 2/N, …, N/N` give exactly the whole run's rows, and the
//! split depends only on the number of items (the same on every machine of a cluster).

use std::fmt;
use std::ops::Range;

/// One shard of a run: `k` of `n`, `1 <= k <= n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    k: usize,
    n: usize,
}

impl Shard {
    /// Parses `K/N` (the clap value parser of every `--shard` flag).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (k, n) = s.split_once('/').ok_or("expected K/N, e.g. 2/8")?;
        let k: usize = k.trim().parse().map_err(|_| format!("K in `{s}` is not a number"))?;
        let n: usize = n.trim().parse().map_err(|_| format!("N in `{s}` is not a number"))?;
        if n == 0 || k == 0 || k > n {
            return Err(format!("shard `{s}` needs 1 <= K <= N"));
        }
        Ok(Self { k, n })
    }

    /// K, this shard's 1-based index.
    pub fn index(self) -> usize {
        self.k
    }

    /// N, the number of shards of the run.
    pub fn count(self) -> usize {
        self.n
    }

    /// The items `[(k-1)·len/n, k·len/n)` this shard owns out of `len`.
    pub fn range(self, len: usize) -> Range<usize> {
        (self.k - 1) * len / self.n..self.k * len / self.n
    }

    /// The items of `shard` out of `len`, or all of them without `--shard`.
    pub fn items(shard: Option<Self>, len: usize) -> Range<usize> {
        shard.map_or(0..len, |s| s.range(len))
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_item_once_in_order() {
        for len in [0, 1, 2, 7, 10, 101] {
            for n in 1..=5 {
                let all: Vec<usize> =
                    (1..=n).flat_map(|k| Shard::parse(&format!("{k}/{n}")).unwrap().range(len)).collect();
                assert_eq!(all, (0..len).collect::<Vec<_>>(), "{len} items in {n} shards");
            }
        }
        // Contiguous and balanced: 10 items in 3 shards are 3, 3, 4 (hand-computed k·10/3).
        let sizes: Vec<usize> = (1..=3).map(|k| Shard { k, n: 3 }.range(10).len()).collect();
        assert_eq!(sizes, [3, 3, 4]);
        assert_eq!(Shard::items(None, 4), 0..4);
    }

    #[test]
    fn shard_specs_parse_and_print() {
        assert_eq!(Shard::parse("2/8"), Ok(Shard { k: 2, n: 8 }));
        assert_eq!(Shard::parse(" 2 / 8 ").unwrap().to_string(), "2/8");
        assert_eq!(Shard::parse("0/8").unwrap_err(), "shard `0/8` needs 1 <= K <= N");
        assert_eq!(Shard::parse("9/8").unwrap_err(), "shard `9/8` needs 1 <= K <= N");
        assert_eq!(Shard::parse("1/0").unwrap_err(), "shard `1/0` needs 1 <= K <= N");
        assert_eq!(Shard::parse("x").unwrap_err(), "expected K/N, e.g. 2/8");
        assert_eq!(Shard::parse("a/2").unwrap_err(), "K in `a/2` is not a number");
        assert_eq!(Shard::parse("1/b").unwrap_err(), "N in `1/b` is not a number");
    }
}
