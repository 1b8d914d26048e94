//! Which result files each command writes, and of which kind: how `culturelens report` knows a
//! run folder's files from their provenance manifests (`OUT.provenance.json` names the command
//! that wrote `OUT`, and its command line the command's other outputs; `DIR/provenance.json` the
//! command that wrote the folder `DIR`).

use crate::csv_file::CsvSchema;
use crate::{captions, colour, cultext2i, magbig, sos, validate, vendi};

/// The kind of a result file: which command output it is, so which schema reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ResultKind {
    SosJoint,
    SosPerImage,
    SosReport,
    /// `sos --compare-out`: paired differences between two models or languages.
    SosComparison,
    Vendi,
    /// `vendi --csv`: the scores as a table.
    VendiTable,
    Magbig,
    /// `magbig --report`: read by no other command (no schema here).
    MagbigReport,
    Cultext2i,
    Cultext2iReport,
    ColourDominant,
    ColourPalettes,
    ColourValues,
    CaptionsTerms,
    CaptionsTopTerms,
    CaptionsCoverage,
    Validation,
}

impl ResultKind {
    /// The command output as errors and messages name it (`culturelens sos --out`).
    pub fn source(self) -> &'static str {
        match self {
            ResultKind::SosJoint => sos::Joint::SOURCE,
            ResultKind::SosPerImage => sos::PerImage::SOURCE,
            ResultKind::SosReport => sos::REPORT_SOURCE,
            ResultKind::SosComparison => sos::Comparison::SOURCE,
            ResultKind::Vendi => crate::vendi::SOURCE,
            ResultKind::VendiTable => vendi::Table::SOURCE,
            ResultKind::Magbig => magbig::Magbig::SOURCE,
            ResultKind::MagbigReport => "culturelens magbig --report",
            ResultKind::Cultext2i => cultext2i::Groups::SOURCE,
            ResultKind::Cultext2iReport => cultext2i::REPORT_SOURCE,
            ResultKind::ColourDominant => colour::Dominant::SOURCE,
            ResultKind::ColourPalettes => colour::Palettes::SOURCE,
            ResultKind::ColourValues => colour::Values::SOURCE,
            ResultKind::CaptionsTerms => captions::Terms::SOURCE,
            ResultKind::CaptionsTopTerms => captions::TopTerms::SOURCE,
            ResultKind::CaptionsCoverage => captions::Coverage::SOURCE,
            ResultKind::Validation => validate::Validation::SOURCE,
        }
    }

    /// The kind of a CSV table whose header is `header`, when it is the header of exactly one
    /// kind: for a file that no provenance manifest names (a table made by hand, or copied
    /// without its manifest).
    pub fn of_header(header: &[String]) -> Option<ResultKind> {
        fn fits<S: CsvSchema>(header: &[String]) -> bool {
            S::columns("", header).is_ok()
        }
        let kinds = [
            (ResultKind::SosJoint, fits::<sos::Joint>(header)),
            (ResultKind::SosPerImage, fits::<sos::PerImage>(header)),
            (ResultKind::SosComparison, fits::<sos::Comparison>(header)),
            (ResultKind::VendiTable, fits::<vendi::Table>(header)),
            (ResultKind::Magbig, fits::<magbig::Magbig>(header)),
            (ResultKind::Cultext2i, fits::<cultext2i::Groups>(header)),
            (ResultKind::ColourDominant, fits::<colour::Dominant>(header)),
            (ResultKind::ColourPalettes, fits::<colour::Palettes>(header)),
            (ResultKind::ColourValues, fits::<colour::Values>(header)),
            (ResultKind::CaptionsTerms, fits::<captions::Terms>(header)),
            (ResultKind::CaptionsTopTerms, fits::<captions::TopTerms>(header)),
            (ResultKind::CaptionsCoverage, fits::<captions::Coverage>(header)),
            (ResultKind::Validation, fits::<validate::Validation>(header)),
        ];
        let mut matching = kinds.into_iter().filter(|(_, fits)| *fits).map(|(kind, _)| kind);
        match (matching.next(), matching.next()) {
            (Some(kind), None) => Some(kind),
            _ => None,
        }
    }
}

/// Where a command puts one of its outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The file given to this flag (`--out`, `--report`, …).
    Flag(&'static str),
    /// The file of this name in the command's output folder (the folder of its `provenance.json`).
    InFolder(&'static str),
}

/// One output of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    pub place: Place,
    pub kind: ResultKind,
}

const fn flag(flag: &'static str, kind: ResultKind) -> Output {
    Output { place: Place::Flag(flag), kind }
}

const fn in_folder(name: &'static str, kind: ResultKind) -> Output {
    Output { place: Place::InFolder(name), kind }
}

/// Per command (as its manifest's `command` names it), the result files it writes.
const OUTPUTS: &[(&str, &[Output])] = {
    use ResultKind::*;
    &[
        (
            "sos",
            &[
                flag("--out", SosJoint),
                flag("--per-image", SosPerImage),
                flag("--report", SosReport),
                flag("--compare-out", SosComparison),
            ],
        ),
        ("demo", &[in_folder(sos::DEMO_JOINT, SosJoint)]),
        ("vendi", &[flag("--out", Vendi), flag("--csv", VendiTable)]),
        ("magbig", &[flag("--out", Magbig), flag("--report", MagbigReport)]),
        ("cultext2i", &[flag("--out", Cultext2i), flag("--report", Cultext2iReport)]),
        (
            "colour",
            &[
                in_folder(colour::DOMINANT_COLOURS, ColourDominant),
                in_folder(colour::PALETTES, ColourPalettes),
                in_folder(colour::VALUES, ColourValues),
            ],
        ),
        (
            "captions",
            &[
                in_folder(captions::TERMS, CaptionsTerms),
                in_folder(captions::TOP_TERMS, CaptionsTopTerms),
                in_folder(captions::COVERAGE, CaptionsCoverage),
            ],
        ),
        ("validate", &[flag("--out", Validation)]),
    ]
};

/// The result files `command` (a `culturelens` subcommand, as its manifest's `command` names it)
/// writes; empty for a command whose outputs are no result table (embeddings, bundles, figures).
pub fn outputs(command: &str) -> &'static [Output] {
    OUTPUTS.iter().find(|(c, _)| *c == command).map_or(&[], |(_, outputs)| outputs)
}

/// Every command that writes result files, with its outputs.
pub fn commands() -> impl Iterator<Item = (&'static str, &'static [Output])> {
    OUTPUTS.iter().copied()
}
