//! One or two example command lines per subcommand, shown at the end of its `--help` (a test
//! parses every one with the real argument parser, so an example cannot name a flag that is gone).
//! Values hold no spaces: each example splits on whitespace.

/// `(subcommand, examples)`, in the order of `culturelens --help`.
pub const EXAMPLES: &[(&str, &[&str])] = &[
    (
        "sos",
        &[
            "culturelens sos --embeddings emb.npy --meta emb.csv --out sos.csv --report sos_report.json",
            "culturelens sos --embeddings emb.parquet --out sos.csv --ci 0.95 --device wgpu",
        ],
    ),
    ("demo", &["culturelens demo", "culturelens demo --write demo/"]),
    (
        "vendi",
        &[
            "culturelens vendi --embeddings emb.npy --meta emb.csv --group-by language --out vendi.json --csv vendi.csv",
            "culturelens vendi --meta cube.csv --kernel categorical --columns continent,country,artifact --kernel-weights 0.2,0.3,0.5 --out vendi.json",
        ],
    ),
    (
        "embed",
        &[
            "culturelens embed --images imgs/manifest.csv --weights clip-vit-large-patch14/ --out emb.npy",
            "culturelens embed --images imgs/ --model openai/clip-vit-base-patch32 --out emb.parquet --device wgpu",
        ],
    ),
    (
        "embed-text",
        &["culturelens embed-text --prompts prompts.csv --column prompt --weights clip-l14/ --out text.npy"],
    ),
    (
        "generate",
        &[
            "culturelens generate --pipeline sd-2-1/ --prompt-set sos --languages en,de --out imgs --seed 42",
            "culturelens generate --model stabilityai/stable-diffusion-xl-base-1.0 --prompts prompts.csv --out imgs --device cuda --precision f16",
        ],
    ),
    (
        "import-weights",
        &[
            "culturelens import-weights --arch efficientnet-lite0 --pickle efficientnet-lite0.pth --out lite0/",
        ],
    ),
    ("bundle", &["culturelens bundle --embeddings emb.npy --meta emb.csv --images imgs/ --out bundle/"]),
    ("demo-bundle", &["culturelens demo-bundle --out demo-bundle/"]),
    (
        "prompts",
        &["culturelens prompts list", "culturelens prompts export sos --languages en,de --out sos.csv"],
    ),
    ("magbig", &["culturelens magbig --attributes gender.csv --out magbig.csv"]),
    ("agreement", &["culturelens agreement --labels labels.csv --raters A1,A2,A3 --out agreement.json"]),
    (
        "colour",
        &["culturelens colour --images imgs/manifest.csv --out colour/ --palette-by model,language,culture"],
    ),
    (
        "captions",
        &["culturelens captions --captions captions.csv --manifest imgs/manifest.csv --out captions/"],
    ),
    (
        "tokens",
        &[
            "culturelens tokens --weights clip-vit-large-patch14/ --weights siglip-base-patch16-224/ --text Jurist*in",
        ],
    ),
    (
        "cultext2i",
        &[
            "culturelens cultext2i --image-embeddings img.npy --image-meta img.csv --text-embeddings text.npy --text-meta text.csv --out cultext2i.csv --report report.json",
        ],
    ),
    (
        "validate",
        &[
            "culturelens validate --labels scores.csv --raters A1,A2,A3 --clipscore-cols surface_cos,semantic_cos --out validate.csv",
        ],
    ),
    (
        "figures",
        &["culturelens figures --sos sos.csv --sos-report sos_report.json --vendi vendi.json --out figures/"],
    ),
    ("report", &["culturelens report runs/my-run --out site/"]),
    (
        "merge",
        &[
            "culturelens merge --out emb.npy parts/e1.npy parts/e2.npy",
            "culturelens merge --out imgs imgs-1 imgs-2",
        ],
    ),
    (
        "slurm",
        &[
            "culturelens slurm --dir run1 --tasks 16 --images imgs/manifest.csv --weights clip-l14/ --device wgpu --gres gpu:1",
        ],
    ),
    (
        "classify",
        &[
            "culturelens classify --images imgs/manifest.csv --weights clip-vit-large-patch14/ --attribute gender --out gender.csv",
        ],
    ),
    (
        "clipscore",
        &[
            "culturelens clipscore --images imgs/manifest.csv --caption-cols surface,semantic --weights clip-vit-base-patch32/ --out scores.csv",
        ],
    ),
    ("quality", &["culturelens quality --images imgs/manifest.csv --weights hps-v2.1/ --out quality.csv"]),
];

/// `command` with each subcommand's examples after its help (after what it already shows there).
pub fn with_examples(command: clap::Command) -> clap::Command {
    EXAMPLES.iter().fold(command, |command, (name, lines)| {
        command.mut_subcommand(*name, |sub| {
            let examples = format!("Examples:\n  {}", lines.join("\n  "));
            let text = match sub.get_after_help() {
                Some(before) => format!("{before}\n\n{examples}"),
                None => examples,
            };
            sub.after_help(text)
        })
    })
}
