//! A collection to score ([`Collection`]: what its kernel is built from) and its point estimate
//! ([`point_scores`]): the one computation of `culturelens vendi` without `--protocol-batch` or
//! `--ci`, per group, which the Python package's `vendi` calls too.

use std::borrow::Cow;

use burn::tensor::Device;
use culturelens_results::vendi::VendiScores;

use super::{
    CosineRows, Features, Order, ProductPrecision, Route, VendiError, VendiScore, host_dual_product,
    host_product, intdiv, intdiv_of_kernel, kernel_submatrix, precomputed_spectrum, product_tensor,
    spectrum_from_product, spectrum_of_product,
};
use crate::device::Processor;

/// What a collection's kernel is built from.
pub enum Collection {
    /// The cosine kernel's feature map, kept as the f32 rows and their norms.
    Cosine(CosineRows),
    /// The categorical kernel's feature map.
    Features(Features),
    /// A precomputed kernel matrix (row-major n × n).
    Kernel { k: Vec<f64>, n: usize },
}

impl Collection {
    pub fn n(&self) -> usize {
        match self {
            Collection::Cosine(c) => c.n,
            Collection::Features(f) => f.n,
            Collection::Kernel { n, .. } => *n,
        }
    }

    /// The sub-collection of `rows` (in that order).
    pub fn subset(&self, rows: &[usize]) -> Collection {
        match self {
            Collection::Cosine(c) => Collection::Cosine(c.select_rows(rows)),
            Collection::Features(f) => Collection::Features(f.select_rows(rows)),
            Collection::Kernel { k, n } => {
                Collection::Kernel { k: kernel_submatrix(k, *n, rows), n: rows.len() }
            }
        }
    }

    /// The feature map in f64, for the kernels that have one (a cosine map is built here).
    pub fn features(&self) -> Option<Cow<'_, Features>> {
        match self {
            Collection::Cosine(c) => Some(Cow::Owned(c.features())),
            Collection::Features(f) => Some(Cow::Borrowed(f)),
            Collection::Kernel { .. } => None,
        }
    }
}

/// The Vendi scores of one collection (point estimate; `intdiv` when `with_intdiv`), with
/// per-item `quality` (1 when `None`), on `device` (a `processor`) with the product in
/// `precision` ([`ProductPrecision::for_device`]; a precomputed kernel is diagonalised in f32
/// precision, as stored). On a CPU the product is taken on the host (faer's f64 GEMM beats the
/// CPU backend's f64 GEMM, and the cosine dual route builds its f64 rows block by block from the
/// f32 table); elsewhere on the device. `lap` is called after the stages `product` and
/// `eigenvalues`. Only a precomputed kernel can be refused.
#[allow(clippy::too_many_arguments)]
pub fn point_scores(
    items: &Collection,
    q: Order,
    quality: Option<&[f64]>,
    route: Route,
    with_intdiv: bool,
    processor: Processor,
    precision: ProductPrecision,
    device: &Device,
    lap: &mut dyn FnMut(&'static str),
) -> Result<VendiScores, VendiError> {
    // Between the groups of `vendi --group-by` (the Python package's Ctrl-C).
    culturelens_metrics::cancel::checkpoint();
    let spectrum = match items {
        Collection::Kernel { k, n } => precomputed_spectrum(k, *n, ProductPrecision::F32)?,
        Collection::Cosine(c) if processor == Processor::Cpu && route.resolve(c.n, c.d) == Route::Dual => {
            let product = host_dual_product(c);
            lap("product");
            spectrum_of_product(product, c.n, c.d, precision)
        }
        _ => {
            let f = items.features().expect("cosine and categorical kernels have a feature map");
            let product = match processor {
                Processor::Cpu => host_product(&f, route),
                Processor::Gpu => product_tensor(&f, route, precision, device).into_data(),
            };
            lap("product");
            spectrum_from_product(product, &f, precision)
        }
    };
    lap("eigenvalues");
    let score = VendiScore::from_spectrum(&spectrum, items.n(), q, quality);
    let intdiv = with_intdiv.then(|| match (items, items.features()) {
        (Collection::Kernel { k, n }, _) => intdiv_of_kernel(k, *n),
        (_, Some(f)) => intdiv(&f),
        (_, None) => unreachable!("only a precomputed kernel has no feature map"),
    });
    let VendiScore { n, q, vs, qvs, qvs_norm } = score;
    Ok(VendiScores {
        n,
        q,
        vs,
        qvs,
        qvs_norm,
        intdiv,
        protocol: None,
        vs_ci: None,
        qvs_ci: None,
        qvs_norm_ci: None,
    })
}
