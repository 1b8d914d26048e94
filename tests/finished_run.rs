//! A small finished run, written by the CLI itself, for the `figures` and `report` tests: the
//! demo bundle, SoS on it (joint CSV and report), Vendi per language with the CUBE protocol,
//! MAGBIG, CulText2I with its report and the colour analysis, each with its provenance manifest;
//! plus a hand-made per-layer joint SoS table (the demo has no layers).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use culturelens_table::{Matrix, write_npy};

use crate::common::Cli;

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn npy(path: &Path, rows: &[[f32; 2]]) -> PathBuf {
    let m = Matrix::new(rows.len(), 2, rows.iter().flatten().copied().collect());
    write_npy(&mut std::fs::File::create(path).unwrap(), &m).unwrap();
    path.to_path_buf()
}

/// A PNG of `w × h` pixels: the first `n_first` (row-major) are `first`, the rest `rest`.
fn png(path: &Path, n_first: u32, first: [u8; 3], rest: [u8; 3]) {
    let img =
        image::RgbImage::from_fn(4, 4, |x, y| image::Rgb(if y * 4 + x < n_first { first } else { rest }));
    img.save(path).unwrap();
}

/// The per-layer joint SoS table: model m, layers 0..=2 (and 10, to check numeric order),
/// languages en and ja, cultures Japan and India.
pub const LAYERS_CSV: &str = "model,layer,language,culture,n,sos\n\
m,0,en,India,2,0.1\nm,0,en,Japan,2,0.05\nm,0,ja,India,2,-0.1\nm,0,ja,Japan,2,0.0\n\
m,1,en,India,2,0.0\nm,1,en,Japan,2,-0.05\nm,1,ja,India,2,-0.2\nm,1,ja,Japan,2,-0.1\n\
m,10,en,India,2,-0.1\nm,10,en,Japan,2,-0.15\nm,10,ja,India,2,-0.3\nm,10,ja,Japan,2,-0.25\n";

/// Paths of the run's result files.
pub struct FinishedRun {
    pub dir: PathBuf,
    pub bundle: PathBuf,
    pub sos: PathBuf,
    pub sos_report: PathBuf,
    pub layers: PathBuf,
    pub vendi: PathBuf,
    pub magbig: PathBuf,
    pub cultext2i: PathBuf,
    pub cultext2i_report: PathBuf,
    pub colour: PathBuf,
}

/// Writes the run into `root/run` (inputs that are not results go to `root/work`).
pub fn finished_run(root: &Path) -> FinishedRun {
    let (dir, work) = (root.join("run"), root.join("work"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let run = FinishedRun {
        bundle: dir.join("bundle"),
        sos: dir.join("sos.csv"),
        sos_report: dir.join("sos_report.json"),
        layers: write(&dir.join("sos_layers.csv"), LAYERS_CSV),
        vendi: dir.join("vendi.json"),
        magbig: dir.join("magbig.csv"),
        cultext2i: dir.join("cultext2i.csv"),
        cultext2i_report: dir.join("cultext2i_report.json"),
        colour: dir.join("colour"),
        dir,
    };
    Cli::new("demo-bundle").opt("--out", &run.bundle).run_ok();
    Cli::new("sos")
        .opt("--bundle", &run.bundle)
        .opt("--out", &run.sos)
        .opt("--report", &run.sos_report)
        .run_ok();
    Cli::new("demo").opt("--write", &work).run_ok();
    Cli::new("vendi")
        .opt("--embeddings", work.join("embeddings.npy"))
        .opt("--meta", work.join("meta.csv"))
        .opt("--group-by", "language")
        .opt("--protocol-batch", "8")
        .opt("--repeats", "4")
        .opt("--out", &run.vendi)
        .run_ok();
    let attributes = write(
        &work.join("attributes.csv"),
        "model,language,set,prompt_id,gender\n\
         sd,de,adjectives,1,male\nsd,de,adjectives,1,male\nsd,de,adjectives,2,female\nsd,de,adjectives,2,male\n\
         sd,de,occupations,1,male\nsd,de,occupations,1,female\nsd,en,adjectives,1,male\nsd,en,adjectives,1,male\n\
         sd,en,occupations,1,female\nsd,en,occupations,1,male\nsd,en,occupations,2,male\n",
    );
    Cli::new("magbig").opt("--attributes", &attributes).opt("--out", &run.magbig).run_ok();
    Cli::new("cultext2i")
        .opt("--image-embeddings", npy(&work.join("i.npy"), &[[1.0, 0.0], [0.0, 2.0], [3.0, 4.0], [0.2, 1.0]]))
        .opt(
            "--image-meta",
            write(
                &work.join("im.csv"),
                "model,language,concept,template,nationality\nm,de,city,t,german\nm,de,city,t,german\n\
                 m,es,city,t,spanish\nm,es,city,t,spanish\n",
            ),
        )
        .opt("--text-embeddings", npy(&work.join("t.npy"), &[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]))
        .opt(
            "--text-meta",
            write(
                &work.join("tm.csv"),
                "kind,label,language\nnationality,german,\nnationality,spanish,\ndimension,modern,\nconcept,city,en\n",
            ),
        )
        .opt("--temperature", "100")
        .opt("--out", &run.cultext2i)
        .opt("--report", &run.cultext2i_report)
        .run_ok();
    png(&work.join("a.png"), 12, [255, 0, 0], [0, 0, 128]);
    png(&work.join("b.png"), 0, [255, 0, 0], [0, 0, 128]);
    png(&work.join("c.png"), 8, [240, 230, 200], [20, 120, 40]);
    let manifest = write(
        &work.join("m.csv"),
        "image,model,language,culture\na.png,m,de,x\nb.png,m,de,y\nc.png,m,en,x\n",
    );
    Cli::new("colour").opt("--images", &manifest).opt("--out", &run.colour).opt("--k", "2").run_ok();
    run
}
