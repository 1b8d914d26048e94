//! Which outputs share a reference vector and which share a joint score: integer group ids built
//! on the host from the metadata columns, before any tensor work.
//!
//! - Surface reference `sur_l` (SoS paper §4.1): all outputs prompted in language `l`.
//! - Semantic reference `sem_c`: all outputs that target culture `c`.
//! - Both are pooled across all models by default ([`Pooling::All`], paper §4.1) or computed per
//!   model ([`Pooling::PerModel`]). When a `layer` column is given, references are always computed
//!   per (model, layer) (paper §5.1: "separately for each layer and model").
//! - A joint score cell is one (model, [layer,] language, culture) triple.

use std::collections::HashMap;

use culturelens_table::Interned;
use rustc_hash::FxBuildHasher;

/// How reference vectors are pooled across models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooling {
    /// One `sur_l`/`sem_c` from the outputs of all models (paper §4.1, the default).
    #[default]
    All,
    /// One `sur_l`/`sem_c` per model.
    PerModel,
}

/// The metadata columns SoS reads, one value per output. `layer` and `person` are optional.
#[derive(Debug, Clone, Copy)]
pub struct SosColumns<'a> {
    pub model: &'a [String],
    pub language: &'a [String],
    pub culture: &'a [String],
    pub layer: Option<&'a [String]>,
    pub person: Option<&'a [String]>,
}

/// [`SosColumns`] already interned ([`culturelens_table::Interned`]): what [`SosLayout`] is built
/// from. A caller holding its columns interned (the Python package) skips the strings.
#[derive(Debug, Clone, Copy)]
pub struct SosInterned<'a> {
    pub model: &'a Interned,
    pub language: &'a Interned,
    pub culture: &'a Interned,
    pub layer: Option<&'a Interned>,
    pub person: Option<&'a Interned>,
}

/// A joint-score cell: one (model, layer, language, culture) combination.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    pub model: String,
    /// `None` when the table has no `layer` column.
    pub layer: Option<String>,
    pub language: String,
    pub culture: String,
}

/// A problem with the metadata that makes SoS undefined; `row` is the 0-based data row.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LayoutError {
    #[error("row {row}, column {column}: empty value (every output needs a {column})")]
    EmptyValue { row: usize, column: &'static str },
    #[error("column {column} has {len} values but there are {expected} outputs")]
    Length { column: &'static str, len: usize, expected: usize },
    #[error("no outputs to score")]
    Empty,
}

/// Group ids for every output plus the names behind them.
#[derive(Debug, Clone, PartialEq)]
pub struct SosLayout {
    pub pooling: Pooling,
    pub has_layer: bool,
    /// Surface-reference group of each output.
    pub sur_group: Vec<u32>,
    /// Semantic-reference group of each output.
    pub sem_group: Vec<u32>,
    /// Human-readable key of each surface group (e.g. `de` or `SD21/layer 4/de`).
    pub sur_names: Vec<String>,
    /// Human-readable key of each semantic group.
    pub sem_names: Vec<String>,
    /// Reference pair of each output: its (surface group, semantic group) combination. All outputs
    /// of a pair share `sem_c − sur_l`, so the device scatters and gathers once per pair.
    pub pair: Vec<u32>,
    /// Surface group of each pair.
    pub pair_sur: Vec<u32>,
    /// Semantic group of each pair.
    pub pair_sem: Vec<u32>,
    /// Joint-score cell of each output.
    pub cell: Vec<u32>,
    /// The cells, sorted by (model, layer, language, culture).
    pub cells: Vec<Cell>,
    /// Person term of each output, when the table has a `person` column.
    pub person: Option<Interned>,
}

impl SosLayout {
    /// Builds the groups from the metadata columns; every value must be non-empty.
    pub fn new(cols: SosColumns<'_>, pooling: Pooling) -> Result<SosLayout, LayoutError> {
        let intern = |c: &[String]| Interned::new(c.iter().map(String::as_str));
        let interned = |c: Option<&[String]>| c.map(intern);
        let (model, language, culture) = (intern(cols.model), intern(cols.language), intern(cols.culture));
        let (layer, person) = (interned(cols.layer), interned(cols.person));
        let cols = SosInterned {
            model: &model,
            language: &language,
            culture: &culture,
            layer: layer.as_ref(),
            person: person.as_ref(),
        };
        SosLayout::from_interned(cols, pooling)
    }

    /// [`SosLayout::new`] from interned columns: the same layout and errors.
    pub fn from_interned(cols: SosInterned<'_>, pooling: Pooling) -> Result<SosLayout, LayoutError> {
        let n = cols.model.len();
        if n == 0 {
            return Err(LayoutError::Empty);
        }
        let mut named: Vec<(&'static str, &Interned)> =
            vec![("model", cols.model), ("language", cols.language), ("culture", cols.culture)];
        if let Some(layer) = cols.layer {
            named.push(("layer", layer));
        }
        if let Some(person) = cols.person {
            named.push(("person", person));
        }
        for (column, values) in &named {
            if values.len() != n {
                return Err(LayoutError::Length { column, len: values.len(), expected: n });
            }
            if let Some(row) = values.first_blank() {
                return Err(LayoutError::EmptyValue { row, column });
            }
        }
        let (model, lang, cult) = (cols.model, cols.language, cols.culture);
        let count = |c: &Interned| c.values().len() as u128;
        let (model_id, lang_id, cult_id) = (model.ids(), lang.ids(), cult.ids());
        // Without a layer column every output is in one layer.
        let layers = cols.layer.map_or(1, count);
        let layer_id = |i: usize| cols.layer.map_or(0, |l| l.ids()[i] as u128);
        // References are per model when asked, and always per (model, layer) when layers exist.
        let scoped = pooling == Pooling::PerModel || cols.layer.is_some();
        let scopes = if scoped { count(model) * layers } else { 1 };
        let scope = |i: usize| if scoped { model_id[i] as u128 * layers + layer_id(i) } else { 0 };
        let scope_name = |i: usize| match (cols.layer, scoped) {
            (Some(l), _) => format!("{}/layer {}/", model.get(i), l.get(i)),
            (None, true) => format!("{}/", model.get(i)),
            (None, false) => String::new(),
        };
        let keys = |ids: &[u32], k: u128| {
            let keys = (0..n).map(move |i| scope(i) * k + ids[i] as u128);
            intern_keys(keys, scopes * k)
        };
        let (sur_group, sur_first) = keys(lang_id, count(lang));
        let (sem_group, sem_first) = keys(cult_id, count(cult));
        let sur_names = sur_first.iter().map(|&i| format!("{}{}", scope_name(i), lang.get(i))).collect();
        let sem_names = sem_first.iter().map(|&i| format!("{}{}", scope_name(i), cult.get(i))).collect();

        let sems = sem_first.len() as u128;
        let pair_keys = (0..n).map(|i| sur_group[i] as u128 * sems + sem_group[i] as u128);
        let (pair, pair_first) = intern_keys(pair_keys, sur_first.len() as u128 * sems);
        let pair_sur = pair_first.iter().map(|&i| sur_group[i]).collect();
        let pair_sem = pair_first.iter().map(|&i| sem_group[i]).collect();

        // Cells sorted by (model, layer, language, culture) strings.
        let cell_keys = (0..n).map(|i| {
            ((model_id[i] as u128 * layers + layer_id(i)) * count(lang) + lang_id[i] as u128) * count(cult)
                + cult_id[i] as u128
        });
        let cell_space = count(model) * layers * count(lang) * count(cult);
        let (cell_unsorted, cell_first) = intern_keys(cell_keys, cell_space);
        let cell_of = |i: usize| Cell {
            model: model.get(i).to_owned(),
            layer: cols.layer.map(|l| l.get(i).to_owned()),
            language: lang.get(i).to_owned(),
            culture: cult.get(i).to_owned(),
        };
        let mut order: Vec<(Cell, u32)> =
            cell_first.iter().enumerate().map(|(id, &i)| (cell_of(i), id as u32)).collect();
        order.sort();
        let mut rank = vec![0u32; order.len()];
        for (sorted_pos, (_, id)) in order.iter().enumerate() {
            rank[*id as usize] = sorted_pos as u32;
        }
        let cell = cell_unsorted.iter().map(|c| rank[*c as usize]).collect();
        let cells = order.into_iter().map(|(c, _)| c).collect();

        Ok(SosLayout {
            pooling,
            has_layer: cols.layer.is_some(),
            sur_group,
            sem_group,
            sur_names,
            sem_names,
            pair,
            pair_sur,
            pair_sem,
            cell,
            cells,
            person: cols.person.cloned(),
        })
    }

    /// The layout of the table made of the outputs `rows` (in that order, repeats allowed): the
    /// same groups, pairs and cells, each output keeping its own. A bootstrap resample that draws
    /// outputs within cells is such a table (every cell, hence every group, stays non-empty).
    pub fn select(&self, rows: &[u32]) -> SosLayout {
        let pick = |ids: &[u32]| rows.iter().map(|&r| ids[r as usize]).collect::<Vec<u32>>();
        SosLayout {
            pooling: self.pooling,
            has_layer: self.has_layer,
            sur_group: pick(&self.sur_group),
            sem_group: pick(&self.sem_group),
            sur_names: self.sur_names.clone(),
            sem_names: self.sem_names.clone(),
            pair: pick(&self.pair),
            pair_sur: self.pair_sur.clone(),
            pair_sem: self.pair_sem.clone(),
            cell: pick(&self.cell),
            cells: self.cells.clone(),
            person: self.person.as_ref().map(|p| p.select(rows.iter().map(|&r| r as usize))),
        }
    }

    /// The rows of every cell, in row order (cells in [`SosLayout::cells`] order).
    pub fn cell_rows(&self) -> Vec<Vec<u32>> {
        rows_of(&self.cell, self.cells.len())
    }

    /// The rows of every reference pair, in row order (pairs in id order).
    pub fn pair_rows(&self) -> Vec<Vec<u32>> {
        rows_of(&self.pair, self.pair_sur.len())
    }

    /// Number of outputs.
    pub fn len(&self) -> usize {
        self.cell.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cell.is_empty()
    }

    /// Number of outputs in each surface and semantic group.
    pub fn group_counts(&self) -> (Vec<usize>, Vec<usize>) {
        let count = |groups: &[u32], k: usize| {
            let mut c = vec![0usize; k];
            groups.iter().for_each(|g| c[*g as usize] += 1);
            c
        };
        (count(&self.sur_group, self.sur_names.len()), count(&self.sem_group, self.sem_names.len()))
    }
}

/// The rows of each of the `count` ids of `ids` (one id per row), in row order.
fn rows_of(ids: &[u32], count: usize) -> Vec<Vec<u32>> {
    let mut rows = vec![Vec::new(); count];
    for (row, &id) in ids.iter().enumerate() {
        rows[id as usize].push(row as u32);
    }
    rows
}

/// Assigns dense ids to integer keys below `space` (products of counts of distinct values: u128
/// cannot overflow) in order of first appearance; returns each
/// row's id and the first row of every id. A key equal to the row before's reuses its id; the
/// others are looked up in a table of `space` slots when that is small (at most a few per row),
/// else hashed.
fn intern_keys(keys: impl Iterator<Item = u128>, space: u128) -> (Vec<u32>, Vec<usize>) {
    const NONE: u32 = u32::MAX;
    let (rows, _) = keys.size_hint();
    let dense = space <= (4 * rows as u128).max(1 << 16);
    let mut slots: Vec<u32> = if dense { vec![NONE; space as usize] } else { Vec::new() };
    let mut hashed: HashMap<u128, u32, FxBuildHasher> = HashMap::default();
    let mut first = Vec::new();
    let mut last = None;
    let groups = keys
        .enumerate()
        .map(|(row, k)| match last {
            Some((key, id)) if key == k => id,
            _ => {
                let mut new = || {
                    first.push(row);
                    (first.len() - 1) as u32
                };
                let id = if dense {
                    let slot = &mut slots[k as usize];
                    if *slot == NONE {
                        *slot = new();
                    }
                    *slot
                } else {
                    *hashed.entry(k).or_insert_with(new)
                };
                last = Some((k, id));
                id
            }
        })
        .collect();
    (groups, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn keys_intern_alike_through_the_slot_table_and_the_hash() {
        // Runs, repeats after a gap and a key far from the others; first-appearance ids.
        let keys = [7u128, 7, 3, 3, 7, 9, 3, 1 << 20, 9];
        let dense = intern_keys(keys.iter().copied(), 1 << 21);
        let hashed = intern_keys(keys.iter().copied(), u128::MAX);
        assert_eq!(dense, (vec![0, 0, 1, 1, 0, 2, 1, 3, 2], vec![0, 2, 5, 7]));
        assert_eq!(hashed, dense);
    }

    #[test]
    fn interned_columns_give_the_strings_layout() {
        let col = |v: &[&str]| Interned::new(v.iter().copied());
        let (model, language, culture) = (s(&["A", "B", "A"]), s(&["en", "de", "de"]), s(&["X", "X", "Y"]));
        let (layer, person) = (s(&["1", "2", "1"]), s(&["w", "m", "w"]));
        let cols = SosColumns {
            model: &model,
            language: &language,
            culture: &culture,
            layer: Some(&layer),
            person: Some(&person),
        };
        let (m, l, c, y, p) = (
            col(&["A", "B", "A"]),
            col(&["en", "de", "de"]),
            col(&["X", "X", "Y"]),
            col(&["1", "2", "1"]),
            col(&["w", "m", "w"]),
        );
        let interned =
            SosInterned { model: &m, language: &l, culture: &c, layer: Some(&y), person: Some(&p) };
        for pooling in [Pooling::All, Pooling::PerModel] {
            assert_eq!(SosLayout::from_interned(interned, pooling), SosLayout::new(cols, pooling));
        }
        let short = col(&["en", "de"]);
        let err = SosLayout::from_interned(SosInterned { language: &short, ..interned }, Pooling::All);
        assert_eq!(err, Err(LayoutError::Length { column: "language", len: 2, expected: 3 }));
    }

    #[test]
    fn pooled_per_model_and_per_layer_groups() {
        let model = s(&["A", "A", "B", "B"]);
        let language = s(&["en", "de", "en", "de"]);
        let culture = s(&["X", "X", "Y", "X"]);
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let all = SosLayout::new(cols, Pooling::All).unwrap();
        assert_eq!(all.sur_group, [0, 1, 0, 1]);
        assert_eq!(all.sem_group, [0, 0, 1, 0]);
        assert_eq!(all.cells.len(), 4);
        assert_eq!(all.pair, [0, 1, 2, 1]);
        assert_eq!(
            (all.pair_sur.as_slice(), all.pair_sem.as_slice()),
            ([0, 1, 0].as_slice(), [0, 0, 1].as_slice())
        );
        let per = SosLayout::new(cols, Pooling::PerModel).unwrap();
        assert_eq!(per.sur_group, [0, 1, 2, 3]);
        assert_eq!(per.sem_names, ["A/X", "B/Y", "B/X"]);
        let layer = s(&["4", "4", "4", "8"]);
        let with_layer = SosLayout::new(SosColumns { layer: Some(&layer), ..cols }, Pooling::All).unwrap();
        assert_eq!(with_layer.sur_names, ["A/layer 4/en", "A/layer 4/de", "B/layer 4/en", "B/layer 8/de"]);
    }

    #[test]
    fn select_keeps_groups_pairs_and_cells() {
        let model = s(&["A", "A", "B", "B"]);
        let language = s(&["en", "de", "en", "de"]);
        let culture = s(&["X", "X", "Y", "X"]);
        let person = s(&["w", "m", "w", "m"]);
        let cols = SosColumns {
            model: &model,
            language: &language,
            culture: &culture,
            layer: None,
            person: Some(&person),
        };
        let layout = SosLayout::new(cols, Pooling::All).unwrap();
        assert_eq!(layout.select(&[0, 1, 2, 3]), layout);
        let picked = layout.select(&[3, 3, 0]);
        assert_eq!(picked.cell, [layout.cell[3], layout.cell[3], layout.cell[0]]);
        assert_eq!(picked.pair, [1, 1, 0]);
        assert_eq!(picked.person.map(|p| p.cells()), Some(s(&["m", "m", "w"])));
        assert_eq!((picked.cells.len(), picked.pair_sur.len()), (layout.cells.len(), layout.pair_sur.len()));
        assert_eq!(layout.cell_rows().concat().len(), 4);
    }

    #[test]
    fn empty_values_are_rejected_with_row_and_column() {
        let model = s(&["A", "A"]);
        let language = s(&["en", " "]);
        let culture = s(&["X", "Y"]);
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let err = SosLayout::new(cols, Pooling::All).unwrap_err();
        assert_eq!(err, LayoutError::EmptyValue { row: 1, column: "language" });
    }
}
