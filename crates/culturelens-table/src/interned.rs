//! A column's cells as dense ids: each distinct value once, and for every row the id of its value.
//!
//! Ids are given in order of first appearance (the first row's value is id 0), so two tables with
//! the same cells intern to the same ids. Interning is what SoS's layout does with its columns
//! before any tensor work; a caller that already has a column's text (the Python package's joined
//! pandas columns) interns it straight from that text, without a `String` per cell.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

/// A column's distinct values and, per row, the id of its value (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Interned {
    ids: Vec<u32>,
    values: Vec<String>,
}

impl Interned {
    /// Interns `cells` in row order. A row equal to the one before reuses its id without a hash
    /// lookup (tables are usually written grouped, so most rows do).
    pub fn new<'a>(cells: impl IntoIterator<Item = &'a str>) -> Interned {
        let cells = cells.into_iter();
        let mut index: HashMap<&'a str, u32, FxBuildHasher> = HashMap::default();
        let mut values: Vec<String> = Vec::new();
        let mut ids = Vec::with_capacity(cells.size_hint().0);
        let mut last: Option<(&str, u32)> = None;
        for cell in cells {
            let id = match last {
                // Lengths first: an empty `&str`'s pointer may be dangling, and some `memcmp`s
                // (glibc's AVX-512 one) read it with a masked load, which costs a fault assist
                // each time (about 130 ns a row, measured).
                Some((value, id)) if value.len() == cell.len() && (cell.is_empty() || value == cell) => id,
                _ => {
                    let id = *index.entry(cell).or_insert_with(|| {
                        values.push(cell.to_owned());
                        (values.len() - 1) as u32
                    });
                    last = Some((cell, id));
                    id
                }
            };
            ids.push(id);
        }
        Interned { ids, values }
    }

    /// The id of every row's value.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// The distinct values, id order.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Row `row`'s value.
    pub fn get(&self, row: usize) -> &str {
        &self.values[self.ids[row] as usize]
    }

    /// Every row's value, one `String` per row.
    pub fn cells(&self) -> Vec<String> {
        self.ids.iter().map(|&id| self.values[id as usize].clone()).collect()
    }

    /// The first row whose value is blank (empty once trimmed), if any.
    pub fn first_blank(&self) -> Option<usize> {
        let blank: Vec<bool> = self.values.iter().map(|v| v.trim().is_empty()).collect();
        if !blank.contains(&true) {
            return None;
        }
        self.ids.iter().position(|&id| blank[id as usize])
    }

    /// The column made of the rows `rows` (in that order, repeats allowed). Values and their ids
    /// are kept, including any no selected row has.
    pub fn select(&self, rows: impl IntoIterator<Item = usize>) -> Interned {
        Interned { ids: rows.into_iter().map(|r| self.ids[r]).collect(), values: self.values.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_first_appearance_and_rows_keep_their_values() {
        let cells = ["de", "de", "en", "de", "fr", "en", "en"];
        let col = Interned::new(cells);
        assert_eq!(col.ids(), [0, 0, 1, 0, 2, 1, 1]);
        assert_eq!(col.values(), ["de", "en", "fr"]);
        assert_eq!(col.cells(), cells);
        assert_eq!((col.len(), col.get(4)), (7, "fr"));
        // The same cells given as owned strings intern alike.
        let owned: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
        assert_eq!(Interned::new(owned.iter().map(String::as_str)), col);
    }

    #[test]
    fn first_blank_is_the_first_blank_row_whatever_its_value() {
        assert_eq!(Interned::new(["a", "b"]).first_blank(), None);
        // Two different blank values: the row of the earlier one, not of the first interned.
        assert_eq!(Interned::new(["a", "  ", "b", ""]).first_blank(), Some(1));
        assert_eq!(Interned::new(["a", "b", " ", "", " "]).first_blank(), Some(2));
        assert_eq!(Interned::new(std::iter::empty()).first_blank(), None);
    }

    #[test]
    fn select_picks_rows_and_keeps_values() {
        let col = Interned::new(["x", "y", "z"]);
        let picked = col.select([2, 2, 0]);
        assert_eq!(picked.cells(), ["z", "z", "x"]);
        assert_eq!(picked.values(), col.values());
    }
}
