//! The outputs of `culturelens vendi` (CUBE Def. 5.1, Eq. 2–3):
//!
//! | file | schema | content |
//! |------|--------|---------|
//! | `--out` JSON | [`VendiFile`] | one [`VendiScores`] object, or with `--group-by` an object keyed by group value holding one each |
//! | `--csv` CSV | [`Table`] | the `--group-by` columns, then `n,q,vs,[vs_lo,vs_hi,]qvs,[qvs_lo,qvs_hi,]qvs_norm,[qvs_norm_lo,qvs_norm_hi,][intdiv,][batch_size,repeats,vs_sd,qvs_sd,qvs_norm_sd,[intdiv_sd]]`: one row per group |
//!
//! The JSON is pretty with keys sorted (serde_json's `Value` order), no final newline; both hold
//! f64 in full precision and the order `q = ∞` as `inf` ([`Order`]); an undefined `intdiv` is
//! JSON `null` and an empty CSV cell. With `--ci`, the JSON has `vs_ci`, `qvs_ci` and
//! `qvs_norm_ci` (`{"lo", "hi"}`, [`crate::ci`]) beside the scores and the CSV the `_lo`, `_hi`
//! columns (empty where an interval is undefined). The scores themselves are
//! `culturelens_compute::vendi`.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::ci::{Interval, bound_cells, with_bounds};
use crate::csv_file::{Cells, CsvSchema, header_error};
use crate::error::SchemaError;

/// The output a [`VendiFile`] is.
pub const SOURCE: &str = "culturelens vendi --out";
/// The columns of a [`Table`] after its group columns: the scores of Def. 5.1 and Eq. 2–3.
pub const SCORE_COLUMNS: [&str; 5] = ["n", "q", "vs", "qvs", "qvs_norm"];
/// The column of `--intdiv`.
pub const INTDIV: &str = "intdiv";
/// The columns of the CUBE batch protocol (`--protocol-batch`).
pub const PROTOCOL_COLUMNS: [&str; 5] = ["batch_size", "repeats", "vs_sd", "qvs_sd", "qvs_norm_sd"];
/// The protocol's spread of `intdiv`.
pub const INTDIV_SD: &str = "intdiv_sd";

/// The order `q ≥ 0` of a Vendi score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Order {
    Finite(f64),
    Infinity,
}

impl Order {
    /// Parses `inf`/`infinity` or a non-negative number.
    pub fn parse(text: &str) -> Result<Order, String> {
        let t = text.trim().to_ascii_lowercase();
        if t == "inf" || t == "infinity" || t == "+inf" {
            return Ok(Order::Infinity);
        }
        match t.parse::<f64>() {
            Ok(q) if q.is_infinite() && q > 0.0 => Ok(Order::Infinity),
            Ok(q) if q >= 0.0 && q.is_finite() => Ok(Order::Finite(q)),
            _ => Err(format!("order q must be a number >= 0 or `inf`, got `{text}`")),
        }
    }
}

/// `q = ∞` is serialised as the string `"inf"` (JSON has no infinity), finite `q` as a number.
impl Serialize for Order {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Order::Finite(q) => s.serialize_f64(*q),
            Order::Infinity => s.serialize_str("inf"),
        }
    }
}

/// A number `≥ 0`, or a string [`Order::parse`] takes.
impl<'de> Deserialize<'de> for Order {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Order, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(f64),
            Text(String),
        }
        let order = match Written::deserialize(d)? {
            Written::Number(q) => Order::parse(&q.to_string()),
            Written::Text(t) => Order::parse(&t),
        };
        order.map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Order::Finite(q) => write!(f, "{q}"),
            Order::Infinity => write!(f, "inf"),
        }
    }
}

/// `Some(value)` for a key that is present, `null` included, so that `Option<Option<T>>` tells
/// a missing key (`None`) from an undefined value (`Some(None)`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The Vendi numbers of one collection (or group).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VendiScores {
    /// Items in the collection (the group size under the protocol).
    pub n: usize,
    pub q: Order,
    /// `VS_q`, the mean over batches under the protocol.
    pub vs: f64,
    /// `qVS_q = mean(quality) · VS_q` (Eq. 2).
    pub qvs: f64,
    /// `qVS_q / N` (Eq. 3; `/ batch size` under the protocol).
    pub qvs_norm: f64,
    /// `--intdiv`: 1 − mean similarity of distinct items; `Some(None)` (`null`) where undefined
    /// (a single item), `None` (no key) without `--intdiv`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub intdiv: Option<Option<f64>>,
    /// The CUBE batch protocol's settings and spreads (`--protocol-batch`).
    #[serde(flatten)]
    pub protocol: Option<Protocol>,
    /// With `--ci`: the bootstrap intervals of `vs`, `qvs` and `qvs_norm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_ci: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qvs_ci: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qvs_norm_ci: Option<Interval>,
}

/// What the CUBE batch protocol (§5.2, App. J) adds: the batches and the population standard
/// deviations over them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Protocol {
    /// Items per batch: `min(--protocol-batch, group size)`.
    pub batch_size: usize,
    pub repeats: usize,
    pub vs_sd: f64,
    pub qvs_sd: f64,
    pub qvs_norm_sd: f64,
    /// As [`VendiScores::intdiv`].
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub intdiv_sd: Option<Option<f64>>,
}

/// A whole `vendi --out` file.
#[derive(Debug, Clone, PartialEq)]
pub enum VendiFile {
    /// Without `--group-by`.
    Whole(VendiScores),
    /// With `--group-by`: per group value, in value order.
    Groups(BTreeMap<String, VendiScores>),
}

impl VendiFile {
    /// The scores by group; one group named `all` for a [`VendiFile::Whole`] file.
    pub fn groups(&self) -> Vec<(String, VendiScores)> {
        match self {
            VendiFile::Whole(s) => vec![("all".to_string(), *s)],
            VendiFile::Groups(g) => g.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        }
    }
}

/// Writes the file as `vendi --out` does (keys sorted, pretty, no final newline).
pub fn write(w: impl Write, file: &VendiFile) -> std::io::Result<()> {
    let value = match file {
        VendiFile::Whole(s) => serde_json::to_value(s),
        VendiFile::Groups(g) => serde_json::to_value(g),
    }
    .map_err(std::io::Error::from)?;
    serde_json::to_writer_pretty(w, &value).map_err(std::io::Error::from)
}

/// Reads `vendi --out`: an object with a number `vs` is one collection's scores, any other
/// object a group's each (a group may be named `vs`).
pub fn read(file: &str, reader: impl Read) -> Result<VendiFile, SchemaError> {
    let bad = |e: serde_json::Error| SchemaError::new(file, format!("not a `{SOURCE}` JSON: {e}"));
    let value: serde_json::Value = serde_json::from_reader(reader).map_err(bad)?;
    if value.get("vs").is_some_and(serde_json::Value::is_number) {
        return serde_json::from_value(value).map(VendiFile::Whole).map_err(bad);
    }
    let serde_json::Value::Object(groups) = value else {
        return Err(SchemaError::new(file, format!("not a `{SOURCE}` JSON: not an object")));
    };
    groups
        .into_iter()
        .map(|(group, v)| {
            serde_json::from_value(v)
                .map(|s| (group.clone(), s))
                .map_err(|e| SchemaError::new(file, format!("not a `{SOURCE}` group: {e}")).column(group))
        })
        .collect::<Result<_, _>>()
        .map(VendiFile::Groups)
}

/// The scores as a table (`vendi --csv`): one row per group.
pub struct Table;

/// What varies between [`Table`]s: the `--group-by` columns (none without it) and whether
/// `intdiv`, the protocol's columns and the intervals (`--ci`) are there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableColumns {
    pub groups: Vec<String>,
    pub intdiv: bool,
    pub protocol: bool,
    pub ci: bool,
}

/// The scores that have intervals with `--ci`.
const WITH_CI: [&str; 3] = ["vs", "qvs", "qvs_norm"];

/// One group's scores and its values of the group columns.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRow {
    pub group: Vec<String>,
    pub scores: VendiScores,
}

/// The `--csv` table of a Vendi result file: one row per group, the `group_by` column holding its
/// value (`culturelens vendi --csv`, and the Python package's `vendi`).
pub fn table_rows(file: &VendiFile, group_by: Option<&str>, ci: bool) -> (TableColumns, Vec<TableRow>) {
    let rows: Vec<TableRow> = match file {
        VendiFile::Whole(scores) => vec![TableRow { group: vec![], scores: *scores }],
        VendiFile::Groups(groups) => groups
            .iter()
            .map(|(name, scores)| TableRow { group: vec![name.clone()], scores: *scores })
            .collect(),
    };
    let first = rows.first().map(|r| r.scores);
    let columns = TableColumns {
        groups: group_by.map(str::to_string).into_iter().collect(),
        intdiv: first.is_some_and(|s| s.intdiv.is_some()),
        protocol: first.is_some_and(|s| s.protocol.is_some()),
        ci,
    };
    (columns, rows)
}

impl TableColumns {
    /// The columns after the group columns.
    fn tail(&self) -> Vec<String> {
        let scores: Vec<String> = SCORE_COLUMNS.map(str::to_string).to_vec();
        let mut tail = with_bounds(&scores, &WITH_CI, self.ci);
        if self.intdiv {
            tail.push(INTDIV.to_string());
        }
        if self.protocol {
            tail.extend(PROTOCOL_COLUMNS.map(str::to_string));
            if self.intdiv {
                tail.push(INTDIV_SD.to_string());
            }
        }
        tail
    }
}

/// An optional number: empty when undefined.
fn cell(value: Option<f64>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

impl CsvSchema for Table {
    type Columns = TableColumns;
    type Row = TableRow;
    const SOURCE: &'static str = "culturelens vendi --csv";

    fn header(c: &TableColumns) -> Vec<String> {
        c.groups.iter().cloned().chain(c.tail()).collect()
    }

    fn columns(file: &str, header: &[String]) -> Result<TableColumns, SchemaError> {
        let start = (0..header.len())
            .find(|&i| header[i..].iter().take(3).eq(SCORE_COLUMNS[..3].iter()))
            .unwrap_or(header.len());
        let groups = header[..start].to_vec();
        (0..8)
            .map(|bits| TableColumns {
                groups: groups.clone(),
                intdiv: bits & 1 != 0,
                protocol: bits & 2 != 0,
                ci: bits & 4 != 0,
            })
            .find(|c| Self::header(c) == header)
            .ok_or_else(|| {
                let want = format!(
                    "GROUP…,n,q,vs,[vs_lo,vs_hi,]qvs,[qvs_lo,qvs_hi,]qvs_norm,[qvs_norm_lo,qvs_norm_hi,][{INTDIV},][{},[{INTDIV_SD}]]",
                    PROTOCOL_COLUMNS.join(",")
                );
                header_error(file, header, &want, Self::SOURCE)
            })
    }

    fn record(c: &TableColumns, row: &TableRow) -> Vec<String> {
        let s = &row.scores;
        let mut cells = row.group.clone();
        cells.extend([s.n.to_string(), s.q.to_string()]);
        for (score, interval) in [(s.vs, s.vs_ci), (s.qvs, s.qvs_ci), (s.qvs_norm, s.qvs_norm_ci)] {
            cells.push(score.to_string());
            if c.ci {
                cells.extend(bound_cells(interval));
            }
        }
        if c.intdiv {
            cells.push(cell(s.intdiv.flatten()));
        }
        if c.protocol {
            let p = s.protocol.expect("every row of a protocol table has the protocol's numbers");
            cells.extend([
                p.batch_size.to_string(),
                p.repeats.to_string(),
                p.vs_sd.to_string(),
                p.qvs_sd.to_string(),
                p.qvs_norm_sd.to_string(),
            ]);
            if c.intdiv {
                cells.push(cell(p.intdiv_sd.flatten()));
            }
        }
        cells
    }

    fn parse(c: &TableColumns, cells: &Cells<'_>) -> Result<TableRow, SchemaError> {
        let g = c.groups.len();
        let optional = |k: usize| -> Result<Option<f64>, SchemaError> {
            if cells.text(k).trim().is_empty() { Ok(None) } else { cells.finite(k).map(Some) }
        };
        let q = Order::parse(cells.text(g + 1)).map_err(|e| cells.error(g + 1, e))?;
        // vs, qvs and qvs_norm, each followed by its bounds with `--ci`.
        let stride = if c.ci { 3 } else { 1 };
        let score = |i: usize| -> Result<(f64, Option<Interval>), SchemaError> {
            let k = g + 2 + i * stride;
            Ok((cells.finite(k)?, if c.ci { cells.interval(k + 1)? } else { None }))
        };
        let [(vs, vs_ci), (qvs, qvs_ci), (qvs_norm, qvs_norm_ci)] = [score(0)?, score(1)?, score(2)?];
        let after = g + 2 + 3 * stride;
        let intdiv = if c.intdiv { Some(optional(after)?) } else { None };
        let p = after + usize::from(c.intdiv);
        let protocol = if c.protocol {
            Some(Protocol {
                batch_size: cells.count(p)?,
                repeats: cells.count(p + 1)?,
                vs_sd: cells.finite(p + 2)?,
                qvs_sd: cells.finite(p + 3)?,
                qvs_norm_sd: cells.finite(p + 4)?,
                intdiv_sd: if c.intdiv { Some(optional(p + 5)?) } else { None },
            })
        } else {
            None
        };
        Ok(TableRow {
            group: (0..g).map(|k| cells.string(k)).collect(),
            scores: VendiScores {
                n: cells.count(g)?,
                q,
                vs,
                qvs,
                qvs_norm,
                intdiv,
                protocol,
                vs_ci,
                qvs_ci,
                qvs_norm_ci,
            },
        })
    }
}
