//! Reading the CSV files of the prompt sets (upstream files and the user's): the header row, then
//! the records with their 1-based line numbers. Every failure is a [`PromptError`] naming the file
//! and the line (and the column, for a missing header name).

use csv::StringRecord;
use culturelens_table::Location;

use crate::error::PromptError;

/// A CSV file being read: its header is read on opening, its records lazily.
pub(crate) struct CsvFile<'a> {
    at: Location,
    reader: csv::Reader<&'a [u8]>,
    pub header: StringRecord,
}

impl<'a> CsvFile<'a> {
    /// Reads the header of `bytes` (every record must then have the header's length); `at` names
    /// the file in errors.
    pub fn open(bytes: &'a [u8], at: Location) -> Result<Self, PromptError> {
        let mut reader = csv::ReaderBuilder::new().from_reader(bytes);
        let header =
            reader.headers().map_err(|e| PromptError::malformed(at.clone().line(1), e.to_string()))?.clone();
        Ok(Self { at, reader, header })
    }

    /// The position of header column `name` (compared after trimming), or an error naming it.
    pub fn column(&self, name: &str) -> Result<usize, PromptError> {
        self.header.iter().position(|h| h.trim() == name).ok_or_else(|| {
            PromptError::malformed(
                self.at.clone().line(1).column(name),
                "required column is missing from the header",
            )
        })
    }

    /// The records in file order, each with its line number.
    pub fn records(&mut self) -> impl Iterator<Item = Result<(u64, StringRecord), PromptError>> + '_ {
        let at = &self.at;
        self.reader.records().map(move |record| {
            let record = record.map_err(|e| {
                PromptError::malformed(at.clone().line(e.position().map_or(0, |p| p.line())), e.to_string())
            })?;
            Ok((record.position().map_or(0, |p| p.line()), record))
        })
    }
}
