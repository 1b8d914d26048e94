//! CLIP's real tokenizer on every prompt of the four prompt sets (issue 32): culturelens'
//! `ClipTokenizer` (the diffusion pipelines' CLIP tokenizer, built from `vocab.json` +
//! `merges.txt`) with CLIP's real BPE vocabulary, against transformers 5.23's `CLIPTokenizer`
//! (= `CLIPTokenizerFast`; transformers 4.57.1's fast tokenizer gives the same ids on all of
//! them). The vocabulary is open_clip's `bpe_simple_vocab_16e6.txt`, from the open_clip_torch
//! wheel that `scripts/fetch_test_weights.sh` fetches; the expected ids are
//! `tests/fixtures/tokens/clip_bpe/`, by `scripts/fixtures/make_tokens_clip_bpe.py`, keyed by the
//! first 12 hex digits of each prompt's sha256 (no prompt text is committed). The prompts are read
//! here with culturelens-prompts from the data mirror, as `culturelens prompts export` writes them.
//!
//! transformers 4.57.1's Python `CLIPTokenizer` is not the reference: with ftfy installed it runs
//! `ftfy.fix_text` first, which straightens a curly apostrophe (`un’ancella` -> `un'ancella`,
//! one MAGBIG Italian prompt), and without ftfy BERT's `BasicTokenizer`, which splits every CJK
//! character into a word of its own (3,911 Chinese and Japanese prompts). culturelens follows the
//! fast tokenizer, which the diffusers pipelines and transformers 5 (where it is the only CLIP
//! tokenizer) use; the test checks that it differs from the slow one exactly there.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use culturelens_files::sha256_hex;
use culturelens_models_io::diffusion::ClipTokenizer;
use culturelens_prompts::{Fetcher, LoadOptions, Origin, PromptSet};
use serde::Deserialize;

const MAX_LENGTH: usize = 77;
/// `<|endoftext|>`: CLIP's end and padding token.
const EOT: u32 = 49407;
/// The merges of the vocabulary: open_clip's and OpenAI's `merges[1 : 49152 - 256 - 2 + 1]`.
const MERGES: usize = 49152 - 256 - 2;

/// GPT-2's byte-to-symbol table, in its order: the printable bytes map to themselves, the rest
/// to U+0100 on.
fn byte_symbols() -> Vec<char> {
    let printable =
        |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
    let mut order: Vec<u32> = (0..256).filter(|&b| printable(b)).collect();
    let mut symbols: Vec<char> = order.iter().map(|&b| char::from_u32(b).unwrap()).collect();
    let mut n = 0;
    for b in 0..256 {
        if !printable(b) {
            order.push(b);
            symbols.push(char::from_u32(256 + n).unwrap());
            n += 1;
        }
    }
    symbols
}

/// `vocab.json` + `merges.txt` in `dir` from open_clip's BPE file, as open_clip's
/// `SimpleTokenizer` builds its vocabulary: the 256 byte symbols, the same with `</w>`, one token
/// per merge, then `<|startoftext|>` (49406) and `<|endoftext|>` (49407).
fn write_vocab(bpe: &Path, dir: &Path) {
    let text = std::fs::read_to_string(bpe).unwrap();
    let merges: Vec<&str> = text.split('\n').skip(1).take(MERGES).collect();
    assert_eq!(merges.len(), MERGES);
    let mut tokens: Vec<String> = byte_symbols().iter().map(char::to_string).collect();
    tokens.extend(byte_symbols().iter().map(|c| format!("{c}</w>")));
    tokens.extend(merges.iter().map(|m| m.replace(' ', "")));
    tokens.extend(["<|startoftext|>".to_string(), "<|endoftext|>".to_string()]);
    assert_eq!(tokens.len(), 49408);
    let vocab: serde_json::Map<String, serde_json::Value> =
        tokens.into_iter().enumerate().map(|(i, t)| (t, i.into())).collect();
    assert_eq!(vocab.len(), 49408, "distinct tokens");
    std::fs::write(dir.join("vocab.json"), serde_json::to_string(&vocab).unwrap()).unwrap();
    std::fs::write(dir.join("merges.txt"), format!("#version: 0.2\n{}\n", merges.join("\n"))).unwrap();
}

fn short_sha(text: &str, n: usize) -> String {
    sha256_hex(text.as_bytes())[..n].to_string()
}

fn ids_sha(ids: &[u32]) -> String {
    short_sha(&ids.iter().map(u32::to_string).collect::<Vec<_>>().join(","), 8)
}

#[derive(Deserialize)]
struct Slow {
    slow_ftfy: Differ,
    slow_basic: Differ,
    fast_4_57: Differ,
}

#[derive(Deserialize)]
struct Differ {
    differ: HashMap<String, String>,
}

/// Every prompt of the four sets, in all their languages, as `prompts export` writes them:
/// (set, language, text).
fn all_prompts() -> Vec<(PromptSet, String, String)> {
    let mirror = culturelens_testkit::upstream_mirror();
    let cache = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(cache.path().to_owned(), Origin::Mirror(mirror));
    let mut out = Vec::new();
    for set in [PromptSet::Sos, PromptSet::Magbig, PromptSet::Cube, PromptSet::Cultext2i] {
        let table = culturelens_prompts::load(set, &fetcher, &LoadOptions::default()).unwrap();
        out.extend(table.rows.into_iter().map(|row| (set, row.language, row.prompt)));
    }
    out
}

#[test]
fn clip_ids_with_the_real_vocabulary_equal_transformers_on_every_prompt() {
    // Expected: key -> (77-token ids, untruncated ids for prompts longer than 77 tokens).
    let mut expected: HashMap<String, (String, Option<String>)> = HashMap::new();
    for line in culturelens_testkit::read_fixture("tokens/clip_bpe/ids.tsv").lines() {
        if line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        expected.insert(cols[0].to_string(), (cols[1].to_string(), cols.get(2).map(|s| s.to_string())));
    }
    let slow: Slow =
        serde_json::from_str(&culturelens_testkit::read_fixture("tokens/clip_bpe/slow.json")).unwrap();
    assert!(slow.fast_4_57.differ.is_empty(), "transformers 4.57.1's fast tokenizer differs from 5.23's");

    let dir = tempfile::tempdir().unwrap();
    write_vocab(&culturelens_testkit::test_weight("open_clip/bpe_simple_vocab_16e6.txt"), dir.path());
    let short = ClipTokenizer::load(dir.path(), MAX_LENGTH).unwrap();
    let long = ClipTokenizer::load(dir.path(), 1024).unwrap();

    let prompts = all_prompts();
    let mut seen: HashSet<String> = HashSet::new();
    let (mut compared, mut longer, mut slow_ftfy, mut slow_basic) = (0, 0, 0, 0);
    let mut first_wrong: Option<String> = None;
    let mut wrong = 0;
    for (set, language, text) in &prompts {
        let key = short_sha(text, 12);
        let (want77, want_full) = expected.get(&key).unwrap_or_else(|| {
            panic!("{set:?} {language} prompt {text:?} ({key}) is not in the fixture: the mirror drifted")
        });
        if !seen.insert(key.clone()) {
            continue;
        }
        compared += 1;
        let ids77 = short.ids(text).unwrap();
        assert_eq!(ids77.len(), MAX_LENGTH);
        let got77 = ids_sha(&ids77);
        let mut ok = &got77 == want77;
        if let Some(want_full) = want_full {
            longer += 1;
            let mut full = long.ids(text).unwrap();
            while full.last() == Some(&EOT) {
                full.pop();
            }
            full.push(EOT);
            assert!(full.len() > MAX_LENGTH, "{text:?}: {} tokens", full.len());
            ok &= &ids_sha(&full) == want_full;
        }
        if !ok {
            wrong += 1;
            first_wrong.get_or_insert_with(|| format!("{set:?} {language} {text:?} ({key})"));
        }
        // Where transformers 4.57.1's Python tokenizer differs, culturelens differs from it too.
        for (differ, count) in
            [(&slow.slow_ftfy.differ, &mut slow_ftfy), (&slow.slow_basic.differ, &mut slow_basic)]
        {
            if let Some(slow_ids) = differ.get(&key) {
                assert_ne!(&got77, slow_ids, "{text:?}: recorded as differing from the slow tokenizer");
                *count += 1;
            }
        }
    }
    println!(
        "CLIP BPE (real vocabulary): {} of {compared} distinct prompts ({} rows of the four sets; {longer} \
         longer than {MAX_LENGTH} tokens, checked untruncated too) with transformers' ids; transformers \
         4.57.1's slow CLIPTokenizer differs on {slow_ftfy} (ftfy) and {slow_basic} (BasicTokenizer), \
         where culturelens follows the fast one",
        compared - wrong,
        prompts.len()
    );
    assert_eq!(wrong, 0, "{wrong} prompts differ; the first: {}", first_wrong.unwrap_or_default());
    assert_eq!(compared, expected.len(), "fixture prompts no set exports any more");
    assert_eq!(slow_ftfy, slow.slow_ftfy.differ.len());
    assert_eq!(slow_basic, slow.slow_basic.differ.len());
    assert!(compared > 29_000 && longer > 0, "{compared} prompts, {longer} longer than {MAX_LENGTH}");
}
