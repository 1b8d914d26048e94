//! The feed-forward activations of the transformer configs (`hidden_act`), on the graph. The
//! CPU passes of `cpu` evaluate the same functions per value.

use burn::tensor::Tensor;
use burn::tensor::activation::{gelu, gelu_approximate, sigmoid};
use serde::{Deserialize, Serialize};

/// The `hidden_act` of a transformers config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `x · sigmoid(1.702 x)` (OpenAI CLIP).
    QuickGelu,
    /// Exact GELU with erf (OpenCLIP/LAION CLIP in transformers, DINOv2).
    Gelu,
    /// The tanh approximation of GELU (SigLIP).
    #[serde(alias = "gelu_new", alias = "gelu_fast")]
    GeluPytorchTanh,
}

impl Activation {
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Activation::QuickGelu => x.clone() * sigmoid(x * 1.702),
            Activation::Gelu => gelu(x),
            Activation::GeluPytorchTanh => gelu_approximate(x),
        }
    }
}
