//! The confidence-interval flags of the metric commands (`sos`, `vendi`, `magbig`, `cultext2i`,
//! `clipscore`, `validate`): `--ci LEVEL`, `--bootstrap B`, `--ci-method`, `--seed`, read into a
//! `culturelens_metrics::bootstrap::CiSpec`, and the `uncertainty` record of the provenance (the
//! level, resamples, method, seed, the unit each command resamples and, for SoS, the mode).
//! Without `--ci` nothing of this changes a command's output.

use anyhow::Result;
use culturelens_metrics::bootstrap::{CiMethod, CiSpec, DEFAULT_RESAMPLES, check_level};
use serde_json::{Value, json};

use crate::provenance::{Provenance, value_enum};

/// The help text every command's `long_about` ends with (its own unit is stated before it), as
/// a literal for `concat!`.
macro_rules! ci_help {
    () => {
        "\
Confidence intervals (--ci LEVEL, e.g. 0.95): a nonparametric bootstrap over the unit named above,
--bootstrap B resamples (default 1000) drawn with SplitMix64 from --seed, one stream per stratum
(cell or group; the same seed gives the same intervals on every backend and thread count);
--ci-method bca (default: bias-corrected and accelerated, jackknife acceleration) or percentile,
both as scipy.stats.bootstrap. Each estimate gets <metric>_lo and <metric>_hi columns right after
it (JSON: <metric>_ci {lo, hi}); an undefined interval is left empty. Without --ci the output is
exactly as without these flags."
    };
}
pub(crate) use ci_help;

/// `--ci`, `--bootstrap`, `--ci-method` and `--seed`.
#[derive(clap::Args, Debug, serde::Serialize)]
pub struct CiArgs {
    /// Confidence level of bootstrap intervals (strictly between 0 and 1, e.g. 0.95); adds
    /// <metric>_lo, <metric>_hi beside each estimate.
    #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
    pub ci: Option<f64>,
    /// Bootstrap resamples (>= 1).
    #[arg(long, value_name = "B", default_value_t = DEFAULT_RESAMPLES, value_parser = parse_resamples)]
    pub bootstrap: usize,
    /// How the interval is read off the resamples.
    #[arg(long, value_enum, default_value_t = CiMethodArg::Bca)]
    pub ci_method: CiMethodArg,
    /// Seed of the random draws (the bootstrap's resamples; vendi: also the CUBE protocol's batches).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CiMethodArg {
    Bca,
    Percentile,
}

value_enum!(CiMethodArg);

impl From<CiMethodArg> for CiMethod {
    fn from(m: CiMethodArg) -> CiMethod {
        match m {
            CiMethodArg::Bca => CiMethod::Bca,
            CiMethodArg::Percentile => CiMethod::Percentile,
        }
    }
}

fn parse_level(text: &str) -> Result<f64, String> {
    let level: f64 = text.trim().parse().map_err(|_| format!("`{text}` is not a number"))?;
    check_level(level).map_err(|e| e.to_string())
}

fn parse_resamples(text: &str) -> Result<usize, String> {
    let b: usize = text.trim().parse().map_err(|_| format!("`{text}` is not a whole number"))?;
    if b == 0 {
        return Err(culturelens_metrics::bootstrap::CiError::Resamples.to_string());
    }
    Ok(b)
}

impl CiArgs {
    /// The interval computation asked for, `None` without `--ci`.
    pub fn spec(&self) -> Option<CiSpec> {
        let level = self.ci?;
        Some(
            CiSpec::new(level, self.bootstrap, self.seed, self.ci_method.into())
                .expect("checked by the parsers"),
        )
    }

    /// Records the intervals of a command without options of its own in `provenance`, with
    /// `--ci` only: `--seed` among its seeds and the `uncertainty` record ([`Self::record`]).
    pub fn record_in(&self, provenance: &mut Provenance, unit: &str) {
        if self.ci.is_some() {
            provenance.seed("seed", self.seed);
        }
        provenance.uncertainty(self.record(unit, json!({})));
    }

    /// The provenance's `uncertainty` record: the settings, the resampling `unit` and anything
    /// the command adds (`extra`: an object, e.g. SoS's mode).
    pub fn record(&self, unit: &str, extra: Value) -> Option<Value> {
        let spec = self.spec()?;
        let mut value = json!({
            "method": format!("bootstrap ({})", spec.method.name()),
            "level": spec.level,
            "resamples": spec.resamples,
            "seed": spec.seed,
            "rng": "SplitMix64, one stream per stratum seeded with seed XOR FNV-1a(stratum)",
            "unit": unit,
        });
        if let (Value::Object(map), Value::Object(more)) = (&mut value, extra) {
            map.extend(more);
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_name_the_rule() {
        assert_eq!(parse_level("0.95"), Ok(0.95));
        for bad in ["1.5", "0", "1", "-0.1"] {
            let e = parse_level(bad).unwrap_err();
            assert!(e.contains("strictly between 0 and 1"), "{e}");
        }
        assert!(parse_level("x").unwrap_err().contains("not a number"));
        assert_eq!(parse_resamples("1000"), Ok(1000));
        assert!(parse_resamples("0").unwrap_err().contains("at least 1 resample"));
    }
}
