//! `culturelens captions`: which terms image descriptions use distinctively per (model,
//! language), by Fighting Words (SoS paper §6.1, App. G), and how many of a culture's stereotype
//! terms they cover (Fig. 6). Tokenisation and statistics are `culturelens_metrics::words`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_metrics::words::fighting_words::{Document, coverage, fighting_words};
use culturelens_metrics::words::segment::{lowercase, stop_words, unique_terms};
use culturelens_results::captions::{
    COVERAGE, Coverage, CoverageRow, TERMS, TOP_TERMS, TermRow, Terms, TopTermRow, TopTerms,
};
use culturelens_results::records;
use culturelens_table::{TableError, read_metadata_csv};

use crate::output::{CsvFile, write_csv_files};
use crate::provenance::Provenance;

const CONVENTIONS: &str = "\
Caption analysis (SoS paper Sec. 6.1, App. G). --captions is a CSV with columns image, text (one
description per image, e.g. from a VQA model), and optionally text_language (ISO 639-1; default
--text-language). Its image values are matched exactly against the image column of --manifest,
which also needs model and language (the prompt language). Every caption must name a manifest
image, once; manifest images without a caption are left out (and counted on stderr).
Terms: ICU4X word segmentation (UAX #29; dictionaries for Chinese and Japanese, LSTM for Thai,
Lao, Khmer, Burmese; Korean, Amharic, Arabic, Hindi etc. at spaces and punctuation), word-like
segments only, lower-cased (Unicode default; Turkish/Azerbaijani I/i rule), spaCy 3.8.7 stop
words of the text's language removed; each image counts its unique terms once.
Fighting Words (Monroe et al. 2008): one document per (model, language); idf = ln((1+N)/(1+df))+1
over the N documents; weighted counts y = idf * images with the term; comparison corpus = the
same model's other languages pooled; informative Dirichlet prior alpha = the model's pooled corpus
(document plus other languages); delta = weighted log-odds, z = delta / sigma; significant when
z > 1.96. Outputs in --out (written only when every input is valid):
  terms.csv      every term of every document with images, share, idf, weighted counts, delta, z
  top_terms.csv  the --top significant terms of highest z per document, with the share of the
                 document's images containing each (SoS Fig. 7)
  coverage.csv   with --stereotypes (CSV culture,term, e.g. SeeGULL's visual stereotypes): per
                 document and culture, the culture's distinct terms (lower-cased like the captions)
                 found among the document's significant terms, and their share (SoS Fig. 6)";

/// Arguments of `culturelens captions`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Distinctive caption terms per (model, language) by Fighting Words; stereotype coverage (SoS Sec. 6.1)", long_about = CONVENTIONS)]
pub struct CaptionsArgs {
    /// Captions CSV: image, text[, text_language].
    #[arg(long, value_name = "CSV")]
    pub captions: PathBuf,
    /// Image manifest CSV: image, model, language (as `embed` reads it).
    #[arg(long, value_name = "CSV")]
    pub manifest: PathBuf,
    /// Output folder.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Stereotype list CSV: culture, term.
    #[arg(long, value_name = "CSV")]
    pub stereotypes: Option<PathBuf>,
    /// Significant terms listed per document.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Language of captions without a text_language cell.
    #[arg(long, default_value = "en")]
    pub text_language: String,
}

/// The documents: per (model, language) the unique terms of each captioned image.
fn read_documents(args: &CaptionsArgs) -> Result<Vec<Document>> {
    let manifest = read_metadata_csv(&args.manifest)?;
    let images = manifest.require_nonempty_column("image")?;
    let models = manifest.require_nonempty_column("model")?;
    let languages = manifest.require_nonempty_column("language")?;
    let mut by_image: BTreeMap<&str, usize> = BTreeMap::new();
    for (row, image) in images.iter().enumerate() {
        if let Some(first) = by_image.insert(image, row) {
            return Err(TableError::invalid(
                manifest.cell(row, "image"),
                format!("image {image:?} is listed twice (also data row {first})"),
            )
            .into());
        }
    }
    let captions = read_metadata_csv(&args.captions)?;
    let caption_images = captions.require_nonempty_column("image")?;
    let texts = captions.require_column("text")?;
    let text_languages = captions.column("text_language");
    let mut terms: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for (row, image) in caption_images.iter().enumerate() {
        let Some(&m) = by_image.get(image.as_str()) else {
            return Err(TableError::invalid(
                captions.cell(row, "image"),
                format!("caption for unknown image {image:?} (not in {})", args.manifest.display()),
            )
            .into());
        };
        let language = text_languages.map_or(args.text_language.as_str(), |c| c[row].as_str());
        let language = if language.is_empty() { args.text_language.as_str() } else { language };
        let unique = unique_terms(&texts[row], language)
            .map_err(|e| TableError::invalid(captions.cell(row, "text_language"), e.to_string()))?;
        if terms.insert(m, unique).is_some() {
            return Err(TableError::invalid(
                captions.cell(row, "image"),
                format!("image {image:?} has a second caption"),
            )
            .into());
        }
    }
    let uncaptioned = images.len() - terms.len();
    if uncaptioned > 0 {
        eprintln!("{uncaptioned} manifest images have no caption and are left out");
    }
    let mut docs: BTreeMap<(&str, &str), Vec<BTreeSet<String>>> = BTreeMap::new();
    for (m, t) in terms {
        docs.entry((&models[m], &languages[m])).or_default().push(t);
    }
    Ok(docs
        .into_iter()
        .map(|((model, language), images)| Document {
            model: model.into(),
            language: language.into(),
            images,
        })
        .collect())
}

/// Stereotype terms per culture, lower-cased by the captions' default language.
fn read_stereotypes(path: &Path, language: &str) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let meta = read_metadata_csv(path)?;
    let cultures = meta.require_nonempty_column("culture")?;
    let terms = meta.require_nonempty_column("term")?;
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (culture, term) in cultures.iter().zip(terms) {
        out.entry(culture.clone()).or_default().insert(lowercase(term.trim(), language));
    }
    Ok(out)
}

pub fn run(args: &CaptionsArgs) -> Result<()> {
    stop_words(&args.text_language)?;
    let docs = read_documents(args)?;
    if docs.is_empty() {
        bail!("{}: no captions", args.captions.display());
    }
    let stereotypes =
        args.stereotypes.as_ref().map(|p| read_stereotypes(p, &args.text_language)).transpose()?;
    let scores = fighting_words(&docs).with_context(|| format!("captions {}", args.captions.display()))?;
    let mut terms = Vec::new();
    let mut top = Vec::new();
    let mut covered = Vec::new();
    for doc in &scores {
        let (model, language) = (&doc.model, &doc.language);
        terms.extend(doc.terms.iter().map(|t| TermRow {
            model: model.clone(),
            language: language.clone(),
            n_images: doc.images,
            term: t.term.clone(),
            images: t.images,
            share: t.share,
            idf: t.idf,
            weighted: t.weighted,
            weighted_other: t.weighted_other,
            delta: t.delta,
            z: t.z,
            significant: t.significant(),
        }));
        top.extend(doc.top(args.top).enumerate().map(|(rank, t)| TopTermRow {
            model: model.clone(),
            language: language.clone(),
            rank: rank + 1,
            term: t.term.clone(),
            images: t.images,
            share: t.share,
            z: t.z,
        }));
        for (culture, list) in stereotypes.iter().flatten() {
            let c = coverage(doc, list);
            covered.push(CoverageRow {
                model: model.clone(),
                language: language.clone(),
                culture: culture.clone(),
                stereotypes: c.stereotypes,
                found: c.found,
                coverage: c.coverage,
            });
        }
    }
    let file = |name, (header, rows)| CsvFile { name, header, rows };
    let mut files =
        vec![file(TERMS, records::<Terms>(&(), &terms)), file(TOP_TERMS, records::<TopTerms>(&(), &top))];
    if stereotypes.is_some() {
        files.push(file(COVERAGE, records::<Coverage>(&(), &covered)));
    }
    write_csv_files(&args.out, &files)?;
    let mut provenance = Provenance::new("captions", args);
    for path in [&args.captions, &args.manifest].into_iter().chain(&args.stereotypes) {
        provenance.input(path)?;
    }
    provenance.write_for_dir(&args.out)?;
    eprintln!(
        "wrote Fighting Words of {} (model, language) documents to {}",
        scores.len(),
        args.out.display()
    );
    Ok(())
}
