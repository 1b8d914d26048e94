//! `culturelens tokens`: the tokenizer lens (MAGBIG §5.1). Splits a prompt with the tokenizer of
//! each `--weights` folder (`culturelens_models_io::tokenizer_lens`) and prints the tokens side by
//! side (`culturelens_metrics::tokens`, which the browser shares).

use std::path::PathBuf;

use anyhow::{Result, bail};
use culturelens_metrics::tokens::{TokenView, side_by_side};
use culturelens_models_io::tokenizer_lens;

const CONVENTIONS: &str = "\
How each encoder's tokenizer splits --text, token by token (MAGBIG Sec. 5.1: \"Jurist*in\" becomes
stem, star and feminine suffix; scripts a vocabulary lacks fall back to bytes). Each --weights
folder is read for its tokenizer only (tokenizer.json, or spiece.model as SigLIP ships it);
OpenCLIP folders get open_clip's text cleaning first, as when embedding. Special tokens are
included, no truncation. One column per folder, one row per token position; a cell is the
token's text in quotes (a leading space marks a word start, a '·' after it a word end) and [id];
a byte-fallback piece or byte-level fragment shows its bytes in hex and the character its run
spells, e.g. <E1 88> of \"ሀ\"; the unknown token shows the text it covers: <unk> of \"ሀ\".
--json prints the same tokens as JSON instead: [{\"name\": DIR, \"tokens\": [{\"id\", \"piece\",
\"text\", \"kind\" (text, bytes, special or unknown), \"word_end\"}]}], one object per folder (the
browser's Tokens view shows these tokens for a tokenizer.json).";

/// Arguments of `culturelens tokens`.
#[derive(clap::Args, Debug)]
#[command(about = "Tokenizer lens: how each encoder's tokenizer splits a prompt (MAGBIG Sec. 5.1)", long_about = CONVENTIONS)]
pub struct TokensArgs {
    /// Weights folders whose tokenizers to compare (repeat the flag).
    #[arg(long, required = true, value_name = "DIR")]
    pub weights: Vec<PathBuf>,
    /// The prompt.
    #[arg(long)]
    pub text: String,
    /// Print the tokens as JSON (one object per folder) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// One folder's tokens, as `--json` prints them.
#[derive(serde::Serialize)]
struct Column<'a> {
    name: &'a str,
    tokens: &'a [TokenView],
}

pub fn run(args: &TokensArgs) -> Result<()> {
    if args.text.is_empty() {
        bail!("--text is empty");
    }
    let columns = args
        .weights
        .iter()
        .map(|dir| Ok((dir.display().to_string(), tokenizer_lens(dir, &args.text)?)))
        .collect::<Result<Vec<_>>>()?;
    if args.json {
        let json: Vec<Column> = columns.iter().map(|(name, tokens)| Column { name, tokens }).collect();
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", side_by_side(&columns));
    }
    Ok(())
}
