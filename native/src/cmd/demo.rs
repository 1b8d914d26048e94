//! `culturelens demo`: SoS on the built-in **synthetic** demo table (no model, no images needed).

use std::path::PathBuf;

use anyhow::Result;
use culturelens_core::demo::demo_table;
use culturelens_core::sos::{Blocking, Pooling};
use culturelens_table::{EmbeddingTable, Matrix, Metadata, save_table};

use crate::cmd::sos::{print_summary, score_table, write_joint_csv};
use crate::device::{DeviceChoice, select_device};

/// Arguments of `culturelens demo`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Run SoS on the built-in synthetic demo table (planted tendencies; not real data)",
    long_about = "Builds the deterministic synthetic demo table (3 models x 8 languages x 10 cultures x 3 \
templates x 3 person terms = 2,160 outputs, 64-d embeddings with planted surface/semantic tendencies; see \
culturelens_core::demo), scores it with SoS and prints the summary. It is synthetic demo data, not results \
from any model."
)]
pub struct DemoArgs {
    /// Also write the demo table (embeddings.npy + meta.csv) and its joint scores (sos.csv) here.
    #[arg(long, value_name = "DIR")]
    pub write: Option<PathBuf>,
    /// Backend that runs the tensor work.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
}

/// The demo table as an [`EmbeddingTable`].
pub fn demo_embedding_table() -> EmbeddingTable {
    let demo = demo_table();
    let rows = demo.len();
    let meta = Metadata::from_columns(None, demo.columns).expect("demo columns are well-formed");
    EmbeddingTable::new(Matrix::new(rows, demo.dim, demo.embeddings), meta)
}

pub fn run(args: &DemoArgs) -> Result<()> {
    let table = demo_embedding_table();
    let device = select_device(args.device)?;
    let (layout, _, report) =
        score_table(table.clone(), Pooling::All, &device, Blocking::Default(args.device.processor()))?;
    println!("culturelens demo: SYNTHETIC demo data (planted tendencies), not results from any model\n");
    print_summary(&layout, &report, &mut std::io::stdout().lock())?;
    if let Some(dir) = &args.write {
        std::fs::create_dir_all(dir)?;
        save_table(&table, &dir.join("embeddings.npy"), Some(&dir.join("meta.csv")))?;
        write_joint_csv(&dir.join("sos.csv"), &report)?;
        println!("\nwrote {}/{{embeddings.npy, meta.csv, sos.csv}}", dir.display());
    }
    Ok(())
}
