//! The host plan of the fused SoS kernels (`kernels.rs`): which rows each cube reads.
//!
//! Outputs are sorted by (block, reference pair), in output order within a pair, and each pair's
//! outputs in a block are cut into segments of at most [`SEGMENT_ROWS`]; each reference group
//! sums its segments, in levels of at most [`GROUP_MEMBERS`] rows per sum.

// Without the `cube` feature only the tests walk the plan.
#![cfg_attr(not(feature = "cube"), allow(dead_code))]

use burn::tensor::Tensor;

use super::layout::SosLayout;

/// Most outputs of one segment: small enough that a pair with many outputs still spreads over
/// many cubes, large enough that the paper's pairs (63 outputs each) take one cube.
pub const SEGMENT_ROWS: usize = 64;

/// One block's share of the plan. Segment `s` covers entries `seg_start[s]..seg_start[s + 1]`;
/// entry `k` is the block's row `src[k]`, whose score goes to position `dst[k]` of the result.
/// All entries of a segment share one reference pair: surface group `seg_sur[s]`, semantic group
/// `seg_sem[s]`. Entries of a segment are in output order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockPlan {
    pub(crate) seg_start: Vec<u32>,
    pub(crate) seg_sur: Vec<u32>,
    pub(crate) seg_sem: Vec<u32>,
    pub(crate) src: Vec<u32>,
    pub(crate) dst: Vec<u32>,
}

impl BlockPlan {
    /// Number of segments.
    pub fn segments(&self) -> usize {
        self.seg_sur.len()
    }
}

/// Most rows one cube of the references pass sums: it loops over them a few at a time, and a loop
/// stays short (Mesa's lavapipe stops any shader loop after 65,535 iterations; on a GPU a long
/// serial loop is slow). A group with more segments is summed in levels of partial sums.
pub const GROUP_MEMBERS: usize = 1024;

/// Rows summed by index: output row `g` is the sum of input rows `members[start[g]..start[g + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSums {
    pub(crate) start: Vec<u32>,
    pub(crate) members: Vec<u32>,
}

impl RowSums {
    /// Number of output rows.
    pub fn rows(&self) -> usize {
        self.start.len() - 1
    }

    fn new(lists: &[Vec<u32>]) -> RowSums {
        let mut start = vec![0u32];
        let mut members = Vec::new();
        for list in lists {
            members.extend_from_slice(list);
            start.push(members.len() as u32);
        }
        RowSums { start, members }
    }
}

/// The reference groups over the segments of all blocks, numbered in block order: group `g`
/// (surface groups first, then semantic groups) is the sum of its segments, computed through
/// `levels` in turn (each level sums rows of the previous one's output, the first the segment
/// sums); the last level's rows are the groups, every row summing at most [`GROUP_MEMBERS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPlan {
    pub(crate) levels: Vec<RowSums>,
}

impl GroupPlan {
    /// Number of groups (surface and semantic).
    pub fn groups(&self) -> usize {
        self.levels.last().map_or(0, RowSums::rows)
    }

    /// Levels of partial sums for `lists[g]`, the segments of group `g`.
    fn new(mut lists: Vec<Vec<u32>>) -> GroupPlan {
        let mut levels = Vec::new();
        while lists.iter().any(|list| list.len() > GROUP_MEMBERS) {
            let mut pieces: Vec<Vec<u32>> = Vec::new();
            for list in &mut lists {
                let first = pieces.len() as u32;
                pieces.extend(list.chunks(GROUP_MEMBERS).map(<[u32]>::to_vec));
                *list = (first..pieces.len() as u32).collect();
            }
            levels.push(RowSums::new(&pieces));
        }
        levels.push(RowSums::new(&lists));
        GroupPlan { levels }
    }
}

/// The whole plan: a [`BlockPlan`] for every block holding scored outputs, with its block index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) blocks: Vec<(usize, BlockPlan)>,
    pub(crate) groups: GroupPlan,
}

/// Where the rows of a table stored in row blocks lie: block `b` holds table rows
/// `start(b)..start(b + 1)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowBlocks {
    ends: Vec<usize>,
}

impl RowBlocks {
    pub(crate) fn new(blocks: &[Tensor<2>]) -> RowBlocks {
        RowBlocks::from_rows(blocks.iter().map(|b| b.dims()[0]))
    }

    pub(crate) fn from_rows(rows: impl IntoIterator<Item = usize>) -> RowBlocks {
        let ends = rows
            .into_iter()
            .scan(0, |end, r| {
                *end += r;
                Some(*end)
            })
            .collect();
        RowBlocks { ends }
    }

    /// Number of blocks.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Rows of the whole table.
    pub(crate) fn rows(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    /// First table row of `block`.
    pub(crate) fn start(&self, block: usize) -> usize {
        if block == 0 { 0 } else { self.ends[block - 1] }
    }

    /// The block of table row `row` and the row's index within it.
    pub(crate) fn locate(&self, row: usize) -> (usize, usize) {
        let block = self.ends.partition_point(|&end| end <= row);
        (block, row - self.start(block))
    }
}

impl Plan {
    /// The plan for scoring table rows `rows` (all rows for `None`) of a table stored in `blocks`,
    /// output `o` being table row `rows[o]` with pair `layout.pair[o]`.
    pub(crate) fn new(blocks: &RowBlocks, rows: Option<&[u32]>, layout: &SosLayout) -> Plan {
        let outputs = layout.len();
        let located: Vec<(usize, usize)> =
            (0..outputs).map(|o| blocks.locate(rows.map_or(o, |r| r[o] as usize))).collect();
        // Outputs by (block, pair), in output order within each: a stable sort.
        let mut order: Vec<u32> = (0..outputs as u32).collect();
        order.sort_by_key(|&o| (located[o as usize].0, layout.pair[o as usize]));

        let mut blocks: Vec<(usize, BlockPlan)> = Vec::new();
        let mut segment_pairs: Vec<u32> = Vec::new();
        for run in order.chunk_by(|&a, &b| {
            (located[a as usize].0, layout.pair[a as usize])
                == (located[b as usize].0, layout.pair[b as usize])
        }) {
            let block = located[run[0] as usize].0;
            if blocks.last().is_none_or(|(b, _)| *b != block) {
                blocks.push((block, BlockPlan { seg_start: vec![0], ..BlockPlan::default() }));
            }
            let plan = &mut blocks.last_mut().expect("pushed above").1;
            let pair = layout.pair[run[0] as usize];
            for segment in run.chunks(SEGMENT_ROWS) {
                plan.src.extend(segment.iter().map(|&o| located[o as usize].1 as u32));
                plan.dst.extend_from_slice(segment);
                plan.seg_start.push(plan.src.len() as u32);
                plan.seg_sur.push(layout.pair_sur[pair as usize]);
                plan.seg_sem.push(layout.pair_sem[pair as usize]);
                segment_pairs.push(pair);
            }
        }

        // Segments of each surface group, then of each semantic group.
        let n_sur = layout.sur_names.len();
        let mut lists = vec![Vec::new(); n_sur + layout.sem_names.len()];
        for (segment, &pair) in segment_pairs.iter().enumerate() {
            lists[layout.pair_sur[pair as usize] as usize].push(segment as u32);
            lists[n_sur + layout.pair_sem[pair as usize] as usize].push(segment as u32);
        }
        Plan { blocks, groups: GroupPlan::new(lists) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sos::{Pooling, SosColumns};

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_plan_of_a_row_subset_over_two_blocks_worked_by_hand() {
        // Outputs 0..5 are table rows 6, 0, 2, 5, 1 of blocks [0, 3) and [3, 7). Pairs (pooled):
        // en×X = 0, de×X = 1, en×Y = 2, so outputs have pairs 0, 1, 0, 2, 1.
        let (model, language, culture) = (
            strings(&["A"; 5]),
            strings(&["en", "de", "en", "en", "de"]),
            strings(&["X", "X", "X", "Y", "X"]),
        );
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let layout = SosLayout::new(cols, Pooling::All).unwrap();
        assert_eq!(layout.pair, [0, 1, 0, 2, 1]);
        let plan = Plan::new(&RowBlocks::from_rows([3, 4]), Some(&[6, 0, 2, 5, 1]), &layout);
        // Block 0 holds outputs 1, 2, 4 (rows 0, 2, 1): pair 0 = [2], pair 1 = [1, 4].
        let block0 = BlockPlan {
            seg_start: vec![0, 1, 3],
            seg_sur: vec![0, 1],
            seg_sem: vec![0, 0],
            src: vec![2, 0, 1],
            dst: vec![2, 1, 4],
        };
        // Block 1 holds outputs 0 and 3 (rows 6 and 5, local 3 and 2): pair 0 = [0], pair 2 = [3].
        let block1 = BlockPlan {
            seg_start: vec![0, 1, 2],
            seg_sur: vec![0, 0],
            seg_sem: vec![0, 1],
            src: vec![3, 2],
            dst: vec![0, 3],
        };
        assert_eq!(plan.blocks, vec![(0, block0), (1, block1)]);
        // Segments 0..4 have pairs 0, 1, 0, 2: en = {0, 2, 3}, de = {1}, X = {0, 1, 2}, Y = {3}.
        let groups = RowSums { start: vec![0, 3, 4, 7, 8], members: vec![0, 2, 3, 1, 0, 1, 2, 3] };
        assert_eq!(plan.groups, GroupPlan { levels: vec![groups] });
    }

    #[test]
    fn a_large_pair_is_cut_into_segments_and_a_large_group_into_levels() {
        let n = 150;
        let (model, language, culture) = (strings(&["A"; 150]), strings(&["en"; 150]), strings(&["X"; 150]));
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let layout = SosLayout::new(cols, Pooling::All).unwrap();
        let plan = Plan::new(&RowBlocks::from_rows([n]), None, &layout);
        let (_, block) = &plan.blocks[0];
        assert_eq!(block.seg_start, [0, SEGMENT_ROWS as u32, 2 * SEGMENT_ROWS as u32, n as u32]);
        assert_eq!(block.dst, (0..n as u32).collect::<Vec<_>>());

        let members = 2 * GROUP_MEMBERS + 452;
        let groups = GroupPlan::new(vec![(0..members as u32).collect(), vec![7]]);
        let pieces = [GROUP_MEMBERS, GROUP_MEMBERS, 452, 1];
        let starts: Vec<u32> =
            pieces.iter().scan(0, |end, &p| Some(*end + p as u32).inspect(|e| *end = *e)).collect();
        assert_eq!(groups.levels[0].start, [&[0], starts.as_slice()].concat());
        assert_eq!(groups.levels[0].members, [(0..members as u32).collect::<Vec<_>>(), vec![7]].concat());
        assert_eq!(groups.levels[1], RowSums { start: vec![0, 3, 4], members: vec![0, 1, 2, 3] });
        assert_eq!(groups.groups(), 2);
    }

    #[test]
    fn rows_are_located_in_their_blocks() {
        let blocks = RowBlocks::from_rows([2, 0, 3]);
        assert_eq!((blocks.len(), blocks.rows()), (3, 5));
        assert_eq!([0, 1, 2, 4].map(|r| blocks.locate(r)), [(0, 0), (0, 1), (2, 0), (2, 2)]);
        assert_eq!((0..=3).map(|b| blocks.start(b)).collect::<Vec<_>>(), [0, 2, 2, 5]);
    }
}
