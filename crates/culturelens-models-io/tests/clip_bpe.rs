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
use culturelens_models_io::clip_bpe;
use culturelens_models_io::diffusion::ClipTokenizer;
use culturelens_prompts::{Fetcher, LoadOptions, Origin, PromptSet};
use serde::Deserialize;

const MAX_LENGTH: usize = 77;
/// `<|endoftext|>`: CLIP's end and padding token.
const EOT: u32 = 49407;

/// `vocab.json` + `merges.txt` in `dir` from open_clip's BPE file (`clip_bpe::open_clip_vocab`,
/// the vocabulary open_clip's `SimpleTokenizer` builds).
fn write_vocab(bpe: &str, dir: &Path) {
    let (vocab, merges) = clip_bpe::open_clip_vocab(bpe).unwrap();
    assert_eq!((vocab.len(), merges.len()), (clip_bpe::VOCAB, clip_bpe::MERGES));
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
    let bpe_path = culturelens_testkit::test_weight("open_clip/bpe_simple_vocab_16e6.txt");
    let bpe = std::fs::read_to_string(&bpe_path).unwrap();
    write_vocab(&bpe, dir.path());
    // The browser's tokenizer, built from the BPE file alone (untruncated, as its lens shows it).
    let shipped = clip_bpe::from_open_clip_bpe(&bpe, &bpe_path).unwrap();
    let short = ClipTokenizer::load(dir.path(), MAX_LENGTH).unwrap();
    let long = ClipTokenizer::load(dir.path(), 1024).unwrap();

    let prompts = all_prompts();
    let mut seen: HashSet<String> = HashSet::new();
    let (mut compared, mut longer, mut slow_ftfy, mut slow_basic) = (0, 0, 0, 0);
    let mut first_wrong: Option<String> = None;
    let mut wrong = 0;
    let mut shipped_wrong = 0;
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
        // The browser's: start, the text's tokens, end; cut to 76 and ended, padded as the CLI pads.
        let mut shipped77 = shipped.encode(text.as_str(), true).unwrap().get_ids().to_vec();
        if shipped77.len() > MAX_LENGTH {
            shipped77.truncate(MAX_LENGTH - 1);
            shipped77.push(EOT);
        }
        shipped77.resize(MAX_LENGTH, EOT);
        if ids_sha(&shipped77) != *want77 {
            shipped_wrong += 1;
        }
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
    println!("the browser's tokenizer (clip_bpe::from_open_clip_bpe): {shipped_wrong} of {compared} differ");
    assert_eq!(
        shipped_wrong, 0,
        "the browser's CLIP tokenizer differs from transformers on {shipped_wrong} prompts"
    );
    assert_eq!(compared, expected.len(), "fixture prompts no set exports any more");
    assert_eq!(slow_ftfy, slow.slow_ftfy.differ.len());
    assert_eq!(slow_basic, slow.slow_basic.differ.len());
    assert!(compared > 29_000 && longer > 0, "{compared} prompts, {longer} longer than {MAX_LENGTH}");
}
