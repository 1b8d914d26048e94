//! The built-in **synthetic** demo dataset: a deterministic embedding table with planted surface
//! and semantic tendencies, so the SoS pipeline can be shown and tested without any model or
//! generated image. It is not data from any paper and must always be labelled synthetic.
//!
//! Each output embedding is `w_sur(m,l)·L_l + w_sem(m,l)·C_c + 0.3·P_p + 0.2·T_t + 0.35·ε` with
//! fixed random directions per language `L_l`, culture `C_c`, person term `P_p`, template `T_t`
//! and Gaussian noise `ε`. The weights plant known tendencies:
//! - `synth-multilingual` follows the meaning (w_sem = 1.0, w_sur = 0.4) except for Amharic,
//!   where the surface dominates (1.0 vs 0.4);
//! - `synth-monolingual` follows the surface for non-Latin-script languages (zh, ja, ko, am, ar:
//!   w_sur = 1.0, w_sem = 0.5) and is balanced otherwise (0.6 / 0.8);
//! - `synth-bilingual` is balanced (0.7 / 0.7) except for Chinese, its second language, where it
//!   follows the meaning (w_sem = 1.0, w_sur = 0.3).

use culturelens_rng::SplitMix64;

/// Models of the synthetic demo.
pub const MODELS: [&str; 3] = ["synth-multilingual", "synth-monolingual", "synth-bilingual"];
/// ISO 639-1 languages of the synthetic demo.
pub const LANGUAGES: [&str; 8] = ["en", "de", "fr", "zh", "ja", "ko", "am", "ar"];
/// Cultural identity terms of the synthetic demo.
pub const CULTURES: [&str; 10] = [
    "German",
    "French",
    "Chinese",
    "Japanese",
    "Korean",
    "Ethiopian",
    "Egyptian",
    "Mexican",
    "Indian",
    "Nigerian",
];
/// Templates (SoS paper Table 1 ids) and person terms.
pub const TEMPLATES: [&str; 3] = ["a", "b", "c"];
pub const PERSONS: [&str; 3] = ["person", "woman", "man"];
/// Embedding dimension of the demo.
pub const DIM: usize = 64;
/// Seed of the demo; the table is a pure function of it.
pub const SEED: u64 = 42;

/// A synthetic embedding table: row-major `N × DIM` embeddings and named metadata columns.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoTable {
    pub dim: usize,
    pub embeddings: Vec<f32>,
    pub columns: Vec<(String, Vec<String>)>,
}

impl DemoTable {
    pub fn len(&self) -> usize {
        self.embeddings.len() / self.dim
    }

    pub fn is_empty(&self) -> bool {
        self.embeddings.is_empty()
    }

    pub fn column(&self, name: &str) -> Option<&[String]> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }
}

/// Planted (w_sur, w_sem) of a model–language pair (see the module docs).
pub fn planted_weights(model: &str, language: &str) -> (f32, f32) {
    let non_latin = matches!(language, "zh" | "ja" | "ko" | "am" | "ar");
    match (model, language) {
        ("synth-multilingual", "am") => (1.0, 0.4),
        ("synth-multilingual", _) => (0.4, 1.0),
        ("synth-monolingual", _) if non_latin => (1.0, 0.5),
        ("synth-monolingual", _) => (0.6, 0.8),
        ("synth-bilingual", "zh") => (0.3, 1.0),
        _ => (0.7, 0.7),
    }
}

/// Builds the demo table (2,160 rows × 64 dimensions) deterministically from [`SEED`].
pub fn demo_table() -> DemoTable {
    let mut rng = SplitMix64::new(SEED);
    let mut direction = || -> Vec<f32> {
        let v: Vec<f64> = (0..DIM).map(|_| rng.normal()).collect();
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v.iter().map(|x| (x / norm) as f32).collect()
    };
    let lang_dir: Vec<Vec<f32>> = LANGUAGES.iter().map(|_| direction()).collect();
    let cult_dir: Vec<Vec<f32>> = CULTURES.iter().map(|_| direction()).collect();
    let person_dir: Vec<Vec<f32>> = PERSONS.iter().map(|_| direction()).collect();
    let template_dir: Vec<Vec<f32>> = TEMPLATES.iter().map(|_| direction()).collect();

    let names = ["model", "language", "culture", "template", "person", "seed", "prompt"];
    let mut columns: Vec<Vec<String>> = vec![Vec::new(); names.len()];
    let mut embeddings = Vec::new();
    for model in MODELS {
        for (li, language) in LANGUAGES.iter().enumerate() {
            let (w_sur, w_sem) = planted_weights(model, language);
            for (ci, culture) in CULTURES.iter().enumerate() {
                for (ti, template) in TEMPLATES.iter().enumerate() {
                    for (pi, person) in PERSONS.iter().enumerate() {
                        for k in 0..DIM {
                            let noise = 0.35 * rng.normal() as f32 / (DIM as f32).sqrt();
                            embeddings.push(
                                w_sur * lang_dir[li][k]
                                    + w_sem * cult_dir[ci][k]
                                    + 0.3 * person_dir[pi][k]
                                    + 0.2 * template_dir[ti][k]
                                    + noise,
                            );
                        }
                        let prompt = format!("[{language}] template {template}: a {culture} {person}");
                        let row = [model, language, culture, template, person, "42", prompt.as_str()];
                        assert_eq!(columns.len(), row.len());
                        for (col, value) in columns.iter_mut().zip(row) {
                            col.push(value.to_string());
                        }
                    }
                }
            }
        }
    }
    assert_eq!(names.len(), columns.len());
    DemoTable { dim: DIM, embeddings, columns: names.iter().map(|n| n.to_string()).zip(columns).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_is_deterministic_and_complete() {
        let a = demo_table();
        assert_eq!(a.len(), 3 * 8 * 10 * 9);
        assert_eq!(a, demo_table());
        assert!(a.embeddings.iter().all(|v| v.is_finite()));
        assert_eq!(a.column("language").unwrap()[0], "en");
    }

    #[test]
    fn demo_values_equal_the_independent_python_generator() {
        // scripts/fixtures/make_demo_sos_reference.py regenerates the table from the recipe in the
        // module docs (its SHA-256 equals the bytes `culturelens demo --write` saves); these are
        // its float32 bit patterns at (row, dim).
        let a = demo_table();
        for (row, dim, bits) in [
            (0, 0, 0x3e12_8d36u32),
            (0, 1, 0x3dc1_11fa),
            (0, 63, 0x3dd1_59d3),
            (1000, 17, 0xbe28_5040),
            (2159, 63, 0x3dc8_e335),
        ] {
            let v = a.embeddings[row * DIM + dim];
            assert_eq!(v.to_bits(), bits, "row {row}, dim {dim}: {v} vs {}", f32::from_bits(bits));
        }
        let row_1000: Vec<&str> = a.columns.iter().map(|(_, v)| v[1000].as_str()).collect();
        assert_eq!(row_1000[..5], ["synth-monolingual", "zh", "French", "a", "woman"]);
    }
}
